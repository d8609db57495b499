"""Hybrid retrieval: dense chunk hits and BM25 fused, folded to entries, scored.

Each candidate entry gets three signals: ``dense`` (cosine of its best chunk),
``bm25`` (relative to the query's best BM25 score) and ``coverage`` (the idf share of
the query's terms that occur in the entry, comparable across queries). A logistic
model over them, fitted by ``bench/calibrate.py`` on the dev questions
(``eval/questions.jsonl`` dev split and ``eval/holdout.jsonl``), gives both the
ranking and a relevance score in [0, 1] that reads as "probability this entry
answers the question".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .lexical import LexicalIndex, terms
from .records import Hit
from .text import sentences

if TYPE_CHECKING:
    from .store import ChunkHit

# Fitted by bench/calibrate.py (logistic regression, dev split); see its output.
WEIGHTS = {"bias": -8.356, "dense": 10.057, "bm25": 1.257, "coverage": 5.028}

_DENSE_POOL = 40  # chunk neighbours asked of the store per query
_LEXICAL_POOL = 20  # BM25 top entries added to the candidates


@dataclass(frozen=True)
class Candidate:
    entry_id: str
    dense: float
    bm25: float
    coverage: float
    chunk: ChunkHit  # the best-matching chunk

    def logit(self, w: dict[str, float] = WEIGHTS) -> float:
        return (w["bias"] + w["dense"] * self.dense + w["bm25"] * self.bm25
                + w["coverage"] * self.coverage)


def candidates(store, lexical: LexicalIndex, qvec: np.ndarray, query: str,
               only: list[str] | None = None) -> list[Candidate]:
    """Every entry that either signal puts near the top (or exactly the entries
    ``only``), with all three signals."""
    best: dict[str, ChunkHit] = {}
    if only is None:
        for h in store.query_chunks(qvec, _DENSE_POOL):
            if h.entry_id not in best or h.similarity > best[h.entry_id].similarity:
                best[h.entry_id] = h
    bm25 = lexical.scores(query)
    row_of = lexical.row_of
    # The best few without sorting every score (83 ms of a search at 1M entries).
    pool = np.argpartition(-bm25, _LEXICAL_POOL)[:_LEXICAL_POOL] if len(bm25) > _LEXICAL_POOL else np.arange(len(bm25))
    top_lex = [lexical.ids[r] for r in pool[np.argsort(-bm25[pool], kind="stable")] if bm25[r] > 0]
    missing = [e for e in (only if only is not None else top_lex) if e not in best]
    best.update(store.chunk_similarities(qvec, missing))
    ids = [e for e in best if e in row_of]
    rows = [row_of[e] for e in ids]
    top = float(bm25.max()) if len(bm25) else 0.0
    cover = lexical.coverage(query, rows)
    return [Candidate(e, best[e].similarity, float(bm25[r]) / top if top > 0 else 0.0, c, best[e])
            for e, r, c in zip(ids, rows, cover)]


def score(c: Candidate) -> float:
    return 1.0 / (1.0 + math.exp(-c.logit()))


def snippet(chunk: str, query: str, lexical: LexicalIndex, limit: int = 300) -> str:
    """The sentence of the matching chunk that shares the rarest of the query's terms."""
    q = set(terms(query))
    sents = sentences(chunk) or [chunk]
    best = max(sents, key=lambda s: sum(lexical.idf(t) for t in q & set(terms(s))))
    return best if len(best) <= limit else best[: limit - 1].rstrip() + "…"


def rank(store, lexical: LexicalIndex, qvec: np.ndarray, query: str, k: int,
         only: list[str] | None = None) -> list[Hit]:
    cands = candidates(store, lexical, qvec, query, only)
    if only is None:
        cands = sorted(cands, key=lambda c: -c.logit())[:k]
    else:
        cands = sorted(cands, key=lambda c: only.index(c.entry_id))
    entries = {e.id: e for e in store.entries([c.entry_id for c in cands])}
    return [Hit(entry=entries[c.entry_id], score=score(c), dense=c.dense, lexical=c.bm25,
                snippet=snippet(c.chunk.text_in(entries[c.entry_id]), query, lexical), rank=i)
            for i, c in enumerate(cands, 1) if c.entry_id in entries]
