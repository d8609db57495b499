"""The one check of a sentence against its source that needs no reading: every
number, acronym and named method in it must occur there.

A tiny model invents specifics (a benchmark, a model size, a figure); this catches
them exactly and for free. Whether the source *supports* the sentence is the
judge's to say (rag/judge.py); this check runs beside it, since a trained reader
can still miss one wrong digit.
"""

from __future__ import annotations

import re

from .text import MODIFIER, STOPWORDS, specific_terms, words


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SCALED = re.compile(r"(\d+(?:\.\d+)?)([kKmMbB])")
_SCALES = {"k": "thousand", "m": "million", "b": "billion"}
_ACRONYM = re.compile(r"([A-Z]{2,5})s?")
_BREAK = re.compile(r"[^\w\s-]|\b(?:" + "|".join(sorted(STOPWORDS)) + r")\b")
_QUOTED = re.compile(r"[\"“]([^\"”]{3,})[\"”]")


def invented(claim: str, source: str) -> list[str]:
    """What a claim names that its source does not: specific terms, and titles or
    phrases in quotation marks that are not the source's own words."""
    return missing_terms(claim, source) + [q for q in _QUOTED.findall(claim) if q.lower() not in source.lower()]


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
                or any(w in low for w in _LOOSE.get(_norm(t), ()))
                or _title_acronym(t, source)
                or ("-" in t and all(p.isalpha() and _norm(p) in vocab for p in t.lower().split("-")))
                or bool(scaled and re.search(rf"(?<![\d.]){re.escape(scaled.group(1))}[\s-]"
                                             rf"{_SCALES[scaled.group(2).lower()]}\b", low)))

    return sorted(t for t in specific_terms(text) if not present(MODIFIER.sub("", t)))


# A field's acronym is there when the source names the field in looser words: an
# abstract on "an instruction-following language model" speaks of an LLM.
_LOOSE = {"llm": ("language model",), "lm": ("language model",), "mllm": ("multimodal", "multi-modal"),
          "vlm": ("vision-language", "vision language"), "gnn": ("graph neural",),
          "rl": ("reinforcement learning",), "drl": ("reinforcement learning",), "nlp": ("natural language",)}


# A run of capitalised words, small words between them: a title ("Elucidating the
# Design Space of Diffusion-Based Generative Models").
_TITLE_RUN = re.compile(r"[A-Z][\w-]*(?:\s+(?:(?:of|the|a|an|for|in|on|with|and|to|via)\s+)*[A-Z][\w-]*){2,}")


def _title_acronym(term: str, source: str) -> bool:
    """Whether ``term`` is an acronym a reader makes from a title in ``source``: its
    letters are initials of the title's words in order, the first and last words'
    among them ("EDM" for "Elucidating the Design Space of Diffusion-Based Generative
    Models"), where the source never writes it."""
    m = _ACRONYM.fullmatch(term)
    if not m or len(m.group(1)) < 3:
        return False
    letters = m.group(1).lower()
    for run in _TITLE_RUN.finditer(source):
        initials = "".join(p[0].lower() for w in run.group(0).split() if w[0].isupper() for p in w.split("-") if p)
        if initials[0] == letters[0] and initials[-1] == letters[-1] and _subsequence(letters[1:-1], initials[1:-1]):
            return True
    return False


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(c in it for c in short)


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


# Words whose loss changes what a sentence claims: negations, hedges, comparisons,
# quantifiers. A statement may drop none of them from the words it copies.
_CRITICAL = frozenset("""not no never cannot neither nor none without fail fails failed unlike may might
can could would should possibly potentially likely suggest suggests only up to at least most
more less fewer lower higher than over under above below nearly almost approximately about roughly
some all every each both either partly partially linear sublinear superlinear upper
while whereas but however although though yet instead rather""".split())
_THEY = {"the authors": "we", "their": "our", "them": "us", "theirs": "ours"}
_MAX_GAP = 3  # source words a copied statement may skip in one place


_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-+.%]*[A-Za-z0-9+%]|[A-Za-z0-9]|[,;:()]")
_DELIMITERS = frozenset(",;:()")


def _copy_tokens(text: str) -> list[str]:
    """Lower-cased words and clause punctuation, the third person put back in the first."""
    low = " " + text.lower() + " "
    for third, first in _THEY.items():
        low = low.replace(f" {third} ", f" {first} ")
    return [t.rstrip(".") for t in _TOKEN.findall(low)]


def copied(claim: str, sources: list[str]) -> bool:
    """Whether ``claim`` is the source's own words, trimmed: at least 85% of its words
    occur in order in one source sentence (or two adjacent ones), skipping at most
    ``_MAX_GAP`` source words at a time, or a whole clause between commas or
    brackets, and never a word that changes what is claimed (a negation, a hedge,
    a comparison, a number); the words it adds change nothing either. Such a
    statement cannot relate facts that the source does not."""
    c = [t for t in _copy_tokens(claim) if t not in _DELIMITERS]
    if not c:
        return False
    spans = sources + [a + " " + b for a, b in zip(sources, sources[1:])]
    return any(_trimmed_copy(c, _copy_tokens(s)) for s in spans)


def _changes_meaning(tokens: list[str]) -> bool:
    return any(t in _CRITICAL or NUMBER.search(t) for t in tokens)


def _trimmed_copy(c: list[str], raw: list[str]) -> bool:
    pos = [k for k, t in enumerate(raw) if t not in _DELIMITERS]
    s = [raw[k] for k in pos]
    # Longest common subsequence, then walk back to see which words were skipped.
    n, m = len(c), len(s)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if c[i] == s[j] else max(table[i + 1][j], table[i][j + 1])
    if table[0][0] < 0.85 * n:
        return False
    i = j = 0
    matched, added = [], []
    while i < n and j < m:
        if c[i] == s[j]:
            matched.append(pos[j])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            added.append(c[i])
            i += 1
        else:
            j += 1
    added += c[i:]
    if _changes_meaning(added):
        return False
    for a, b in zip(matched, matched[1:]):
        between = raw[a + 1:b]
        gap = [t for t in between if t not in _DELIMITERS]
        if not gap:
            continue
        # A clause set off by commas or brackets may go whole ("BiLLM, which ...,
        # achieves"); a few words may go from within a clause, never across one.
        clause = between[0] in _DELIMITERS and between[-1] in _DELIMITERS
        short = len(gap) <= _MAX_GAP and len(gap) == len(between)
        if _changes_meaning(gap) or not (clause or short):
            return False
    return True
