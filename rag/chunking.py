"""Sentence-aware chunks that fit the embedder's token window.

all-MiniLM-L6-v2 silently truncates at 256 word pieces and a third of the seed
abstracts are longer, so abstracts are cut into windows of whole sentences that fit,
each window sharing its first sentence(s) with the end of the previous one so that
a statement spanning a boundary is still embedded whole somewhere.
"""

from __future__ import annotations

import re
from typing import Callable

from .records import Chunk, Entry
from .text import sentences

VERSION = "sentences-v2"

TokenCounter = Callable[[str], int]


def chunker_id(max_tokens: int, overlap: int) -> str:
    """Recorded in the index: a different chunking needs a rebuild."""
    return f"{VERSION}/{max_tokens}/{overlap}"


def _split_long(sentence: str, count: TokenCounter, max_tokens: int) -> list[str]:
    """A sentence longer than the window is cut into word windows that fit."""
    words, pieces, current = sentence.split(), [], []
    for w in words:
        if current and count(" ".join(current + [w])) > max_tokens:
            pieces.append(" ".join(current))
            current = []
        current.append(w)
    if current:
        pieces.append(" ".join(current))
    return pieces


def chunk_entry(entry: Entry, count: TokenCounter, max_tokens: int = 200,
                overlap: int = 1) -> list[Chunk]:
    """Windows of consecutive sentences, each at most ``max_tokens`` word pieces
    (special tokens included), consecutive windows sharing ``overlap`` sentences."""
    units: list[str] = []
    for s in sentences(entry.text):
        units += _split_long(s, count, max_tokens) if count(s) > max_tokens else [s]
    sizes = [count(u) for u in units]

    windows: list[tuple[int, int]] = []
    start = 0
    while start < len(units):
        end, used = start, 0
        while end < len(units) and (end == start or used + sizes[end] <= max_tokens):
            used += sizes[end]
            end += 1
        windows.append((start, end))
        if end >= len(units):
            break
        # Overlap, but always move forward by at least one sentence.
        start = max(end - overlap, start + 1)
        while start < end and sum(sizes[start:end]) + sizes[end] > max_tokens:
            start += 1
    spans = _spans(entry.text, units)
    return [Chunk(id=f"{entry.id}:{i}", entry_id=entry.id, index=i, text=" ".join(units[a:b]),
                  start=spans[a][0], end=spans[b - 1][1]) for i, (a, b) in enumerate(windows)]


def _spans(text: str, units: list[str]) -> list[tuple[int, int]]:
    """Where each unit lies in ``text``: units are its sentences (or word runs of a
    long one) in order, whitespace aside."""
    out, at = [], 0
    for u in units:
        m = re.compile(r"\s+".join(map(re.escape, u.split()))).search(text, at)
        start, at = (m.start(), m.end()) if m else (at, at)  # never: units come from text
        out.append((start, at))
    return out
