"""Small typed records that flow through the pipeline.

Foreign shapes (Chroma's column results, llama.cpp's chunk dicts) are converted into
these at the module that talks to the foreign library, so the rest of the code only
sees these.
"""

from __future__ import annotations

import base64
import re
import zlib
from dataclasses import asdict, dataclass, field

from . import labels


@dataclass(frozen=True)
class Source:
    """Where an entry came from: a file (as given, or relative to the corpus dir) and
    the entry's 1-based position in that file."""

    path: str
    ordinal: int

    def to_json(self) -> dict:
        return {"path": self.path, "ordinal": self.ordinal}


@dataclass(frozen=True)
class Entry:
    """One paper abstract with its metadata."""

    id: str
    label: str
    text: str
    source: Source
    title: str = ""
    venue: str = ""
    authors: str = ""
    year: str = ""
    url: str = ""
    doi: str = ""
    key: str = ""  # the source's own citation key, kept for BibTeX
    kind: str = ""  # BibTeX entry type
    pages: str = ""
    volume: str = ""
    publisher: str = ""

    @property
    def author_list(self) -> list[str]:
        """Names as "Family, Given" (stored joined by "; ")."""
        return [a for a in self.authors.split("; ") if a]

    @property
    def short_authors(self) -> str:
        """"Hu et al.", "Ho and Jain", "Ho" or ""."""
        family = [a.split(",")[0] for a in self.author_list]
        if len(family) > 2:
            return f"{family[0]} et al."
        return " and ".join(family)

    @property
    def year_or_venue_year(self) -> str:
        if self.year:
            return self.year
        found = re.search(r"\b(19|20)\d{2}\b", self.venue)
        return found.group(0) if found else ""

    def reference(self, n: int) -> str:
        """The reference-list line ``[n] …`` (see :meth:`citation`)."""
        return f"[{n}] {self.citation()}"

    def citation(self) -> str:
        """Who, when, what, where, from stored metadata only:
        ``Hu et al. 2022, LoRA: Low-Rank Adaptation of… (ICLR) doi:10.…``; the file
        and position stand in when there is no DOI or URL."""
        who = " ".join(p for p in (self.short_authors, self.year) if p)
        title = self.title or self.label
        if len(title) > 90:
            title = title[:90].rsplit(" ", 1)[0] + "…"
        line = f"{who + ', ' if who else ''}{title}"
        if self.venue:
            line += f" ({self.venue})"
        if self.doi:
            return f"{line} doi:{self.doi}"
        if self.url:
            return f"{line} {self.url}"
        return f"{line} {self.source.path} #{self.source.ordinal}"

    def to_json(self) -> dict:
        """Bibliographic metadata for ``--json`` citations and results."""
        return {"id": self.id, "label": self.label, "label_is_title": bool(self.title) and
                self.label == self.title, "title": self.title, "authors": self.author_list,
                "year": self.year_or_venue_year, "venue": self.venue, "doi": self.doi,
                "url": self.url, "key": self.key, "source": self.source.to_json()}

    @property
    def name(self) -> str:
        """How a sentence can name the paper: its title or method name; a label that
        names its subject ("watermark stealing") or opening words cannot."""
        return self.label if self.label == self.title or labels.is_name(self.label) else "this paper"

    @property
    def title_key(self) -> str:
        """Normalised title and year: how two files' copies of a paper without a
        shared DOI are recognised ("Attention is all you need." == "Attention Is All
        You Need")."""
        words = re.findall(r"[^\W_]+", self.title.casefold())
        return f"{' '.join(words)}|{self.year}" if words and self.year else ""

    @property
    def idents(self) -> list[str]:
        """What makes two entries the same paper: the DOI, the title and year."""
        return ([f"doi:{self.doi.lower()}"] if self.doi else []) + \
            ([f"title:{self.title_key}"] if self.title_key else [])

    def metadata(self) -> dict[str, str | int]:
        """Flat metadata as stored next to the vectors (Chroma takes scalars only).
        Empty fields are left out: each is a row of its own in Chroma's SQLite
        (about a tenth of an index's size when most entries have only an abstract)."""
        meta = {k: v for k, v in asdict(self).items() if k not in ("text", "source", "id") and v != ""}
        meta.update(path=self.source.path, ordinal=self.source.ordinal)
        if self.title_key:
            meta["tkey"] = self.title_key
        return meta

    def stored_text(self) -> dict[str, str]:
        """The text as an entry row's metadata: compressed, since Chroma keeps every
        metadata string twice (its table and an index over the values, which cannot
        leave a key out) and an abstract is most of a row (bench/README.md, "Disk per
        entry"). zlib and base85 take an abstract to about 65% of its bytes."""
        return {"ztext": base64.b85encode(zlib.compress(self.text.encode("utf-8"), 9)).decode("ascii")}

    @classmethod
    def from_metadata(cls, id: str, text: str | None, meta: dict) -> "Entry":
        """An entry as stored: its text is the row's document in indexes written while
        the store wrote Chroma documents, its "text" metadata until 2026-12-02, and
        :meth:`stored_text` since."""
        if text is None:
            packed = meta.get("ztext")
            text = (zlib.decompress(base64.b85decode(packed)).decode("utf-8") if packed
                    else str(meta.get("text", "")))
        fields = {k: str(meta.get(k, "") or "") for k in OPTIONAL}
        if fields["label"].endswith("…") and not fields["title"]:
            fields["label"] = labels.label(text)  # stored before labels named subjects
        return cls(id=id, text=text, source=Source(str(meta["path"]), int(meta["ordinal"])),
                   **fields)


# The metadata fields an entry may leave empty (and that are then not stored).
OPTIONAL = ("label", "title", "venue", "authors", "year", "url", "doi", "key", "kind", "pages",
            "volume", "publisher")


@dataclass(frozen=True)
class Chunk:
    """A window of an entry's sentences small enough for the embedder; ``start`` and
    ``end`` are its place in the entry's text, which is what the store keeps."""

    id: str
    entry_id: str
    index: int
    text: str
    start: int = 0
    end: int = 0

    @staticmethod
    def cut(text: str, start: int, end: int) -> str:
        """The chunk's text from its entry's text (whitespace runs as one space, as
        the chunker joins its sentences)."""
        return " ".join(text[start:end].split())


@dataclass(frozen=True)
class Hit:
    """One retrieved entry: the entry, its calibrated relevance in [0, 1], the raw
    signals that produced it, and the chunk that matched best (the snippet)."""

    entry: Entry
    score: float
    dense: float
    lexical: float
    snippet: str
    rank: int = 0

    def to_json(self) -> dict:
        return {"rank": self.rank, **self.entry.to_json(), "score": round(self.score, 4),
                "snippet": self.snippet}


@dataclass
class IngestReport:
    """What one ingest run changed (the `rag ingest --json` contract)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    entries: int = 0
    chunks: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # records and files left out
    duplicates: list[str] = field(default_factory=list)  # papers already stored elsewhere
    control_removed: int = 0  # control characters and escape sequences stripped

    def to_json(self) -> dict:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out
