"""Parse corpus files into :class:`Entry` records.

Formats: the seed format (``*.txt``: a header line kept as the venue, then one
abstract per blank-line-separated paragraph), JSON Lines (``*.jsonl``), CSV
(``*.csv``) and BibTeX (``*.bib``) with ``title``/``abstract`` and optional metadata.

A file with any bad record is rejected whole (one :class:`InputError` naming the file
and position) so that a half-read file never removes entries stored from it earlier.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .records import Entry, Source
from .text import MODIFIER

SUFFIXES = (".txt", ".jsonl", ".csv", ".bib")


@dataclass(frozen=True)
class CorpusFile:
    """A file to read and the path key its entries are stored under."""

    path: Path
    key: str


def discover(paths: list[Path]) -> tuple[list[CorpusFile], list[str]]:
    """Expand directories into the corpus files below them (keys relative to the
    directory); files given directly keep their name as given."""
    files: list[CorpusFile] = []
    errors: list[str] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES)
            if not found:
                errors.append(f"{p}: no {', '.join(SUFFIXES)} files in this folder")
            files += [CorpusFile(f, f.relative_to(p).as_posix()) for f in found]
        elif p.is_file():
            files.append(CorpusFile(p, p.as_posix()))
        else:
            errors.append(f"{p}: no such file or folder; check the path")
    return files, errors


def read_file(cf: CorpusFile) -> list[Entry]:
    """All entries of one file, or :class:`InputError`."""
    raw = cf.path.read_bytes()
    if not raw.strip():
        raise InputError(f"{cf.key}: the file is empty; add abstracts or leave it out")
    if b"\x00" in raw[:4096]:
        raise InputError(f"{cf.key}: binary file, not text; give a .txt, .jsonl, .csv or .bib file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{cf.key}: byte {e.start}: not UTF-8 text; re-save the file as UTF-8") from None
    suffix = cf.path.suffix.lower()
    reader = {".jsonl": _read_jsonl, ".csv": _read_csv, ".bib": _read_bib}.get(suffix, _read_seed)
    entries = reader(text, cf.key)
    if not entries:
        raise InputError(f"{cf.key}: no abstracts found; see README.md for the accepted formats")
    return entries


def _read_seed(text: str, key: str) -> list[Entry]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    venue = ""
    first = paragraphs[0]
    if "\n" not in first and len(first) < 120 and not first.endswith("."):
        venue = first  # the header line, e.g. "ICML 2024 Papers"
        paragraphs = paragraphs[1:]
    return [_entry(key, i, " ".join(p.split()), venue=venue) for i, p in enumerate(paragraphs, 1)]


def _record_entry(rec: object, key: str, ordinal: int, where: str) -> Entry:
    if not isinstance(rec, dict):
        raise InputError(f"{key}:{where}: expected an object with 'title' and 'abstract'")
    abstract = " ".join(str(rec.get("abstract") or "").split())
    if not abstract:
        raise InputError(f"{key}:{where}: the record has no 'abstract'; add one or remove the record")
    authors = rec.get("authors") or ""
    if isinstance(authors, list):
        authors = "; ".join(str(a) for a in authors)
    return _entry(
        key, ordinal, abstract,
        title=" ".join(str(rec.get("title") or "").split()),
        venue=str(rec.get("venue") or ""), authors=str(authors), year=str(rec.get("year") or ""),
        url=str(rec.get("url") or ""), doi=str(rec.get("doi") or ""),
    )


def _read_jsonl(text: str, key: str) -> list[Entry]:
    entries = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{key}:{lineno}: not valid JSON ({e.msg}); fix or remove the line") from None
        entries.append(_record_entry(rec, key, len(entries) + 1, f"line {lineno}"))
    return entries


def _read_csv(text: str, key: str) -> list[Entry]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "abstract" not in [f.strip().lower() for f in reader.fieldnames]:
        raise InputError(f"{key}:1: the CSV header has no 'abstract' column")
    entries = []
    try:
        for row in reader:
            rec = {(k or "").strip().lower(): v for k, v in row.items()}
            entries.append(_record_entry(rec, key, len(entries) + 1, f"line {reader.line_num}"))
    except csv.Error as e:
        raise InputError(f"{key}:{reader.line_num}: malformed CSV ({e})") from None
    return entries


def _read_bib(text: str, key: str) -> list[Entry]:
    import bibtexparser  # only needed for .bib files

    library = bibtexparser.parse_string(text)
    if library.failed_blocks:
        block = library.failed_blocks[0]
        line = getattr(block, "start_line", 0) + 1
        raise InputError(f"{key}:{line}: malformed BibTeX entry; fix it or remove it")
    entries = []
    for bib in library.entries:
        f = {k.lower(): _unbrace(v.value) for k, v in bib.fields_dict.items()}
        rec = {
            "title": f.get("title", ""), "abstract": f.get("abstract", ""),
            "authors": f.get("author", "").replace(" and ", "; "), "year": f.get("year", ""),
            "venue": f.get("booktitle") or f.get("journal", ""), "url": f.get("url", ""),
            "doi": f.get("doi", ""),
        }
        entries.append(_record_entry(rec, key, len(entries) + 1, f"@{bib.key}"))
    return entries


def _unbrace(value: object) -> str:
    return " ".join(str(value).replace("{", "").replace("}", "").split())


def _entry(key: str, ordinal: int, text: str, **meta: str) -> Entry:
    # Identity is the file key plus the text: unchanged abstracts keep their id across
    # runs (and across moves within a file), an edited abstract gets a new one.
    digest = hashlib.sha256(f"{key}\0{text}".encode()).hexdigest()[:16]
    label = meta.get("title") or method_name(text) or first_words(text)
    return Entry(id=digest, label=label, text=text, source=Source(key, ordinal), **meta)


# Acronyms of fields, not of methods: never a label.
_GENERIC = frozenset("""
LLM LLMs MLLM MLLMs ML AI RL DRL NLP GNN GNNs CNN CNNs RNN RNNs PDE PDEs ODE ODEs SOTA
NOs NO DNN DNNs MDP MDPs POMDP GPU GPUs CPU API APIs LM LMs VLM VLMs SGD KL OOD IID
ReLU PII RNA DNA
""".split())
_CUE = re.compile(r"\b(propose|proposes|introduce|introduces|present|presents|develop|"
                  r"develops|called|named|dubbed|termed|coined)\b", re.I)
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*\b")


def _is_name(tok: str) -> bool:
    if MODIFIER.search(tok):
        return False
    upper = sum(c.isupper() for c in tok)
    return (upper >= 2 or (upper == 1 and any(c.isdigit() for c in tok) and len(tok) > 2)
            or (upper == 1 and not tok[0].isupper())) and tok not in _GENERIC and len(tok) >= 3


def method_name(text: str) -> str:
    """The name of the method an abstract introduces ("BiLLM"), or ''."""
    for cue in _CUE.finditer(text):
        tail = text[cue.end(): cue.end() + 160]
        tail = re.split(r"[.;]\s", tail)[0]
        # "Cross-Task Linearity (CTL)": the acronym in brackets is the name.
        bracket = re.search(r"\(([A-Za-z][A-Za-z0-9\-]{1,14})\)", tail[:110])
        if bracket and _is_name(bracket.group(1)):
            return bracket.group(1)
        names = [m for m in _NAME.finditer(tail) if _is_name(m.group(0))]
        if names:
            name = names[0].group(0)
            # "TIME WEAVER": an all-caps name continues over following all-caps words.
            more = re.match(r"(?:\s+[A-Z][A-Z0-9\-]+\b)+", tail[names[0].end():])
            return name + more.group(0) if name.isupper() and more else name
    return ""


def first_words(text: str, n: int = 6) -> str:
    ws = text.split()
    return " ".join(ws[:n]).rstrip(",.;:") + ("…" if len(ws) > n else "")
