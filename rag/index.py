"""The library API over one index: ingest a corpus, search it.

    index = Index(Settings())
    report = index.ingest([Path("papers.jsonl")])
    hits = index.search("1-bit quantization of LLMs", k=5)
"""

from __future__ import annotations

import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from . import chunking, corpus, retrieve
from .config import Settings
from .embed import Embedder
from .errors import InputError, NotFoundError, StoreError, UsageError
from .lexical import LexicalIndex
from .records import Entry, Hit, IngestReport
from .lock import WriteLock
from .sources import Sources
from .text import focus

if TYPE_CHECKING:  # the module imports chromadb, a second of start-up: see Index.store
    from .store import IndexInfo, Store

# progress(total) starts a bar, progress(None, advance) moves it.
Progress = Callable[[int], None]


class Index:
    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = None):
        self.settings = settings or Settings()
        self._embedder = embedder
        self._lexical: tuple[str, LexicalIndex] | None = None
        self._last_query: tuple[str, object] = ("", None)

    @cached_property
    def embedder(self) -> Embedder:
        return self._embedder or Embedder(self.settings.data_dir / "models",
                                          quantized=self.settings.embed_quantized)

    @property
    def info(self) -> IndexInfo:
        from .store import IndexInfo

        s = self.settings
        return IndexInfo(self.embedder.name, self.embedder.dim,
                         chunking.chunker_id(s.chunk_tokens, s.overlap_sentences))

    @cached_property
    def lock(self) -> WriteLock:
        return WriteLock(self.settings.data_dir, self.settings.collection)

    @cached_property
    def store(self) -> Store:
        # Importing the store (chromadb) takes most of a search's start-up; the
        # embedder, warmed first (Embedder.warm), loads on the other core meanwhile.
        from .store import Store

        store = Store(self.settings.data_dir, self.settings.collection, self.info,
                      self.settings.chroma_url, self.settings.chroma_token.get_secret_value())
        if self.lock.writer_died():
            # A writer was killed mid-write: drop what it left half-done.
            store.repair()
            self.lock.clear()
        return store

    def lexical(self) -> LexicalIndex:
        """The BM25 index of the current revision, memory-mapped from its disk cache (built
        from every entry only when the revision has none: after a write)."""
        revision = self.store.revision
        if self._lexical is None or self._lexical[0] != revision:
            def load():
                # The title too: researchers search by its words ("efficient
                # inference" for "Early Exiting for Efficient Transformer Inference").
                entries = self.store.entries()
                return [e.id for e in entries], [f"{e.title}\n{e.text}" if e.title else e.text for e in entries]

            self._lexical = (revision, LexicalIndex.cached(self.settings.data_dir / "cache",
                                                           revision, load))
        return self._lexical[1]

    # -- ingest -----------------------------------------------------------------
    def chunks(self, entry: Entry) -> list:
        s = self.settings
        return chunking.chunk_entry(entry, self.embedder.count_tokens,
                                    s.chunk_tokens, s.overlap_sentences)

    @cached_property
    def sources(self) -> "Sources":
        return Sources(self.settings.data_dir / f"{self.settings.collection}.sources.json")

    def ingest(self, paths: Sequence[Path] = (), *, rebuild: bool = False, wait: bool = False,
               notice: Callable[[str], None] | None = None,
               start: Callable[[int], None] | None = None,
               advance: Callable[[int], None] | None = None) -> IngestReport:
        """Bring the index in line with ``paths`` (default: the sources it recorded,
        or the bundled seeds on a first run).

        Unchanged entries are not re-embedded; an edited entry replaces the one at
        its position; entries missing from a re-read file are removed. A file that
        cannot be read is reported in ``errors`` and its stored entries are kept. A
        paper already stored from another file (same DOI, else same title and year)
        is reported as a duplicate and not stored again.

        Chunks are embedded and stored in batches (``settings.ingest_batch``), so a
        killed ingest run again re-embeds at most one batch. One writer at a time:
        a second one waits (``wait``) or raises :class:`LockedError`.
        """
        with self.lock.hold(wait, notice):
            return self._ingest(paths, rebuild, start, advance)

    def _ingest(self, paths, rebuild, start, advance) -> IngestReport:
        t0 = time.perf_counter()
        if paths:
            files, errors, skipped = corpus.discover(list(paths))
        elif self.sources.exists():
            files, errors, skipped = self.sources.files(), [], []
        elif rebuild and (self.settings.chroma_url or (self.settings.data_dir / "chroma").exists()):
            # An index made before sources were recorded: its files are unknown, and
            # the seeds must not take their place.
            raise UsageError("this index does not record the files it was built from; "
                             "run rag ingest --rebuild PATH... with them")
        else:
            files, errors, skipped = corpus.discover([self.settings.seeds])
        if rebuild:
            # Check before dropping anything: a rebuild must never lose a corpus.
            missing = [cf.key for cf in files if not cf.path.is_file()]
            if missing:
                raise InputError(f"cannot rebuild: {len(missing)} recorded source(s) missing "
                                 f"({', '.join(missing[:3])}); restore them or run rag remove PATH")
            self._reset()
        report = IngestReport(errors=errors, warnings=skipped)
        parsed: dict[str, list[Entry]] = {}
        for cf in files:
            try:
                got = corpus.read_file(cf)
            except InputError as e:
                report.errors.append(str(e))
                continue
            except OSError as e:
                report.errors.append(f"{cf.key}: cannot read ({e.strerror}); check the file")
                continue
            parsed[cf.key] = got.entries
            report.warnings += got.warnings
            report.control_removed += got.control
        stored = self.store.ids_by_path()
        new: list[Entry] = []
        moved: list[Entry] = []
        gone: list[str] = []
        seen = self._duplicates_of(parsed)
        for key, entries in parsed.items():
            old = stored.get(key, {})
            entries = [e for e in entries if e.id in old or not seen(e)]
            ids = {e.id for e in entries}
            fresh = [e for e in entries if e.id not in old]
            stale = [i for i in old if i not in ids]
            moved += [e for e in entries if e.id in old and old[e.id] != e.source.ordinal]
            replaced = len({e.source.ordinal for e in fresh} & {old[i] for i in stale})
            report.updated += replaced
            report.added += len(fresh) - replaced
            report.removed += len(stale) - replaced
            report.unchanged += len(entries) - len(fresh)
            new += fresh
            gone += stale
        report.duplicates = seen.reported
        self._embed_and_store(new, start, advance)  # add before delete: a crash loses nothing
        self.store.update_metadata(moved)
        self.store.delete(gone)
        self.sources.record({cf.key: cf.path for cf in files if cf.key in parsed})
        report.entries = self.store.count()
        report.chunks = self.store.chunk_count()
        report.seconds = time.perf_counter() - t0
        return report

    def _embed_and_store(self, new: list[Entry], start, advance) -> None:
        """Chunk and embed the new entries a batch at a time, storing each batch
        (whole entries) as soon as it is embedded: memory holds one batch of vectors,
        and a kill loses at most the batch in hand. Progress counts entries."""
        if new and start:
            start(len(new))
        batch: list[Entry] = []
        chunks: list = []
        for i, entry in enumerate(new):
            batch.append(entry)
            chunks += self.chunks(entry)
            if len(chunks) >= self.settings.ingest_batch or i == len(new) - 1:
                vectors = self.embedder.encode([c.text for c in chunks])
                self.store.add(batch, chunks, vectors)
                if advance:
                    advance(len(batch))
                batch, chunks = [], []

    def _duplicates_of(self, parsed: dict[str, list[Entry]]):
        """A predicate: is this new entry a paper already stored, or read earlier in
        this run, from another file? Each "yes" is noted in ``.reported``."""
        idents = {i for entries in parsed.values() for e in entries for i in e.idents}
        owner = {i: (e.source, e.label) for i, e in self.store.find_idents(idents).items()}

        def seen(entry: Entry) -> bool:
            for ident in entry.idents:
                first = owner.get(ident)
                if first and first[0].path != entry.source.path:
                    how = "DOI" if ident.startswith("doi:") else "title and year"
                    seen.reported.append(
                        f"{entry.source.path} #{entry.source.ordinal} ({entry.label[:50]}): same "
                        f"{how} as {first[0].path} #{first[0].ordinal}; not stored twice")
                    return True
            for ident in entry.idents:
                owner.setdefault(ident, (entry.source, entry.label))
            return False

        seen.reported = []
        return seen

    def remove(self, path: str, wait: bool = False,
               notice: Callable[[str], None] | None = None) -> int:
        """Delete the entries of a source file (its key as ``rag list`` shows it, or
        the path it was read from); returns how many."""
        with self.lock.hold(wait, notice):
            return self._remove(path)

    def _remove(self, path: str) -> int:
        stored = self.store.ids_by_path()
        recorded = self.sources.paths()
        given = Path(path).expanduser().resolve()
        keys = [k for k in stored if k == path or recorded.get(k) == given]
        if not keys:
            raise NotFoundError(f"no entries from {path} in the index; rag list shows the sources")
        ids = [i for k in keys for i in stored[k]]
        self.store.delete(ids)
        self.sources.forget(keys)
        return len(ids)

    def find(self, ref: str) -> Entry:
        """An entry by id (or a unique prefix of one), citation key, or PATH#N."""
        ref = ref.strip()
        path, hash_, ordinal = ref.rpartition("#")
        stored = self.store.ids_by_path()
        if hash_ and ordinal.isdigit():
            ids = [i for i, o in stored.get(path.strip(), {}).items() if o == int(ordinal)]
        else:
            ids = [i for ids in stored.values() for i in ids if i.startswith(ref.lower())]
            if not ids:
                ids = self.store.ids_with_key(ref)
        if len(ids) != 1:
            what = "matches several entries" if ids else "matches no entry"
            raise NotFoundError(f"{ref} {what}; give an id from rag search --json, a citation "
                                "key, or PATH#N as rag list shows it")
        return self.store.entries(ids)[0]

    def _reset(self) -> None:
        # Opening checks the stored model and chunker; a rebuild must not open first.
        from .store import Store

        self.__dict__.pop("store", None)
        Store.drop(self.settings.data_dir, self.settings.collection, self.settings.chroma_url,
                   self.settings.chroma_token.get_secret_value())

    def ensure_ingested(self, **progress) -> IngestReport | None:
        """The first search on a new index ingests the bundled seeds. An index that
        recorded sources and is now empty is reported, never refilled with the seeds."""
        if self.store.count():
            return None
        if self.sources.exists():
            if recorded := self.sources.files():
                raise StoreError(f"the index is empty but recorded {len(recorded)} "
                                 "source file(s); run rag ingest --rebuild to read them again")
            raise NotFoundError("the index is empty; add abstracts with rag ingest PATH")
        return self.ingest(**progress)

    # -- search -----------------------------------------------------------------
    def search(self, query: str, k: int | None = None) -> list[Hit]:
        query = query.strip()
        if not query:
            raise UsageError("empty query; type a question or keywords")
        k = k or self.settings.k
        lexical = self.lexical()
        if not lexical.ids:
            return []
        return retrieve.rank(self.store, lexical, self.query_vector(query), focus(query), k)

    def score_entries(self, query: str, entries: Sequence[Entry]) -> list[Hit]:
        """Given entries as hits scored against ``query``, in the order given."""
        return retrieve.rank(self.store, self.lexical(), self.query_vector(query), focus(query),
                             len(entries), only=[e.id for e in entries])

    def query_vector(self, text: str):
        """The embedding of a query (without a survey question's frame); the last
        one is kept, as answering a question needs the vector its retrieval just
        computed."""
        if self._last_query[0] != text:
            self._last_query = (text, self.embedder.encode([focus(text)])[0])
        return self._last_query[1]
