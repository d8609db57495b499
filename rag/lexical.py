"""Keyword search (BM25 via bm25s) over whole entries, plus the query-term coverage
that makes lexical evidence comparable across queries.

Researchers type exact method names ("BiLLM", "R-UCBE") and rare keywords; dense
vectors of a small embedder blur those, so this signal is fused with the dense one.

The index is cached on disk under the store's revision and rebuilt only after a write.
Its on-disk form is a folder of arrays that a new process memory-maps instead of
reading, so that opening it costs the same at 1,000 entries or 1,000,000: a search
touches only the pages of the query's terms and of the candidate rows.

    bm25s files   bm25s's own save (CSC score matrix: one column per term, the rows
                  of the entries that hold it, sorted), memory-mapped and summed
                  here (bm25s is imported only to build it)
    vocab-*.npy   the terms, sorted (UTF-8 bytes + offsets); a term's id is its
                  position, which is also its bm25s column
    idf.npy       float64 idf per term id (coverage and has_rarest weights)
    ids*.npy      entry ids in row order (fixed-width bytes), and sorted with their rows
    meta.json     format, counts; written last, so a folder without it is unfinished
"""

from __future__ import annotations

import bisect
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np

from .text import STOPWORDS, words

_FORMAT = 3  # of the on-disk folder (3: titles indexed); another value is rebuilt


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


class _Strings:
    """A read-only sequence of strings over UTF-8 bytes and offsets (memory-mapped
    arrays): item i is decoded on access, so nothing is read per string at load."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self._data = data
        self._offsets = offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:
        a, b = self._offsets[i], self._offsets[i + 1]
        return self._data[a:b].tobytes().decode("utf-8")

    def find(self, s: str) -> int:
        """Position of ``s`` (the sequence is sorted), or -1."""
        i = bisect.bisect_left(self, s)
        return i if i < len(self) and self[i] == s else -1

    def with_prefix(self, prefix: str) -> range:
        """Positions of the strings that start with ``prefix`` (sorted: one run).
        UTF-8 byte order is code-point order, which is Python's str order."""
        start = bisect.bisect_left(self, prefix)
        end = start
        while end < len(self) and self[end].startswith(prefix):
            end += 1
        return range(start, end)


class _Ids:
    """Entry ids in row order, over a memory-mapped fixed-width bytes array."""

    def __init__(self, ids: np.ndarray):
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, row: int) -> str:
        return self._ids[row].decode("utf-8")

    def __iter__(self):
        return (self[r] for r in range(len(self)))


class _RowOf:
    """{entry id: row} answered by binary search over the sorted ids (a dict of a
    million ids would be built, or unpickled, by every new process)."""

    def __init__(self, sorted_ids: np.ndarray, rows: np.ndarray):
        self._sorted = sorted_ids
        self._rows = rows  # row of each sorted id

    def get(self, entry_id: str, default=None):
        key = entry_id.encode("utf-8")
        if len(key) > self._sorted.dtype.itemsize or not len(self._sorted):
            return default
        pos = int(np.searchsorted(self._sorted, np.array(key, dtype=self._sorted.dtype)))
        if pos < len(self._sorted) and self._sorted[pos] == key:
            return int(self._rows[pos])
        return default

    def __contains__(self, entry_id: str) -> bool:
        return self.get(entry_id) is not None

    def __getitem__(self, entry_id: str) -> int:
        row = self.get(entry_id)
        if row is None:
            raise KeyError(entry_id)
        return row


def _contains(sorted_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` occur in ``sorted_rows`` (a term's posting list): binary
    search, so only a few pages of a long posting list are touched."""
    if not len(sorted_rows):
        return np.zeros(len(rows), dtype=bool)
    pos = np.searchsorted(sorted_rows, rows)
    return sorted_rows[np.minimum(pos, len(sorted_rows) - 1)] == rows


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


class LexicalIndex:
    """BM25 over entries, with idf for query-term coverage; built in memory by
    :meth:`build`, used from its memory-mapped on-disk form (:meth:`load`)."""

    def __init__(self, folder: Path):
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"lexical cache format {meta.get('format')}, not {_FORMAT}")
        n, v = int(meta["entries"]), int(meta["terms"])
        load = lambda name: np.load(folder / name, mmap_mode="r", allow_pickle=False)  # noqa: E731
        ids, sorted_ids, rows = load("ids.npy"), load("ids-sorted.npy"), load("ids-sorted-rows.npy")
        vocab_bytes, vocab_offsets = load("vocab-bytes.npy"), load("vocab-offsets.npy")
        self._idf = load("idf.npy")
        # bm25s's score matrix, read here rather than through bm25s.BM25.load: bm25s
        # imports scipy, 0.13 s of every start, and scoring is a sum over a few columns.
        empty = np.zeros(0, dtype=np.int64)
        self._data, self._rows, self._indptr = ((load("data.csc.index.npy"), load("indices.csc.index.npy"),
                                                 load("indptr.csc.index.npy")) if n else (empty, empty, empty))
        # A torn or foreign file shows as sizes that disagree: checked here (a few
        # header reads), never by reading the arrays.
        sizes_ok = (len(ids) == n and len(sorted_ids) == n and len(rows) == n and len(self._idf) == v
                    and len(vocab_offsets) == v + 1 and int(vocab_offsets[-1]) == len(vocab_bytes))
        if n:
            sizes_ok = sizes_ok and (len(self._indptr) == v + 1
                                     and int(self._indptr[-1]) == len(self._rows) == len(self._data))
        if not sizes_ok:
            raise ValueError(f"lexical cache in {folder} is inconsistent")
        self.ids = _Ids(ids)
        self.row_of = _RowOf(sorted_ids, rows)
        self._vocab = _Strings(vocab_bytes, vocab_offsets)
        self._found: dict[str, int] = {}
        self._max_idf = math.log(1 + (max(n, 1) + 0.5) / 0.5)

    # -- building and caching -----------------------------------------------------
    @staticmethod
    def build(folder: Path, ids: list[str], texts: list[str]) -> None:
        """Tokenize the entries and write the index's on-disk form into ``folder``."""
        docs = [terms(t) for t in texts]
        vocab = sorted({t for d in docs for t in d})
        term_id = {t: i for i, t in enumerate(vocab)}
        folder.mkdir(parents=True)
        n = len(docs)
        if n:
            import bm25s  # here only: it imports scipy

            bm25 = bm25s.BM25(csc_backend="numpy")  # its CSC keeps each term's rows sorted
            bm25.index(([[term_id[t] for t in d] for d in docs], term_id),
                       create_empty_token=False, show_progress=False)
            bm25.save(folder, show_progress=False)
            # Our sorted vocab replaces bm25s's JSON one, which a new process would parse whole.
            (folder / "vocab.index.json").unlink(missing_ok=True)
        df = np.zeros(len(vocab), dtype=np.int64)
        for d in docs:
            for t in set(d):
                df[term_id[t]] += 1
        n1 = max(n, 1)
        idf = np.array([math.log(1 + (n1 - c + 0.5) / (c + 0.5)) for c in df.tolist()],
                       dtype=np.float64)
        encoded = [t.encode("utf-8") for t in vocab]
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        encoded_ids = [i.encode("utf-8") for i in ids]
        id_bytes = np.array(encoded_ids, dtype=f"S{max([len(b) for b in encoded_ids] + [1])}")
        np.save(folder / "ids.npy", id_bytes)
        order = np.argsort(id_bytes, kind="stable")
        np.save(folder / "ids-sorted.npy", id_bytes[order])
        np.save(folder / "ids-sorted-rows.npy", order.astype(np.int64))
        np.save(folder / "vocab-bytes.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
        np.save(folder / "vocab-offsets.npy", offsets)
        np.save(folder / "idf.npy", idf)
        (folder / "meta.json").write_text(json.dumps(
            {"format": _FORMAT, "entries": n, "terms": len(vocab)}), encoding="utf-8")

    @classmethod
    def cached(cls, cache_dir: Path, revision: str, load_corpus) -> "LexicalIndex":
        """Open the index built for ``revision``, or build it from ``load_corpus()``
        (returning ids and texts), cache it, and open that."""
        folder = cache_dir / f"bm25-{revision}"
        if folder.is_dir():
            try:
                return cls(folder)
            except Exception:
                shutil.rmtree(folder, ignore_errors=True)  # a torn or older cache is rebuilt
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_dir / f"bm25-{revision}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cls.build(tmp, *load_corpus())
        try:
            tmp.rename(folder)  # whole or not at all
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process finished first: use its
        # Other revisions' caches (and the pickles of before), and the half-built folders
        # of killed processes, are stale. A process still using a cache keeps its mapped
        # pages: removing the files does not pull them away.
        for old in cache_dir.glob("bm25-*"):
            pid = old.suffix[4:] if old.suffix.startswith(".tmp") else ""
            if old == folder or (pid.isdigit() and _alive(int(pid))):
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
        return cls(folder)

    # -- reading --------------------------------------------------------------------
    def _term_id(self, term: str) -> int:
        # A search looks up each of its terms several times (scores, idf, coverage),
        # each a bisection that decodes ~17 memory-mapped strings (cProfile put 5 of a
        # warm search's 34 ms at 10k entries here). Kept per index, capped for a
        # long-lived server.
        found = self._found.get(term)
        if found is None:
            if len(self._found) > 100_000:
                self._found.clear()
            found = self._found[term] = self._vocab.find(term)
        return found

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every entry (row order of ``ids``)."""
        out = np.zeros(len(self.ids), dtype=np.float32)
        # A term's column holds each entry once: no two of its rows add to one score.
        for i in map(self._term_id, terms(query)):
            if i >= 0:
                out[self._rows_with(i)] += self._data[self._indptr[i]:self._indptr[i + 1]]
        return out

    def idf(self, term: str) -> float:
        i = self._term_id(term)
        return float(self._idf[i]) if i >= 0 else 0.0

    def _rows_with(self, term_id: int) -> np.ndarray:
        return self._rows[self._indptr[term_id]:self._indptr[term_id + 1]]

    def coverage(self, query: str, rows: list[int]) -> list[float]:
        """Share of the query's idf mass found in each given entry, in [0, 1]. Terms
        unknown to the collection weigh the most, so a query about something absent
        (a dataset no abstract names) scores low everywhere."""
        q = set(terms(query))
        if not q:
            return [0.0 for _ in rows]
        weight, present = {}, {}
        r = np.asarray(rows, dtype=np.int64)
        for t in q:
            i = self._term_id(t)
            weight[t] = float(self._idf[i]) if i >= 0 else self._max_idf
            present[t] = _contains(self._rows_with(i), r) if i >= 0 else np.zeros(len(r), dtype=bool)
        total = sum(weight.values())
        return [sum(w for t, w in weight.items() if present[t][k]) / total for k in range(len(rows))]

    def has_rarest(self, query: str, rows: list[int]) -> list[bool]:
        """Whether each given entry uses the query's rarest known term, compared by
        its first six letters ("explaining" meets "explainable")."""
        known = [(t, i) for t in terms(query) if (i := self._term_id(t)) >= 0]
        if not known:
            return [True for _ in rows]
        stem = max(known, key=lambda ti: self._idf[ti[1]])[0][:6]
        r = np.asarray(rows, dtype=np.int64)
        found = np.zeros(len(r), dtype=bool)
        for i in self._vocab.with_prefix(stem):
            found |= _contains(self._rows_with(i), r)
        return found.tolist()
