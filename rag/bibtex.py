"""BibTeX for cited entries: stable citation keys and records built from stored
metadata only (never from model text), written with bibtexparser."""

from __future__ import annotations

import re
import unicodedata

import bibtexparser
from bibtexparser import model

from .records import Entry


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[A-Za-z0-9]+", ascii_text)
    return "".join(words[:3]).lower()[:24] or "entry"


def citation_keys(entries: list[Entry]) -> dict[str, str]:
    """Entry id -> citation key. The source's own key (Better BibTeX's
    ``hu_lora_2022``) is kept, so that existing ``[@key]`` citations still match;
    others are derived from label and year (``billm2024``), so the same entry keeps
    its key across runs. Clashes get a, b, c... in source order."""
    keys: dict[str, str] = {}
    taken: dict[str, int] = {}
    ordered = sorted(entries, key=lambda e: (not e.key, e.source.path, e.source.ordinal))
    for e in ordered:
        base = e.key or f"{_slug(e.label)}{e.year_or_venue_year}"
        n = taken.get(base, 0)
        taken[base] = n + 1
        keys[e.id] = base if n == 0 else f"{base}{chr(ord('a') + n - 1)}"
    return keys


def _value(value: str) -> str:
    """A field value as BibTeX readers (biber, pandoc) parse it: LaTeX. The writer
    braces every value, so unbalanced braces are dropped; a bare %, & or # (a
    comment, an alignment tab, a macro parameter) is escaped, and so is an odd $
    ("under $50"); balanced math such as $\\sqrt{T}$ stays."""
    depth = 0
    for ch in value:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            break
    if depth != 0:
        value = value.replace("{", "").replace("}", "")
    value = re.sub(r"(?<!\\)([%&#])", r"\\\1", value)
    if len(re.findall(r"(?<!\\)\$", value)) % 2:
        value = re.sub(r"(?<!\\)\$", r"\\$", value)
    return value


_VENUE_FIELD = {"article": "journal", "inproceedings": "booktitle", "incollection": "booktitle"}


def to_bibtex(entries: list[Entry], keys: dict[str, str]) -> str:
    library = bibtexparser.Library()
    for e in entries:
        kind = e.kind or ("inproceedings" if e.venue else "misc")
        # Double braces around the title keep its capitals (BiLLM) in any style.
        fields = {
            "title": e.title or e.label,
            "author": " and ".join(e.author_list),
            _VENUE_FIELD.get(kind, "howpublished"): e.venue,
            "year": e.year_or_venue_year,
            "volume": e.volume,
            "pages": e.pages.replace("–", "--"),
            "publisher": e.publisher,
            "doi": e.doi,
            "url": e.url,
            "abstract": e.text,
            "note": f"{e.source.path} #{e.source.ordinal}",
        }
        library.add(model.Entry(kind, keys[e.id],
                                [model.Field(k, "{" + _value(v) + "}" if k == "title" else _value(v))
                                 for k, v in fields.items() if v]))
    return bibtexparser.write_string(library)
