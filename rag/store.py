"""The vector store: the only module that imports chromadb.

Two collections per index: ``<name>_chunks`` (one vector per chunk, the dense search
space) and ``<name>_entries`` (one row per entry: full text, metadata, and the mean of
its chunk vectors, used to group entries by theme). The entries collection's metadata
records what built the index (embedding model, dimension, chunker) and a revision
that changes on every write, so caches derived from the index know when to rebuild.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import urlsplit

import numpy as np

from .errors import IndexMismatchError, ServerError, StoreError
from .records import Chunk, Entry

# Chroma's own telemetry and default embedding function are never used: set before
# chromadb is imported.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

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
    text: str
    similarity: float  # cosine similarity in [-1, 1]


def _client(data_dir: Path, url: str = ""):
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
        client = chromadb.HttpClient(host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 8000),
                                     ssl=parts.scheme == "https", settings=settings)
        client.heartbeat()
    except Exception as e:
        raise ServerError(f"cannot reach the Chroma server at {url} ({type(e).__name__}); start it with "
                         "chroma run --path DIR --host 127.0.0.1 --port PORT, or fix --chroma-url") from None
    return client


def _rebuild_hint(data: str) -> str:
    return f"rebuild it with: rag ingest --rebuild{data}"


class Store:
    """One index in an embedded Chroma directory (or, later, a Chroma server)."""

    def __init__(self, data_dir: Path, name: str, info: IndexInfo, url: str = ""):
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
        self._client = _client(data_dir, url)
        # A server may take smaller batches than the embedded default.
        self._batch = min(_BATCH, self._client.get_max_batch_size())
        try:
            self._entries = self._client.get_or_create_collection(
                f"{name}_entries", embedding_function=None,
                metadata={"hnsw:space": "cosine", **self._info_meta()})
            self._chunks = self._client.get_or_create_collection(
                f"{name}_chunks", embedding_function=None, metadata={"hnsw:space": "cosine"})
        except Exception as e:  # chromadb raises its own untyped errors for corrupt files
            raise StoreError(f"cannot open the index in {self._where}: {type(e).__name__}: {e}; "
                             f"{_rebuild_hint(self._target())}") from None
        self._check_info()
        self._counted: tuple[str, int] = ("", 0)

    # -- what built the index ---------------------------------------------------
    def _info_meta(self) -> dict:
        return {"embed_model": self.info.embed_model, "embed_dim": self.info.embed_dim,
                "chunker": self.info.chunker, "revision": uuid.uuid4().hex}

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
    def drop(data_dir: Path, name: str, url: str = "") -> None:
        """Delete an index without opening it (it may have been built differently)."""
        client = _client(data_dir, url)
        for suffix in ("_entries", "_chunks"):
            try:
                client.delete_collection(f"{name}{suffix}")
            except Exception:
                pass  # not there: nothing to drop

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

    def ids_by_path(self) -> dict[str, dict[str, int]]:
        """{path: {entry id: ordinal}} of everything stored."""
        out: dict[str, dict[str, int]] = {}
        got = self._get(self._entries, include=["metadatas"])
        for id_, meta in zip(got["ids"], got["metadatas"]):
            out.setdefault(str(meta["path"]), {})[id_] = int(meta["ordinal"])
        return out

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

    def entries(self, ids: Sequence[str] | None = None) -> list[Entry]:
        """Entries by id (in the order asked), or all of them in source order."""
        got = self._get(self._entries, list(ids) if ids is not None else None,
                        include=["documents", "metadatas"])
        found = {i: Entry.from_metadata(i, d, m)
                 for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        if ids is not None:
            return [found[i] for i in ids if i in found]
        return sorted(found.values(), key=lambda e: (e.source.path, e.source.ordinal))

    def entry_vectors(self, ids: Sequence[str]) -> np.ndarray:
        got = self._entries.get(ids=list(ids), include=["embeddings"])
        pos = {i: k for k, i in enumerate(got["ids"])}
        return np.asarray([got["embeddings"][pos[i]] for i in ids], dtype=np.float32)

    def query_chunks(self, vector: np.ndarray, n: int) -> list[ChunkHit]:
        n = min(n, self.chunk_count())
        if n == 0:
            return []
        res = self._chunks.query(query_embeddings=[vector.tolist()], n_results=n,
                                 include=["documents", "metadatas", "distances"])
        return [ChunkHit(str(m["entry_id"]), d, 1.0 - float(dist))
                for d, m, dist in zip(res["documents"][0], res["metadatas"][0], res["distances"][0])]

    def chunk_similarities(self, vector: np.ndarray, entry_ids: Sequence[str]) -> dict[str, ChunkHit]:
        """Best-matching chunk of each given entry (for entries that keyword search
        found but the nearest-neighbour query did not reach)."""
        out: dict[str, ChunkHit] = {}
        if not entry_ids:
            return out
        metas = self._entries.get(ids=list(entry_ids), include=["metadatas"])["metadatas"]
        if all("chunks" in m for m in metas):
            # Chunk ids are "<entry id>:<i>": a primary-key lookup, far cheaper than
            # filtering the chunk metadata on a large collection.
            ids = [f"{m_id}:{i}" for m_id, m in zip(entry_ids, metas) for i in range(int(m["chunks"]))]
            got = self._chunks.get(ids=ids, include=["documents", "metadatas", "embeddings"])
        else:  # an index written before entries recorded their chunk count
            got = self._chunks.get(where={"entry_id": {"$in": list(entry_ids)}},
                                   include=["documents", "metadatas", "embeddings"])
        sims = np.asarray(got["embeddings"], dtype=np.float32) @ vector
        for d, m, s in zip(got["documents"], got["metadatas"], sims):
            e = str(m["entry_id"])
            if e not in out or s > out[e].similarity:
                out[e] = ChunkHit(e, d, float(s))
        return out

    def chunk_count(self) -> int:
        """Chunks stored; counted once per revision (a count costs ~15 ms at 250k)."""
        if self._counted[0] != self.revision:
            self._counted = (self.revision, self._chunks.count())
        return self._counted[1]

    # -- writing ----------------------------------------------------------------
    def add(self, entries: Sequence[Entry], chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Add entries with their chunks and chunk vectors (rows in chunk order)."""
        by_entry: dict[str, list[int]] = {}
        for row, c in enumerate(chunks):
            by_entry.setdefault(c.entry_id, []).append(row)
        means = []
        for e in entries:
            m = vectors[by_entry[e.id]].mean(axis=0)
            means.append(m / (np.linalg.norm(m) or 1.0))
        for a in range(0, len(chunks), self._batch):
            part = chunks[a:a + self._batch]
            self._chunks.upsert(ids=[c.id for c in part], embeddings=vectors[a:a + self._batch],
                                documents=[c.text for c in part],
                                metadatas=[{"entry_id": c.entry_id, "index": c.index} for c in part])
        for a in range(0, len(entries), self._batch):
            part = entries[a:a + self._batch]
            self._entries.upsert(ids=[e.id for e in part], embeddings=np.asarray(means[a:a + self._batch]),
                                 documents=[e.text for e in part],
                                 metadatas=[e.metadata() | {"chunks": len(by_entry[e.id])}
                                            for e in part])
        self._touch()

    def update_metadata(self, entries: Iterable[Entry]) -> None:
        """New positions of unchanged entries (Chroma merges the given keys, so the
        chunk count stays)."""
        entries = list(entries)
        for a in range(0, len(entries), self._batch):
            part = entries[a:a + self._batch]
            self._entries.update(ids=[e.id for e in part], metadatas=[e.metadata() for e in part])
        if entries:
            self._touch()

    def delete(self, entry_ids: Sequence[str]) -> None:
        ids = list(entry_ids)
        for a in range(0, len(ids), self._batch):
            part = ids[a:a + self._batch]
            self._chunks.delete(where={"entry_id": {"$in": part}})
            self._entries.delete(ids=part)
        if ids:
            self._touch()
