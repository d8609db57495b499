"""The library API over one index: ingest a corpus, search it.

    index = Index(Settings())
    report = index.ingest([Path("papers.jsonl")])
    hits = index.search("1-bit quantization of LLMs", k=5)
"""

from __future__ import annotations

import time
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

from . import chunking, corpus, retrieve
from .config import Settings
from .embed import Embedder
from .errors import InputError, UsageError
from .lexical import LexicalIndex
from .records import Entry, Hit, IngestReport
from .store import IndexInfo, Store
from .text import focus

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
        return self._embedder or Embedder(self.settings.data_dir / "models")

    @property
    def info(self) -> IndexInfo:
        s = self.settings
        return IndexInfo(self.embedder.name, self.embedder.dim,
                         chunking.chunker_id(s.chunk_tokens, s.overlap_sentences))

    @cached_property
    def store(self) -> Store:
        return Store(self.settings.data_dir, self.settings.collection, self.info, self.settings.chroma_url)

    def lexical(self) -> LexicalIndex:
        """The BM25 index of the current revision: kept in memory, cached on disk."""
        revision = self.store.revision
        if self._lexical is None or self._lexical[0] != revision:
            def load():
                entries = self.store.entries()
                return [e.id for e in entries], [e.text for e in entries]

            self._lexical = (revision, LexicalIndex.cached(self.settings.data_dir / "cache",
                                                           revision, load))
        return self._lexical[1]

    # -- ingest -----------------------------------------------------------------
    def chunks(self, entry: Entry) -> list:
        s = self.settings
        return chunking.chunk_entry(entry, self.embedder.count_tokens,
                                    s.chunk_tokens, s.overlap_sentences)

    def ingest(self, paths: Sequence[Path] = (), *, rebuild: bool = False,
               start: Callable[[int], None] | None = None,
               advance: Callable[[int], None] | None = None) -> IngestReport:
        """Bring the index in line with ``paths`` (default: the bundled seeds).

        Unchanged entries are not re-embedded; an edited entry replaces the one at
        its position; entries missing from a re-read file are removed. A file that
        cannot be read is reported in ``errors`` and its stored entries are kept.
        """
        t0 = time.perf_counter()
        if rebuild:
            self._reset()
        files, errors = corpus.discover(list(paths) or [self.settings.seeds])
        parsed: dict[str, list[Entry]] = {}
        for cf in files:
            try:
                parsed[cf.key] = corpus.read_file(cf)
            except InputError as e:
                errors.append(str(e))
            except OSError as e:
                errors.append(f"{cf.key}: cannot read ({e.strerror}); check the file")
        report = IngestReport(errors=errors)
        stored = self.store.ids_by_path()
        new: list[Entry] = []
        moved: list[Entry] = []
        gone: list[str] = []
        for key, entries in parsed.items():
            old = stored.get(key, {})
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
        chunks = [c for e in new for c in self.chunks(e)]
        if chunks:
            if start:
                start(len(chunks))
            vectors = self.embedder.encode([c.text for c in chunks], progress=advance)
            self.store.add(new, chunks, vectors)  # add before delete: a crash loses nothing
        self.store.update_metadata(moved)
        self.store.delete(gone)
        report.entries = self.store.count()
        report.chunks = self.store.chunk_count()
        report.seconds = time.perf_counter() - t0
        return report

    def _reset(self) -> None:
        # Opening checks the stored model and chunker; a rebuild must not open first.
        self.__dict__.pop("store", None)
        Store.drop(self.settings.data_dir, self.settings.collection, self.settings.chroma_url)

    def ensure_ingested(self, **progress) -> IngestReport | None:
        """The first search on an empty index ingests the bundled seeds."""
        if self.store.count() == 0:
            return self.ingest(**progress)
        return None

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
