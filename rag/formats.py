"""Bibliographic formats: read each exporter's records into one plain shape.

What researchers have: reference-manager exports (BibTeX/BibLaTeX from Zotero,
JabRef and Better BibTeX; RIS from Mendeley, EndNote and Zotero; CSL-JSON from
Zotero), the arXiv metadata snapshot (JSON lines) and OpenAlex works (JSON lines,
the abstract as an inverted index), plus the project's own JSONL/CSV records. Each
reader yields :class:`Record`s, or a :class:`Skip` for a record without an abstract
(real exports always hold some: books, talks, records never given one).

Each format is read by a kept library where one exists: bibtexparser for BibTeX,
rispy for RIS, pylatexenc for LaTeX markup in BibTeX and arXiv text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .errors import InputError

# What `rag ingest` reads, for the messages that refuse anything else.
FORMATS = "BibTeX (.bib), RIS (.ris), CSL-JSON (.json), JSON lines (.jsonl: records, " \
          "the arXiv snapshot, OpenAlex works), CSV (.csv), seed text (.txt)"


@dataclass
class Record:
    """One paper as a file gives it; every field but the abstract may be empty."""

    abstract: str
    title: str = ""
    authors: list[str] = field(default_factory=list)  # "Family, Given"
    year: str = ""
    venue: str = ""
    doi: str = ""
    url: str = ""
    key: str = ""  # the source's own citation key (Better BibTeX, CSL id)
    kind: str = ""  # BibTeX entry type: article, inproceedings, misc...
    pages: str = ""
    volume: str = ""
    publisher: str = ""


@dataclass(frozen=True)
class Skip:
    """A record that holds no abstract: named in one warning line, not stored."""

    where: str
    title: str


Item = tuple[str, "Record | Skip"]  # (position for messages, record)


# -- shared field clean-up -----------------------------------------------------------
def clean(value: object) -> str:
    return " ".join(str(value or "").split())


def doi_of(value: object) -> str:
    """A bare, lower-case DOI ("10.1109/cvpr.2016.90") from any written form."""
    found = re.search(r"10\.\d{4,9}/\S+", clean(value))
    return found.group(0).rstrip(".,;").lower() if found else ""


def year_in(value: object) -> str:
    found = re.search(r"\b(1[89]|20)\d{2}\b", clean(value))
    return found.group(0) if found else ""


def _name(family: str, given: str = "") -> str:
    family, given = clean(family), clean(given)
    return f"{family}, {given}" if family and given else family or given


def person(name: str) -> str:
    """One person's name as "Family, Given", whichever way it was written ("Hu,
    Edward J.", "Edward J. Hu", "Ludwig van Beethoven"), by BibTeX's own rules."""
    from bibtexparser.middlewares.names import parse_single_name_into_parts

    name = clean(name)
    if not name:
        return ""
    try:
        parts = parse_single_name_into_parts(name)
    except Exception:  # bibtexparser raises on unbalanced braces and the like
        return name
    family = " ".join(parts.von + parts.last + ([",", *parts.jr] if parts.jr else []))
    return _name(family.replace(" ,", ","), " ".join(parts.first))


def people(text: str) -> list[str]:
    """A free-text author list split into names: "A; B", "A and B", "Ho, Jonathan",
    "Jonathan Ho, Ajay Jain and Pieter Abbeel", "Ho, J., Jain, A."."""
    text = clean(text)
    if not text:
        return []
    if ";" in text:
        parts = text.split(";")
    elif re.search(r"\s+and\s+", text) and "," in text.split(" and ")[0] and \
            all(" " in p.strip() for p in text.split(" and ")[0].split(",")):
        # arXiv style "A B, C D and E F": commas separate whole names.
        parts = re.split(r",\s*|\s+and\s+", text)
    elif re.search(r"\s+and\s+", text):
        parts = re.split(r"\s+and\s+", text)  # BibTeX style: "Hu, Edward and Shen, Y."
    else:
        pieces = [p.strip() for p in text.split(",")]
        if all(" " not in p for p in pieces) and len(pieces) % 2 == 0:
            # "Ho, Jonathan" or "Ho, J., Jain, A.": family and given alternate.
            parts = [f"{pieces[i]}, {pieces[i + 1]}" for i in range(0, len(pieces), 2)]
        else:
            parts = pieces
    return [n for n in (person(p) for p in parts) if n]


_LATEX_HINT = re.compile(r"[\\{}$~]|--")


def delatex(text: str) -> str:
    """LaTeX markup as plain Unicode text: ``4$\\times$`` -> "4×", ``Gr{\\"o}ber``
    -> "Gröber". Zotero escapes a literal "$\\times$" as ``\\$\\textbackslash
    times\\$``, hence a second pass over what the first one reveals."""
    from pylatexenc.latex2text import LatexNodes2Text

    decoder = LatexNodes2Text()
    for _ in range(2):
        if not _LATEX_HINT.search(text):
            break
        # A bare % would start a comment and an odd $ a formula that never ends.
        text = re.sub(r"(?<!\\)%", r"\\%", text)
        if len(re.findall(r"(?<!\\)\$", text)) % 2:
            text = re.sub(r"(?<!\\)\$", r"\\$", text)
        try:
            text = decoder.latex_to_text(text)
        except Exception:  # pylatexenc is tolerant; keep the text if it gives up
            break
    return clean(text)


# -- BibTeX ---------------------------------------------------------------------------
def read_bibtex(text: str, key: str) -> Iterator[Item]:
    import logging

    import bibtexparser

    # Its own log lines would repeat, in two lines, the one-line error given below.
    logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)
    library = bibtexparser.parse_string(text)
    if library.failed_blocks:
        block = library.failed_blocks[0]
        line = getattr(block, "start_line", 0) + 1
        raise InputError(f"{key}:{line}: malformed BibTeX entry; fix it or remove it")
    for bib in library.entries:
        f = {k.lower(): str(v.value) for k, v in bib.fields_dict.items()}
        where = f"@{bib.key}"
        title = delatex(f.get("title", ""))
        abstract = delatex(f.get("abstract", ""))
        if not abstract:
            yield where, Skip(where, title)
            continue
        date = f.get("year") or f.get("date", "")
        yield where, Record(
            abstract=abstract, title=title,
            authors=[delatex(n) for n in people(f.get("author", ""))],
            year=year_in(date), venue=delatex(f.get("booktitle") or f.get("journal")
                                              or f.get("journaltitle", "")),
            doi=doi_of(f.get("doi", "")), url=clean(f.get("url", "")), key=bib.key,
            kind=bib.entry_type.lower(), pages=clean(f.get("pages", "")).replace("--", "–"),
            volume=clean(f.get("volume", "")), publisher=delatex(f.get("publisher", "")),
        )


# -- RIS --------------------------------------------------------------------------------
_RIS_KIND = {"JOUR": "article", "JFULL": "article", "EJOUR": "article", "CONF": "inproceedings",
             "CPAPER": "inproceedings", "BOOK": "book", "CHAP": "incollection",
             "THES": "phdthesis", "RPRT": "techreport", "UNPB": "unpublished"}


def looks_like_ris(text: str) -> bool:
    return bool(re.match(r"\s*TY  - ", text))


def read_ris(text: str, key: str) -> Iterator[Item]:
    import rispy

    try:
        records = rispy.loads(text)
    except Exception as e:  # rispy raises plain IOError/ValueError on a bad line
        raise InputError(f"{key}: malformed RIS ({clean(e)[:80]}); fix it or re-export") from None
    for n, r in enumerate(records, 1):
        where = f"record {n}"
        title = clean(r.get("title") or r.get("primary_title") or r.get("translated_title"))
        abstract = clean(r.get("abstract") or r.get("notes_abstract"))
        if not abstract:
            yield where, Skip(where, title)
            continue
        pages = "–".join(p for p in (clean(r.get("start_page")), clean(r.get("end_page"))) if p)
        urls = r.get("urls") or []
        yield where, Record(
            abstract=abstract, title=title,
            authors=[person(a) for a in (r.get("authors") or r.get("first_authors") or [])],
            year=year_in(r.get("year") or r.get("publication_year") or r.get("date")),
            venue=clean(r.get("secondary_title") or r.get("journal_name")
                        or r.get("alternate_title1") or r.get("alternate_title3")),
            doi=doi_of(r.get("doi")) or next((doi_of(u) for u in urls if doi_of(u)), ""),
            url=clean(urls[0]) if urls else "", key=clean(r.get("id")),
            kind=_RIS_KIND.get(clean(r.get("type_of_reference")), "misc"), pages=pages,
            volume=clean(r.get("volume")), publisher=clean(r.get("publisher")),
        )


# -- JSON: CSL-JSON arrays, JSON lines of records, arXiv and OpenAlex -----------------------
_CSL_KIND = {"article-journal": "article", "paper-conference": "inproceedings",
             "book": "book", "chapter": "incollection", "thesis": "phdthesis",
             "report": "techreport", "article": "misc"}


def read_json(text: str, key: str) -> Iterator[Item]:
    """A JSON array (CSL-JSON, or records), an OpenAlex API page (``results``), or
    JSON lines (records, arXiv, OpenAlex)."""
    whole = None
    if text.lstrip().startswith("[") or (text.lstrip().startswith("{") and "\n" in text.strip()
                                         and not text.lstrip().splitlines()[0].rstrip().endswith("}")):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{key}:{e.lineno}: not valid JSON ({e.msg}); fix the file") from None
    if whole is not None:
        items = whole
        if isinstance(whole, dict):  # an API page of works, or one record
            items = whole.get("results", [whole] if "title" in whole else None)
        if not isinstance(items, list):
            raise InputError(f"{key}: a JSON object, not records; give a JSON array of records "
                             "(CSL-JSON), an OpenAlex results page, or one record per line")
        for n, rec in enumerate(items, 1):
            yield from _json_record(rec, key, f"record {n}")
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{key}:{lineno}: not valid JSON ({e.msg}); fix or remove the line") from None
        yield from _json_record(rec, key, f"line {lineno}")


def _json_record(rec: object, key: str, where: str) -> Iterator[Item]:
    if not isinstance(rec, dict):
        raise InputError(f"{key}:{where}: expected an object with 'title' and 'abstract'")
    if "abstract_inverted_index" in rec:
        r = _openalex(rec)
    elif "authors_parsed" in rec or {"categories", "update_date"} <= rec.keys():
        r = _arxiv(rec)
    elif "issued" in rec or isinstance(rec.get("author"), list) or "container-title" in rec:
        r = _csl(rec)
    else:
        r = plain(rec)
    yield where, r if r.abstract else Skip(where, r.title)


def plain(rec: dict) -> Record:
    """The project's own record shape (JSONL or CSV): title, abstract, authors,
    year, venue, url, doi, and optionally key, pages, volume, publisher."""
    authors = rec.get("authors") or rec.get("author") or ""
    names = [person(str(a)) for a in authors] if isinstance(authors, list) else people(str(authors))
    return Record(
        abstract=clean(rec.get("abstract")), title=clean(rec.get("title")), authors=names,
        year=year_in(rec.get("year")), venue=clean(rec.get("venue")), doi=doi_of(rec.get("doi")),
        url=clean(rec.get("url")), key=clean(rec.get("key")), pages=clean(rec.get("pages")),
        volume=clean(rec.get("volume")), publisher=clean(rec.get("publisher")),
    )


def _csl(rec: dict) -> Record:
    authors = []
    for a in rec.get("author") or []:
        if isinstance(a, dict):
            authors.append(_name(a.get("family") or a.get("literal", ""), a.get("given", "")))
    parts = ((rec.get("issued") or {}).get("date-parts") or [[]])[0] or [""]
    ident = clean(rec.get("id"))
    return Record(
        abstract=clean(rec.get("abstract")), title=clean(rec.get("title")),
        authors=[a for a in authors if a],
        year=year_in(parts[0]) or year_in((rec.get("issued") or {}).get("raw")),
        venue=clean(rec.get("container-title") or rec.get("event-title")),
        doi=doi_of(rec.get("DOI")), url=clean(rec.get("URL")),
        # Zotero's ids are citation keys; other tools write URLs or numbers.
        key=ident if re.fullmatch(r"[A-Za-z][\w:.\-]*", ident) else "",
        kind=_CSL_KIND.get(clean(rec.get("type")), "misc"), pages=clean(rec.get("page")),
        volume=clean(rec.get("volume")), publisher=clean(rec.get("publisher")),
    )


def _arxiv(rec: dict) -> Record:
    parsed = rec.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        authors = [_name(p[0], p[1] if len(p) > 1 else "") for p in parsed if p]
    else:
        authors = people(rec.get("authors", ""))
    arxiv_id = clean(rec.get("id"))
    first = ((rec.get("versions") or [{}])[0] or {}).get("created", "")
    return Record(
        abstract=delatex(rec.get("abstract", "")), title=delatex(rec.get("title", "")),
        authors=[delatex(a) for a in authors],
        year=year_in(first) or year_in(rec.get("update_date")),
        venue=clean(rec.get("journal-ref")) or "arXiv",
        doi=doi_of(rec.get("doi")) or (f"10.48550/arxiv.{arxiv_id}".lower() if arxiv_id else ""),
        url=f"https://arxiv.org/abs/{arxiv_id}" if arxiv_id else "", kind="misc",
    )


def _openalex(rec: dict) -> Record:
    source = ((rec.get("primary_location") or {}).get("source") or {})
    return Record(
        abstract=inverted_to_text(rec.get("abstract_inverted_index")),
        title=clean(rec.get("title") or rec.get("display_name")),
        authors=[person((a.get("author") or {}).get("display_name", ""))
                 for a in rec.get("authorships") or [] if isinstance(a, dict)],
        year=year_in(rec.get("publication_year")), venue=clean(source.get("display_name")),
        doi=doi_of(rec.get("doi")), url=clean(rec.get("doi") or rec.get("id")),
        kind="article" if rec.get("type") == "article" else "misc",
    )


def inverted_to_text(index: object) -> str:
    """OpenAlex's ``{word: [positions]}`` back into the abstract."""
    if not isinstance(index, dict):
        return ""
    words: dict[int, str] = {}
    for word, positions in index.items():
        for p in positions or []:
            if isinstance(p, int):
                words[p] = word
    return clean(" ".join(words[p] for p in sorted(words)))


def skipped_lines(key: str, skips: Iterable[Skip], limit: int = 5) -> list[str]:
    """One warning line per record without an abstract; a bulk file with thousands
    of them gets a count after the first few."""
    skips = list(skips)
    lines = [f"{key} {s.where}{f' ({s.title[:60]})' if s.title else ''}: no abstract; skipped"
             for s in skips[:limit]]
    if len(skips) > limit:
        lines.append(f"{key}: {len(skips) - limit} more records without an abstract skipped")
    return lines
