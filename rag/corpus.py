"""Parse corpus files into :class:`Entry` records.

Formats: the seed format (``*.txt``: a header line kept as the venue, then one
abstract per blank-line-separated paragraph), and the bibliographic formats of
:mod:`rag.formats` (BibTeX, RIS, CSL-JSON, JSON lines of records, arXiv or
OpenAlex, CSV). Anything else is refused, never stored as text.

A malformed file is rejected whole (one :class:`InputError` naming the file and
position) so that a half-read file never removes entries stored from it earlier; a
record without an abstract is skipped with a warning and the rest is read.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import formats, labels
from .errors import InputError
from .formats import Record, Skip
from .records import Entry, Source
from .safety import strip_control

SUFFIXES = (".txt", ".jsonl", ".json", ".csv", ".bib", ".ris")
# An entry far longer than an abstract is a whole paper or a broken file: cut it.
MAX_CHARS = 20_000


@dataclass(frozen=True)
class CorpusFile:
    """A file to read and the path key its entries are stored under."""

    path: Path
    key: str


@dataclass
class Parsed:
    """What one file gave: its entries and the warning lines about what was left out."""

    entries: list[Entry]
    warnings: list[str] = field(default_factory=list)
    control: int = 0  # control characters and escape sequences removed


def discover(paths: list[Path]) -> tuple[list[CorpusFile], list[str], list[str]]:
    """Expand directories into the corpus files below them (keys relative to the
    directory); files given directly keep their name as given. Returns the files,
    the errors (paths that are not there) and the files of a folder left out."""
    files: list[CorpusFile] = []
    errors: list[str] = []
    skipped: list[str] = []
    for p in paths:
        if p.is_dir():
            every = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
            found = [f for f in every if f.suffix.lower() in SUFFIXES]
            skipped += [f"{f.relative_to(p).as_posix()}: not a format rag reads; skipped"
                        for f in every if f.suffix.lower() not in SUFFIXES]
            if not found:
                errors.append(f"{p}: no files in a format rag reads ({formats.FORMATS})")
            files += [CorpusFile(f, f.relative_to(p).as_posix()) for f in found]
        elif p.is_file():
            files.append(CorpusFile(p, p.as_posix()))
        else:
            errors.append(f"{p}: no such file or folder; check the path")
    return files, errors, skipped


def read_file(cf: CorpusFile) -> Parsed:
    """All entries of one file, or :class:`InputError`."""
    suffix = cf.path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"{cf.key}: not a format rag reads; give {formats.FORMATS}")
    raw = cf.path.read_bytes()
    if not raw.strip():
        raise InputError(f"{cf.key}: the file is empty; add abstracts or leave it out")
    if b"\x00" in raw[:4096]:
        raise InputError(f"{cf.key}: binary file, not text; give {formats.FORMATS}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{cf.key}: byte {e.start}: not UTF-8 text; re-save the file as UTF-8") from None
    if suffix == ".txt":
        # A RIS export saved as .txt is read as RIS, never stored as seed text.
        if formats.looks_like_ris(text):
            items = formats.read_ris(text, cf.key)
        else:
            return _checked(cf.key, Parsed(_read_seed(text, cf.key)))
    else:
        reader = {".json": formats.read_json, ".jsonl": formats.read_json, ".csv": _read_csv,
                  ".bib": formats.read_bibtex, ".ris": formats.read_ris}[suffix]
        items = reader(text, cf.key)
    entries, skips, warnings = [], [], []
    for where, rec in items:
        if isinstance(rec, Skip):
            skips.append(rec)
            continue
        entry = _record_entry(rec, cf.key, len(entries) + 1)
        if len(rec.abstract) > MAX_CHARS:
            warnings.append(f"{cf.key} {where}: {len(rec.abstract):,} characters, far longer "
                            f"than an abstract; cut at {MAX_CHARS:,}")
        entries.append(entry)
    return _checked(cf.key, Parsed(entries, formats.skipped_lines(cf.key, skips) + warnings))


def _checked(key: str, parsed: Parsed) -> Parsed:
    if not parsed.entries:
        raise InputError(f"{key}: no abstracts found; see README.md for the accepted formats")
    parsed.entries, parsed.control = _without_control(parsed.entries)
    if parsed.control:
        parsed.warnings.append(f"{key}: {parsed.control} control characters or terminal escape "
                               "sequences removed")
    return parsed


def _read_seed(text: str, key: str) -> list[Entry]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    venue = ""
    first = paragraphs[0]
    if "\n" not in first and len(first) < 120 and not first.endswith("."):
        venue = first  # the header line, e.g. "ICML 2024 Papers"
        paragraphs = paragraphs[1:]
    return [_entry(key, i, " ".join(p.split())[:MAX_CHARS], venue=venue)
            for i, p in enumerate(paragraphs, 1)]


def _record_entry(rec: Record, key: str, ordinal: int) -> Entry:
    return _entry(
        key, ordinal, rec.abstract[:MAX_CHARS], title=rec.title, venue=rec.venue,
        authors="; ".join(rec.authors), year=rec.year, url=rec.url, doi=rec.doi, key=rec.key,
        kind=rec.kind, pages=rec.pages, volume=rec.volume, publisher=rec.publisher,
    )


def _without_control(entries: list[Entry]) -> tuple[list[Entry], int]:
    """Entries with control characters and terminal escape sequences removed from
    every field (a title holding ESC ] 0; renames a terminal window), and how many
    went. Identity follows the cleaned text."""
    out, removed = [], 0
    for e in entries:
        fields = {}
        for name in ("text", "label", "title", "venue", "authors", "year", "url", "doi", "key",
                     "kind", "pages", "volume", "publisher"):
            value, n = strip_control(getattr(e, name))
            fields[name] = " ".join(value.split()) if name != "text" else value
            removed += n if name != "label" else 0  # the label repeats the title
        if any(fields[k] != getattr(e, k) for k in fields):
            text = " ".join(fields.pop("text").split())
            e = replace(e, id=_entry(e.source.path, e.source.ordinal, text).id, text=text, **fields)
        out.append(e)
    return out, removed


def _read_csv(text: str, key: str):
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "abstract" not in [f.strip().lower() for f in reader.fieldnames]:
        raise InputError(f"{key}:1: the CSV header has no 'abstract' column")
    try:
        for row in reader:
            rec = formats.plain({(k or "").strip().lower(): v for k, v in row.items()})
            where = f"line {reader.line_num}"
            yield where, rec if rec.abstract else Skip(where, rec.title)
    except csv.Error as e:
        raise InputError(f"{key}:{reader.line_num}: malformed CSV ({e})") from None


def _entry(path: str, ordinal: int, text: str, **meta: str) -> Entry:
    # Identity is the file key plus the text: unchanged abstracts keep their id across
    # runs (and across moves within a file), an edited abstract gets a new one.
    digest = hashlib.sha256(f"{path}\0{text}".encode()).hexdigest()[:16]
    label = labels.label(text, meta.get("title", ""))
    return Entry(id=digest, label=label, text=text, source=Source(path, ordinal), **meta)
