"""Small typed records that flow through the pipeline.

Foreign shapes (Chroma's column results, llama.cpp's chunk dicts) are converted into
these at the module that talks to the foreign library, so the rest of the code only
sees these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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

    def reference(self, n: int) -> str:
        """The reference-list line: ``[n] label — venue, path #ordinal`` (the label is
        the title when there is one)."""
        return f"[{n}] {self.label} — {self.venue or 'no venue'}, {self.source.path} #{self.source.ordinal}"

    @property
    def name(self) -> str:
        """How a sentence can name the paper: its title or method name; a label made
        of the abstract's first words (they end in "…") names nothing."""
        return "this paper" if self.label.endswith("…") else self.label

    def metadata(self) -> dict[str, str | int]:
        """Flat metadata as stored next to the vectors (Chroma takes scalars only)."""
        meta = {k: v for k, v in asdict(self).items() if k not in ("text", "source", "id")}
        meta.update(path=self.source.path, ordinal=self.source.ordinal)
        return meta

    @classmethod
    def from_metadata(cls, id: str, text: str, meta: dict) -> "Entry":
        fields = {k: str(meta.get(k, "") or "") for k in
                  ("label", "title", "venue", "authors", "year", "url", "doi")}
        return cls(id=id, text=text, source=Source(str(meta["path"]), int(meta["ordinal"])),
                   **fields)


@dataclass(frozen=True)
class Chunk:
    """A window of an entry's sentences small enough for the embedder."""

    id: str
    entry_id: str
    index: int
    text: str


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
        return {
            "rank": self.rank,
            "id": self.entry.id,
            "label": self.entry.label,
            "score": round(self.score, 4),
            "source": self.entry.source.to_json(),
            "snippet": self.snippet,
        }


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

    def to_json(self) -> dict:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out
