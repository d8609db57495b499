"""Keyword search (BM25 via bm25s) over whole entries, plus the query-term coverage
that makes lexical evidence comparable across queries.

Researchers type exact method names ("BiLLM", "R-UCBE") and rare keywords; dense
vectors of a small embedder blur those, so this signal is fused with the dense one.
The index is cached on disk under the store's revision and rebuilt only after a write.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter
from pathlib import Path

import bm25s
import numpy as np

from .text import STOPWORDS, words


def terms(text: str) -> list[str]:
    """Index terms: lower-cased words without stopwords, hyphenated words also split
    into their parts ("morph-tokens" matches "morph tokens"), plural 's' removed."""
    out = []
    for w in words(text):
        parts = [w] + (w.split("-") if "-" in w else [])
        for p in parts:
            if p in STOPWORDS or not p:
                continue
            if len(p) > 3 and p.endswith("s") and not p.endswith("ss"):
                p = p[:-1]
            out.append(p)
    return out


class LexicalIndex:
    """BM25 over entries, with document frequencies for query-term coverage."""

    def __init__(self, ids: list[str], texts: list[str]):
        self.ids = ids
        docs = [terms(t) for t in texts]
        self._bm25 = bm25s.BM25()
        self._bm25.index(docs, show_progress=False)
        df: Counter[str] = Counter()
        for d in docs:
            df.update(set(d))
        n = max(len(docs), 1)
        self._idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self._max_idf = math.log(1 + (n + 0.5) / 0.5)
        self._doc_terms = [frozenset(d) for d in docs]
        self.row_of = {e: r for r, e in enumerate(ids)}

    @classmethod
    def cached(cls, cache_dir: Path, revision: str, load_corpus) -> "LexicalIndex":
        """Load the index built for ``revision``, or build it from ``load_corpus()``
        (returning ids and texts) and cache it."""
        path = cache_dir / f"bm25-{revision}.pkl"
        if path.exists():
            try:
                with path.open("rb") as f:
                    return pickle.load(f)
            except Exception:
                path.unlink(missing_ok=True)  # a torn cache file is rebuilt
        index = cls(*load_corpus())
        cache_dir.mkdir(parents=True, exist_ok=True)
        for old in cache_dir.glob("bm25-*.pkl"):
            old.unlink(missing_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            pickle.dump(index, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        return index

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every entry (row order of ``ids``)."""
        q = [t for t in terms(query) if t in self._idf]
        if not q or not self.ids:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float32)

    def idf(self, term: str) -> float:
        return self._idf.get(term, 0.0)

    def coverage(self, query: str, rows: list[int]) -> list[float]:
        """Share of the query's idf mass found in each given entry, in [0, 1]. Terms
        unknown to the collection weigh the most, so a query about something absent
        (a dataset no abstract names) scores low everywhere."""
        q = set(terms(query))
        if not q:
            return [0.0 for _ in rows]
        weight = {t: self._idf.get(t, self._max_idf) for t in q}
        total = sum(weight.values())
        return [sum(w for t, w in weight.items() if t in self._doc_terms[r]) / total for r in rows]

    def has_rarest(self, query: str, rows: list[int]) -> list[bool]:
        """Whether each given entry uses the query's rarest known term, compared by
        its first six letters ("explaining" meets "explainable")."""
        known = [t for t in terms(query) if t in self._idf]
        if not known:
            return [True for _ in rows]
        stem = max(known, key=self._idf.__getitem__)[:6]
        return [any(t.startswith(stem) for t in self._doc_terms[r]) for r in rows]
