"""Checking a generated sentence against the one source it cites.

A sentence passes when (1) every number, acronym and named method in it occurs in
the source, (2) it is close in meaning to some sentence of the source, and (3) it
does not flip that sentence's polarity (a "not" on one side only). These catch what
a tiny model gets wrong: invented specifics, empty shells ("The answer is no."),
and contradictions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .records import Entry
from .text import MODIFIER, STOPWORDS, sentences, specific_terms, words

MIN_SIMILARITY = 0.62  # cosine to the best source sentence; empty shells score < 0.4
_NEGATION = re.compile(r"\b(not|no|never|cannot|neither|nor|none)\b|n't\b", re.I)

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SCALED = re.compile(r"(\d+(?:\.\d+)?)([kKmMbB])")
_SCALES = {"k": "thousand", "m": "million", "b": "billion"}
_ACRONYM = re.compile(r"([A-Z]{2,5})s?")
_BREAK = re.compile(r"[^\w\s-]|\b(?:" + "|".join(sorted(STOPWORDS)) + r")\b")
_QUOTED = re.compile(r"[\"“]([^\"”]{3,})[\"”]")

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    similarity: float
    best_sentence: str
    reason: str = ""


def _norm(term: str) -> str:
    t = term.lower()
    return t[:-1] if len(t) > 2 and t.endswith("s") else t


def missing_terms(text: str, source: str) -> list[str]:
    """Specific terms of ``text`` that ``source`` never uses (plurals folded)."""
    have = {_norm(t) for t in specific_terms(source)}
    low = source.lower()
    vocab = {_norm(w) for w in words(source)}
    initials = _initials(low)

    def present(t: str) -> bool:
        # "LLM-empowered" is there when the source says "LLM ... empowered";
        # "7B" when it says "7-billion".
        if NUMBER.fullmatch(t):  # "4" is not in "8.41"
            return bool(re.search(rf"(?<![\d.,]){re.escape(t)}(?![\d]|[.,]\d)", low))
        scaled = _SCALED.fullmatch(t)
        return (_norm(t) in have or t.lower() in low or _spelled_out(t, initials)
                or ("-" in t and all(p.isalpha() and _norm(p) in vocab for p in t.lower().split("-")))
                or bool(scaled and re.search(rf"(?<![\d.]){re.escape(scaled.group(1))}[\s-]"
                                             rf"{_SCALES[scaled.group(2).lower()]}\b", low)))

    return sorted(t for t in specific_terms(text) if not present(MODIFIER.sub("", t)))


def names(text: str) -> set[str]:
    """The names ``text`` gives: its specific terms less numbers and the acronyms
    it writes out ("DNN" beside "deep neural network"), which name concepts."""
    initials = _initials(text.lower())
    return {t for t in specific_terms(text) if not t[0].isdigit() and not _spelled_out(t, initials)}


def _initials(low: str) -> str:
    """First letters of the words of ``low``, a space where a stopword or
    punctuation breaks a phrase: "deep reinforcement learning" gives "drl"."""
    return " ".join("".join(w[0] for w in words(part) if w[0].isalpha()) for part in _BREAK.split(low))


def _spelled_out(term: str, initials: str) -> bool:
    """An acronym ("RL", "LLMs") whose words the source writes out in full."""
    m = _ACRONYM.fullmatch(term)
    return bool(m) and m.group(1).lower() in initials


class Verifier:
    def __init__(self, embed: Embed):
        self._embed = embed
        self._cache: dict[str, tuple[list[str], np.ndarray]] = {}

    def source_sentences(self, entry: Entry) -> tuple[list[str], np.ndarray]:
        """The entry's sentences and their unit vectors (cached per entry)."""
        if entry.id not in self._cache:
            sents = sentences(entry.text) or [entry.text]
            self._cache[entry.id] = (sents, self._embed(sents))
        return self._cache[entry.id]

    def closest(self, entry: Entry, vec: np.ndarray) -> tuple[str, float]:
        sents, vecs = self.source_sentences(entry)
        sims = vecs @ vec
        i = int(np.argmax(sims))
        return sents[i], float(sims[i])

    def closest_sentences(self, entry: Entry, vec: np.ndarray, n: int) -> list[tuple[str, np.ndarray]]:
        """The ``n`` sentences closest to ``vec`` with their vectors, in the abstract's order."""
        sents, vecs = self.source_sentences(entry)
        return [(sents[i], vecs[i]) for i in sorted(np.argsort(-(vecs @ vec))[:n])]

    def check(self, claim: str, entry: Entry, vec: np.ndarray | None = None) -> Verdict:
        """``vec``: the claim's embedding when the caller already has it."""
        best, sim = self.closest(entry, self._embed([claim])[0] if vec is None else vec)
        missing = missing_terms(claim, entry.text)
        # Titles or phrases in quotation marks must be the source's own words.
        missing += [q for q in _QUOTED.findall(claim) if q.lower() not in entry.text.lower()]
        if missing:
            return Verdict(False, sim, best, f"not in the source: {', '.join(missing)}")
        if sim < MIN_SIMILARITY:
            return Verdict(False, sim, best, f"too far from the source ({sim:.2f})")
        if bool(_NEGATION.search(claim)) != bool(_NEGATION.search(best)):
            return Verdict(False, sim, best, "polarity differs from the source")
        return Verdict(True, sim, best)
