"""BibTeX for cited entries: stable citation keys and records built from stored
metadata only (never from model text), written with bibtexparser."""

from __future__ import annotations

import re
import unicodedata

import bibtexparser
from bibtexparser import model

from .records import Entry


def year_of(entry: Entry) -> str:
    if entry.year:
        return entry.year
    found = re.search(r"\b(19|20)\d{2}\b", entry.venue)
    return found.group(0) if found else ""


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[A-Za-z0-9]+", ascii_text)
    return "".join(words[:3]).lower()[:24] or "entry"


def citation_keys(entries: list[Entry]) -> dict[str, str]:
    """Entry id -> key like ``billm2024``: derived from label and year, so the same
    entry keeps its key across runs; clashes get a, b, c... in source order."""
    keys: dict[str, str] = {}
    taken: dict[str, int] = {}
    for e in sorted(entries, key=lambda e: (e.source.path, e.source.ordinal)):
        base = f"{_slug(e.label)}{year_of(e)}"
        n = taken.get(base, 0)
        taken[base] = n + 1
        keys[e.id] = base if n == 0 else f"{base}{chr(ord('a') + n - 1)}"
    return keys


def _value(value: str) -> str:
    """The writer braces every value; unbalanced braces in the text would break
    the file, so only those are dropped (LaTeX such as $\\sqrt{T}$ stays)."""
    depth = 0
    for ch in value:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            break
    return value if depth == 0 else value.replace("{", "").replace("}", "")


def to_bibtex(entries: list[Entry], keys: dict[str, str]) -> str:
    library = bibtexparser.Library()
    for e in entries:
        # Double braces around the title keep its capitals (BiLLM) in any style.
        fields = {
            "title": e.title or e.label,
            "author": e.authors.replace("; ", " and "),
            "booktitle": e.venue,
            "year": year_of(e),
            "url": e.url,
            "doi": e.doi,
            "abstract": e.text,
            "note": f"{e.source.path} #{e.source.ordinal}",
        }
        library.add(model.Entry("inproceedings" if e.venue else "misc", keys[e.id],
                                [model.Field(k, "{" + _value(v) + "}" if k == "title" else _value(v))
                                 for k, v in fields.items() if v]))
    return bibtexparser.write_string(library)
