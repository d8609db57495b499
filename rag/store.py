"""The vector store: the only module that imports chromadb.

Two collections per index: ``<name>_chunks`` (one vector per chunk, the dense search
space; a chunk's metadata is its place in its entry's text, and its id is
"<entry id>:<i>") and ``<name>_entries`` (one row per entry: full text and metadata).
Chroma requires a vector on every row: an entry's is a one-number placeholder, since
nothing searches entries by vector, and a 384-number one cost a sixth of the disk
(indexes written before keep the mean of their chunk vectors there). The entries
collection's metadata records what built the index (embedding model, dimension,
chunker) and a revision that changes on every write, so caches derived from the
index know when to rebuild.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import urlsplit

import httpx
import numpy as np

from .errors import IndexMismatchError, RagError, ServerError, StoreError
from .records import OPTIONAL, Chunk, Entry

# Chroma's own telemetry and default embedding function are never used: set before
# chromadb is imported.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _skip_override_checks() -> None:
    """chromadb marks its methods with the ``overrides`` package's @override, which
    checks each signature against the base class's as the class is defined: a check
    of chromadb's own code that cost a fifth of a second of every start-up (0.2 of
    ~0.65 s to import chromadb here). Before chromadb is imported, @override only
    marks the method, which its EnforceOverrides base classes still require."""
    try:
        import overrides
    except ImportError:  # a chromadb that no longer uses it
        return
    if "chromadb" in sys.modules:
        return

    def mark(method=None, **_options):
        def marked(m):
            m.__override__ = True
            return m
        return marked(method) if method is not None else marked

    overrides.override = overrides.overrides = mark


_skip_override_checks()
import chromadb  # noqa: E402
from chromadb.config import Settings as ChromaSettings  # noqa: E402

_BATCH = 1000  # rows per write; lowered to the server's max_batch_size when smaller
_PAGE = 5000  # rows per read: below SQLite's 32,766 query variables


@dataclass(frozen=True)
class IndexInfo:
    """What built an index; two indexes are compatible when these are equal."""

    embed_model: str
    embed_dim: int
    chunker: str


@dataclass(frozen=True)
class ChunkHit:
    entry_id: str
    text: str  # "" when the store keeps the chunk's place only: see :meth:`text_in`
    similarity: float  # cosine similarity in [-1, 1]
    span: tuple[int, int] = (0, 0)

    def text_in(self, entry: Entry) -> str:
        return self.text or Chunk.cut(entry.text, *self.span)


def _chunk_hit(chunk_id: str, document: str | None, meta: dict, similarity: float) -> ChunkHit:
    # Chunks written before 2026-12 also name their entry in their metadata.
    return ChunkHit(chunk_id.rsplit(":", 1)[0], document or "", similarity,
                    (int(meta.get("start", 0)), int(meta.get("end", 0))))


def _client(data_dir: Path, url: str = "", token: str = ""):
    """An embedded client on ``data_dir``, or an HTTP client of the server at ``url``.

    Chroma keeps one system per path and refuses a second with other settings, so
    every client in this process is made here with the same ones."""
    settings = ChromaSettings(anonymized_telemetry=False)
    if not url:
        try:
            return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=settings)
        except Exception as e:
            raise StoreError(f"cannot open the index in {data_dir} ({type(e).__name__}: {e}); "
                             "check the folder or pass another --data-dir") from None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"--chroma-url {url} is not an http(s)://HOST:PORT address")
    try:
        # Chroma's own server (1.x) checks no token; one behind a proxy that does reads
        # either header.
        headers = {"Authorization": f"Bearer {token}", "X-Chroma-Token": token} if token else None
        # Chroma's client hides a refusal behind "could not connect to tenant": ask first.
        base = f"{parts.scheme}://{parts.netloc}"
        status = httpx.get(f"{base}/api/v2/auth/identity", headers=headers, timeout=10).status_code
        if status in (401, 403):
            raise ServerError(f"the Chroma server at {url} refused the request ({status}); "
                              f"{'check' if token else 'set'} RAG_CHROMA_TOKEN")
        client = chromadb.HttpClient(host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 8000),
                                     ssl=parts.scheme == "https", headers=headers, settings=settings)
        client.heartbeat()
        client.get_max_batch_size()  # an authenticated call: a proxy may let heartbeats through
    except RagError:
        raise
    except Exception as e:
        raise ServerError(f"cannot reach the Chroma server at {url} ({type(e).__name__}); start it with "
                         "chroma run --path DIR --host 127.0.0.1 --port PORT, or fix --chroma-url") from None
    return client


def _rebuild_hint(data: str) -> str:
    return f"rebuild it with: rag ingest --rebuild{data}"


def _reads(method):
    """A read whose stored values may be malformed (a hand-edited or damaged index):
    a bad value is the store's one-line error, not a traceback."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise self.failure(e) from None

    return call


class _Guarded:
    """A Chroma client or collection whose every call turns a failure into the
    store's one-line error (Chroma raises its own untyped errors on damaged files,
    and connection errors when a server goes away)."""

    def __init__(self, target, store: "Store"):
        self._target = target
        self._store = store

    def __getattr__(self, name):
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            except RagError:
                raise
            except Exception as e:
                raise self._store.failure(e) from None

        return call


# -- checking the files before this process trusts them ----------------------------------
# A damaged HNSW file makes Chroma's native code crash the process (SIGSEGV), which no
# exception handler can catch. So the first open after the files changed is tried in a
# child process; its verdict is kept with the files' sizes and times, and later opens of
# the same files skip it (the child costs about 1.1 s on this machine, once per change).

_PROBE = """
import random
import sys
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
names = [c.name for c in client.list_collections()]
for suffix in ("_entries", "_chunks"):
    if sys.argv[2] + suffix not in names:
        continue
    c = client.get_collection(sys.argv[2] + suffix)
    n = c.count()
    if n:
        got = c.get(limit=1, include=["embeddings", "metadatas", "documents"])
        first = [float(x) for x in got["embeddings"][0]]
        # A search walks the graph from wherever its vector leads, so one query can
        # pass a damaged file that the next one crashes on: ask from many directions.
        rng = random.Random(0)
        probes = [first, [-x for x in first]] + [[rng.gauss(0, 1) for _ in first] for _ in range(30)]
        c.query(query_embeddings=probes, n_results=min(n, 50))
"""


def _signature(data_dir: Path) -> list:
    root = data_dir / "chroma"
    return sorted([str(p.relative_to(root)), st.st_size, st.st_mtime_ns]
                  for p in root.rglob("*") if p.is_file() and (st := p.stat()))


def _probe_in_child(data_dir: Path, name: str) -> str:
    """'' when the store opens and answers a query in a child process, else what
    went wrong."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, str(data_dir / "chroma"), name],
                              capture_output=True, text=True, timeout=300,
                              env=os.environ | {"ANONYMIZED_TELEMETRY": "False"})
    except subprocess.TimeoutExpired:
        return "opening it did not finish in 300 s"
    if proc.returncode < 0:
        return f"opening it crashed (signal {-proc.returncode})"
    if proc.returncode:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return " ".join((lines[-1] if lines else "unknown error").split())[:160]
    return ""


def _check_files(data_dir: Path, name: str, target: str) -> None:
    stamp = data_dir / f"{name}.checked"
    if (data_dir / "chroma").is_dir():
        try:
            trusted = json.loads(stamp.read_text(encoding="utf-8")) == _signature(data_dir)
        except (OSError, ValueError):
            trusted = False  # no stamp, or an unreadable one: check
        if not trusted and (problem := _probe_in_child(data_dir, name)):
            raise StoreError(f"the index in {data_dir} is damaged: {problem}; "
                             f"{_rebuild_hint(target)}")
    if (data_dir, name) not in _STAMPED:
        _STAMPED.add((data_dir, name))
        atexit.register(_stamp, data_dir, stamp)


_STAMPED: set = set()


def _stamp(data_dir: Path, stamp: Path) -> None:
    """At exit: let Chroma write its files (it rewrites them on close), then note
    them as checked, so that the next process trusts them without a child. A
    process that is killed writes no stamp, and the next open checks again."""
    try:
        _forget_clients()
        stamp.write_text(json.dumps(_signature(data_dir)), encoding="utf-8")
    except Exception:
        pass  # checked again next time


def _forget_clients() -> None:
    """Chroma keeps one system per path in this process, and stopping them is what
    makes it write its files; one whose files are removed must not be reused."""
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


class Store:
    """One index in an embedded Chroma directory (or, later, a Chroma server)."""

    def __init__(self, data_dir: Path, name: str, info: IndexInfo, url: str = "", token: str = ""):
        self.info = info
        self.name = name
        self.url = url
        self._data_dir = data_dir
        self._where = url or str(data_dir)
        if not url:
            try:
                data_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create {data_dir} ({e.strerror}); pass another --data-dir") from None
            _check_files(data_dir, name, self._target())
        self._client = _Guarded(_client(data_dir, url, token), self)
        # A server may take smaller batches than the embedded default.
        self._batch = min(_BATCH, self._client.get_max_batch_size())
        self._entries = _Guarded(self._client.get_or_create_collection(
            f"{name}_entries", embedding_function=None,
            metadata={"hnsw:space": "cosine", "mean_vectors": False, **self._info_meta()}), self)
        # An index written before keeps 384-number entry vectors: Chroma fixes a
        # collection's dimension at its first row.
        self._mean_vectors = bool((self._entries.metadata or {}).get("mean_vectors", True))
        self._chunks = _Guarded(self._client.get_or_create_collection(
            f"{name}_chunks", embedding_function=None, metadata={"hnsw:space": "cosine"}), self)
        self._check_info()
        self._counted: tuple[str, int] = ("", 0)

    def failure(self, e: Exception) -> RagError:
        """Any error of the store, as one line with the command that recovers."""
        if self.url:
            return ServerError(f"the Chroma server at {self.url} failed ({type(e).__name__}); "
                               "check that it runs, then run the command again")
        detail = " ".join(str(e).split())[:120]
        return StoreError(f"the index in {self._where} is damaged or unreadable ({type(e).__name__}: "
                          f"{detail}); {_rebuild_hint(self._target())}")

    # -- what built the index ---------------------------------------------------
    def _info_meta(self) -> dict:
        return {"embed_model": self.info.embed_model, "embed_dim": self.info.embed_dim,
                "chunker": self.info.chunker, "revision": uuid.uuid4().hex}

    @_reads
    def _check_info(self) -> None:
        meta = self._entries.metadata or {}
        stored = IndexInfo(str(meta.get("embed_model")), int(meta.get("embed_dim") or 0),
                           str(meta.get("chunker")))
        if stored != self.info:
            data = self._target()
            if stored.embed_model != self.info.embed_model or stored.embed_dim != self.info.embed_dim:
                what = (f"embedding model {stored.embed_model} ({stored.embed_dim} dims), "
                        f"not {self.info.embed_model} ({self.info.embed_dim} dims)")
            else:
                what = f"chunker {stored.chunker}, not {self.info.chunker}"
            raise IndexMismatchError(f"the index in {self._where} was built with {what}; "
                                     f"{_rebuild_hint(data)}")

    def _target(self) -> str:
        return f" --chroma-url {self.url}" if self.url else f" --data-dir {self._data_dir}"

    @property
    def revision(self) -> str:
        """Changes on every write, by any process: read afresh (0.3 ms), so that a
        long-running chat sees another process's ingest."""
        fresh = self._client.get_collection(self._entries.name, embedding_function=None)
        return str((fresh.metadata or {}).get("revision", ""))

    def _touch(self) -> None:
        meta = dict(self._entries.metadata or {})
        meta["revision"] = uuid.uuid4().hex
        meta.pop("hnsw:space", None)  # fixed at creation; Chroma refuses to modify it
        self._entries.modify(metadata=meta)

    @staticmethod
    def drop(data_dir: Path, name: str, url: str = "", token: str = "") -> None:
        """Delete an index without opening it (it may have been built differently, or
        be damaged): through Chroma when its files are sound, else by removing them."""
        if not url and not (data_dir / "chroma").is_dir():
            return
        if not url and _probe_in_child(data_dir, name):
            _forget_clients()
            shutil.rmtree(data_dir / "chroma", ignore_errors=True)
            return
        try:
            client = _client(data_dir, url, token)
            present = {c.name for c in client.list_collections()}
            for suffix in ("_entries", "_chunks"):
                if f"{name}{suffix}" in present:
                    client.delete_collection(f"{name}{suffix}")
        except Exception:
            if url:
                raise
            _forget_clients()
            shutil.rmtree(data_dir / "chroma", ignore_errors=True)

    @_reads
    def repair(self) -> int:
        """After a writer was killed: drop chunks whose entry is missing and entries
        whose chunks are not all there (the next ingest embeds those again), and
        move the revision on so that caches (BM25) are rebuilt. Returns rows dropped."""
        entries = self._get(self._entries, include=["metadatas"])
        expected = {i: int(m.get("chunks", 0)) for i, m in zip(entries["ids"], entries["metadatas"])}
        present: dict[str, int] = {}
        orphans = []
        for cid in self._get(self._chunks)["ids"]:
            entry_id = cid.rsplit(":", 1)[0]
            if entry_id in expected:
                present[entry_id] = present.get(entry_id, 0) + 1
            else:
                orphans.append(cid)
        partial = [i for i, n in expected.items() if present.get(i, 0) != n]
        for a in range(0, len(orphans), self._batch):
            self._chunks.delete(ids=orphans[a:a + self._batch])
        self.delete(partial)
        self._touch()
        return len(orphans) + len(partial)

    # -- reading ----------------------------------------------------------------
    def count(self) -> int:
        return self._entries.count()

    def _get(self, collection, ids: Sequence[str] | None = None, **kw) -> dict:
        """A Chroma get in pages: one get of a large collection (or of many ids)
        exceeds SQLite's limit on query variables."""
        out: dict[str, list] = {"ids": []}
        keys = kw.get("include", [])
        if ids is not None:
            pages = [dict(ids=list(ids[a:a + _PAGE])) for a in range(0, len(ids), _PAGE)]
        else:
            pages = [dict(limit=_PAGE, offset=a) for a in range(0, max(collection.count(), 1), _PAGE)]
        for page in pages:
            got = collection.get(**page, **kw)
            out["ids"] += got["ids"]
            for k in keys:
                out.setdefault(k, [])
                out[k] += list(got[k])
        return out

    @_reads
    def ids_by_path(self) -> dict[str, dict[str, int]]:
        """{path: {entry id: ordinal}} of everything stored."""
        out: dict[str, dict[str, int]] = {}
        got = self._get(self._entries, include=["metadatas"])
        for id_, meta in zip(got["ids"], got["metadatas"]):
            out.setdefault(str(meta["path"]), {})[id_] = int(meta["ordinal"])
        return out

    @_reads
    def find_idents(self, idents: Iterable[str]) -> dict[str, Entry]:
        """Stored entries by DOI or title key ("doi:…", "title:…"), for duplicates."""
        idents = list(idents)
        dois = [i[4:] for i in idents if i.startswith("doi:")]
        titles = [i[6:] for i in idents if i.startswith("title:")]
        clauses = [{f: {"$in": v[a:a + _PAGE]}} for f, v in (("doi", dois), ("tkey", titles))
                   for a in range(0, len(v), _PAGE)]
        out: dict[str, Entry] = {}
        for where in clauses:
            got = self._entries.get(where=where, include=["documents", "metadatas"])
            for i, d, m in zip(got["ids"], got["documents"], got["metadatas"]):
                e = Entry.from_metadata(i, d, m)
                for ident in e.idents:
                    out.setdefault(ident, e)
        return out

    def ids_with_key(self, key: str) -> list[str]:
        return list(self._entries.get(where={"key": key}, include=[])["ids"])

    @_reads
    def entries(self, ids: Sequence[str] | None = None) -> list[Entry]:
        """Entries by id (in the order asked), or all of them in source order."""
        got = self._get(self._entries, list(ids) if ids is not None else None,
                        include=["documents", "metadatas"])
        found = {i: Entry.from_metadata(i, d, m)
                 for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        if ids is not None:
            return [found[i] for i in ids if i in found]
        return sorted(found.values(), key=lambda e: (e.source.path, e.source.ordinal))

    @_reads
    def entry_vectors(self, ids: Sequence[str]) -> np.ndarray:
        """The normalised mean of each entry's chunk vectors (to group entries by theme)."""
        got = self._get_chunks(ids, ["embeddings"])
        rows: dict[str, list] = {}
        for cid, v in zip(got["ids"], got["embeddings"]):
            rows.setdefault(cid.rsplit(":", 1)[0], []).append(v)
        means = np.asarray([np.mean(rows[i], axis=0) for i in ids], dtype=np.float32)
        return means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)

    def _chunk_ids(self, entry_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """The ids of the entries' chunks, from the chunk count each entry records (a
        primary-key lookup, far cheaper than filtering the chunk metadata on a large
        collection); and the entries of an index written before entries recorded it,
        whose chunks name their entry in their metadata."""
        got = self._entries.get(ids=list(entry_ids), include=["metadatas"])
        ids, old = [], []
        for e, m in zip(got["ids"], got["metadatas"]):
            if "chunks" in m:
                ids += [f"{e}:{i}" for i in range(int(m["chunks"]))]
            else:
                old.append(e)
        return ids, old

    def _get_chunks(self, entry_ids: Sequence[str], include: list[str]) -> dict:
        ids, old = self._chunk_ids(entry_ids)
        got = self._chunks.get(ids=ids, include=include) if ids else {"ids": [], **{k: [] for k in include}}
        if old:
            more = self._chunks.get(where={"entry_id": {"$in": old}}, include=include)
            got = {k: list(got[k]) + list(more[k]) for k in ["ids", *include]}
        return got

    @_reads
    def query_chunks(self, vector: np.ndarray, n: int) -> list[ChunkHit]:
        # No count first: Chroma (1.5) returns what there is when n exceeds it, and a
        # count scans every chunk row (20-80 ms at 260k chunks), once per new process.
        res = self._chunks.query(query_embeddings=[vector.tolist()], n_results=n,
                                 include=["documents", "metadatas", "distances"])
        return [_chunk_hit(i, d, m, 1.0 - float(dist)) for i, d, m, dist
                in zip(res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0])]

    @_reads
    def chunk_similarities(self, vector: np.ndarray, entry_ids: Sequence[str]) -> dict[str, ChunkHit]:
        """Best-matching chunk of each given entry (for entries that keyword search
        found but the nearest-neighbour query did not reach)."""
        out: dict[str, ChunkHit] = {}
        if not entry_ids:
            return out
        got = self._get_chunks(entry_ids, ["documents", "metadatas", "embeddings"])
        sims = np.asarray(got["embeddings"], dtype=np.float32) @ vector
        for i, d, m, s in zip(got["ids"], got["documents"], got["metadatas"], sims):
            hit = _chunk_hit(i, d, m, float(s))
            if hit.entry_id not in out or s > out[hit.entry_id].similarity:
                out[hit.entry_id] = hit
        return out

    def chunk_count(self) -> int:
        """Chunks stored; counted once per revision (a count costs ~15 ms at 250k)."""
        if self._counted[0] != self.revision:
            self._counted = (self.revision, self._chunks.count())
        return self._counted[1]

    # -- writing ----------------------------------------------------------------
    def add(self, entries: Sequence[Entry], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Add entries with their chunks and chunk vectors (rows in chunk order).

        No row has a Chroma "document": Chroma indexes every document for full-text
        search (a third of an index's size), which this project never uses, since
        BM25 (rag/lexical.py) does its own. An entry's text is a metadata string
        (compressed: :meth:`Entry.stored_text`), and a chunk is its place in that
        text. Indexes written before keep their documents, and reads take either."""
        by_entry: dict[str, list[int]] = {}
        for row, c in enumerate(chunks):
            by_entry.setdefault(c.entry_id, []).append(row)
        if self._mean_vectors:
            means = np.asarray([vectors[by_entry[e.id]].mean(axis=0) for e in entries])
            means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        else:
            means = np.ones((len(entries), 1), dtype=np.float32)
        for a in range(0, len(chunks), self._batch):
            part = chunks[a:a + self._batch]
            self._chunks.upsert(ids=[c.id for c in part], embeddings=vectors[a:a + self._batch],
                                metadatas=[{"start": c.start, "end": c.end} for c in part])
        for a in range(0, len(entries), self._batch):
            part = entries[a:a + self._batch]
            self._entries.upsert(ids=[e.id for e in part], embeddings=means[a:a + self._batch],
                                 metadatas=[e.metadata() | {"chunks": len(by_entry[e.id])} | e.stored_text()
                                            for e in part])
        self._touch()

    def update_metadata(self, entries: Iterable[Entry]) -> None:
        """New positions of unchanged entries. Chroma merges the given keys, so the
        chunk count and the text stay; a field now empty is given as None, which
        removes it."""
        entries = list(entries)
        for a in range(0, len(entries), self._batch):
            part = entries[a:a + self._batch]
            self._entries.update(ids=[e.id for e in part],
                                 metadatas=[dict.fromkeys(OPTIONAL + ("tkey",)) | e.metadata() for e in part])
        if entries:
            self._touch()

    def delete(self, entry_ids: Sequence[str]) -> None:
        ids = list(entry_ids)
        for a in range(0, len(ids), self._batch):
            part = ids[a:a + self._batch]
            chunk_ids, old = self._chunk_ids(part)
            for b in range(0, len(chunk_ids), self._batch):
                self._chunks.delete(ids=chunk_ids[b:b + self._batch])
            if old:
                self._chunks.delete(where={"entry_id": {"$in": old}})
            self._entries.delete(ids=part)
        if ids:
            self._touch()
