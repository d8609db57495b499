"""The BM25 index's on-disk, memory-mapped form: same results as the in-memory index it
replaced, reopened without reading the corpus again, rebuilt when torn; and a cold
search that never lists the corpus from the store."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter

import bm25s

import numpy as np
import pytest

from rag import corpus
from rag.config import DEFAULT_SEEDS, Settings
from rag.index import Index
from rag.lexical import LexicalIndex, terms
from rag.store import Store

from conftest import ROOT


class Reference:
    """The in-memory index as it was (dicts and a frozenset per entry, pickled whole):
    the memory-mapped one must give the same answers."""

    def __init__(self, texts):
        docs = [terms(t) for t in texts]
        self.bm25 = bm25s.BM25()
        self.bm25.index(docs, show_progress=False)
        df = Counter(t for d in docs for t in set(d))
        n = max(len(docs), 1)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.max_idf = math.log(1 + (n + 0.5) / 0.5)
        self.doc_terms = [frozenset(d) for d in docs]

    def scores(self, query):
        q = [t for t in terms(query) if t in self.idf]
        return np.asarray(self.bm25.get_scores(q), dtype=np.float32) if q else None

    def coverage(self, query, rows):
        q = set(terms(query))
        if not q:
            return [0.0 for _ in rows]
        weight = {t: self.idf.get(t, self.max_idf) for t in q}
        total = sum(weight.values())
        return [sum(w for t, w in weight.items() if t in self.doc_terms[r]) / total for r in rows]

    def has_rarest(self, query, rows):
        known = [t for t in terms(query) if t in self.idf]
        if not known:
            return [True for _ in rows]
        stem = max(known, key=self.idf.__getitem__)[:6]
        return [any(t.startswith(stem) for t in self.doc_terms[r]) for r in rows]


@pytest.fixture(scope="module")
def seed_corpus():
    files, _, _ = corpus.discover([DEFAULT_SEEDS])
    entries = [e for cf in files for e in corpus.read_file(cf).entries]
    return [e.id for e in entries], [e.text for e in entries]


QUERIES = [json.loads(line)["question"] for line in
           (ROOT / "eval" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
QUERIES += ["explaining model predictions", "hierarchical agents", "BiLLM", "R-UCBE",
            "morph tokens", "quantization quantization LLMs", "sourdough", "", "the of and"]


def _same(index: LexicalIndex, ref: Reference, ids: list[str]) -> None:
    rows = list(range(len(ids)))
    assert list(index.ids) == ids and len(index.ids) == len(ids)
    assert all(index.row_of[i] == r for r, i in enumerate(ids)) and "nope" not in index.row_of
    for q in QUERIES:
        want = ref.scores(q)
        got = index.scores(q)
        assert np.array_equal(got, want if want is not None else np.zeros(len(ids), np.float32)), q
        assert index.coverage(q, rows) == pytest.approx(ref.coverage(q, rows), abs=1e-12), q
        assert index.has_rarest(q, rows) == ref.has_rarest(q, rows), q
        assert [index.idf(t) for t in terms(q)] == [ref.idf.get(t, 0.0) for t in terms(q)], q


def test_on_disk_index_answers_as_the_in_memory_one_did(tmp_path, seed_corpus):
    ids, texts = seed_corpus
    built = LexicalIndex.cached(tmp_path, "r1", lambda: seed_corpus)
    _same(built, Reference(texts), ids)
    # A new process opens the same files: no corpus read, the same answers.
    reopened = LexicalIndex.cached(tmp_path, "r1", lambda: pytest.fail("the cache was rebuilt"))
    _same(reopened, Reference(texts), ids)
    # Its arrays are memory-mapped, not read.
    assert isinstance(reopened._rows, np.memmap) and isinstance(reopened._data, np.memmap)
    assert isinstance(reopened._idf, np.memmap)
    # Opened and searched without bm25s (it imports scipy: 0.13 s of every start).
    code = ("import sys; from pathlib import Path; from rag.lexical import LexicalIndex; "
            f"LexicalIndex(Path({str(tmp_path / 'bm25-r1')!r})).scores('bandits regret'); "
            "print('bm25s' in sys.modules, 'scipy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split() == ["False", "False"]


def test_a_new_revision_replaces_the_old_cache(tmp_path, seed_corpus):
    ids, texts = seed_corpus
    LexicalIndex.cached(tmp_path, "r1", lambda: seed_corpus)
    (tmp_path / "bm25-r0.pkl").write_bytes(b"a pickle of an older version")
    (tmp_path / f"bm25-r0.tmp{2**22 + 1}").mkdir()  # left by a killed process: removed
    (tmp_path / f"bm25-r3.tmp{os.getpid()}").mkdir()  # a live process's build: kept
    newer = LexicalIndex.cached(tmp_path, "r2", lambda: (ids[:10], texts[:10]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25-r2", f"bm25-r3.tmp{os.getpid()}"]
    _same(newer, Reference(texts[:10]), ids[:10])


@pytest.mark.parametrize("damage", [
    lambda d: (d / "indices.csc.index.npy").write_bytes(
        (d / "indices.csc.index.npy").read_bytes()[:200]),          # torn
    lambda d: (d / "ids.npy").write_bytes(b""),                     # emptied
    lambda d: (d / "meta.json").unlink(),                           # never finished
    lambda d: (d / "vocab-offsets.npy").write_bytes(b"not numpy"),  # garbage
    lambda d: np.save(d / "idf.npy", np.zeros(3)),                   # another index's file
], ids=["torn", "emptied", "unfinished", "garbage", "foreign"])
def test_a_damaged_cache_is_rebuilt(tmp_path, seed_corpus, damage):
    ids, texts = seed_corpus
    LexicalIndex.cached(tmp_path, "r1", lambda: seed_corpus)
    damage(tmp_path / "bm25-r1")
    reads = []
    again = LexicalIndex.cached(tmp_path, "r1", lambda: reads.append(1) or seed_corpus)
    assert reads == [1]
    _same(again, Reference(texts), ids)


def test_an_empty_collection(tmp_path):
    index = LexicalIndex.cached(tmp_path, "r1", lambda: ([], []))
    assert not index.ids and "x" not in index.row_of
    assert len(index.scores("anything")) == 0
    assert index.coverage("anything", []) == [] and index.has_rarest("anything", []) == []


def test_cold_search_does_not_list_the_corpus(tmp_path, seeded_index, embedder, monkeypatch):
    """A new process's search reads the hits' entries, never all of them: the lexical
    cache is opened, not rebuilt from the store, and nothing lists every entry or id."""
    settings = Settings(data_dir=seeded_index.settings.data_dir)
    seeded_index.search("1-bit quantization", k=3)  # the cache of this revision exists
    want = [h.entry.id for h in seeded_index.search("1-bit quantization of LLMs", k=5)]

    def listing(*args, **kwargs):
        raise AssertionError("the search path listed the whole corpus")

    real_get, real_entries = Store._get, Store.entries
    monkeypatch.setattr(Store, "ids_by_path", listing)
    monkeypatch.setattr(Store, "_get", lambda self, c, ids=None, **kw:
                        listing() if ids is None else real_get(self, c, ids, **kw))
    monkeypatch.setattr(Store, "entries", lambda self, ids=None:
                        listing() if ids is None else real_entries(self, ids))
    cold = Index(settings, embedder=embedder)  # what a new `rag search` builds
    cold.ensure_ingested()
    assert [h.entry.id for h in cold.search("1-bit quantization of LLMs", k=5)] == want
