"""Ingest and search with the real embedder and a real on-disk Chroma store."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rag.errors import IndexMismatchError
from rag.formats import FORMATS
from rag.index import Index
from rag.records import Chunk
from rag.store import IndexInfo, Store
from rag.text import focus, is_survey

FILE = "003_635826d5ffaa2f6c.txt"


def _paragraphs(path):
    return re.split(r"\n\s*\n", path.read_text().strip())


def _write(path, paragraphs):
    path.write_text("\n\n".join(paragraphs) + "\n")


def test_ingest_is_incremental_and_idempotent(settings, seeds_copy, embedder):
    index = Index(settings, embedder=embedder)
    first = index.ingest([seeds_copy])
    assert (first.added, first.updated, first.removed, first.entries) == (57, 0, 0, 57)
    assert first.chunks > 57  # long abstracts are split

    again = index.ingest([seeds_copy])
    assert (again.added, again.updated, again.unchanged, again.removed) == (0, 0, 57, 0)
    assert again.chunks == first.chunks

    # Edit one abstract: exactly one replaced, at the same position.
    paras = _paragraphs(seeds_copy / FILE)
    paras[10] = paras[10].replace("BiLLM", "BiLLM-2")
    _write(seeds_copy / FILE, paras)
    edited = index.ingest([seeds_copy])
    assert (edited.added, edited.updated, edited.unchanged, edited.removed) == (0, 1, 56, 0)
    assert any("BiLLM-2" in e.text for e in index.store.entries())

    # Remove one abstract: one removed, later ones renumbered without re-embedding.
    del paras[3]
    _write(seeds_copy / FILE, paras)
    removed = index.ingest([seeds_copy])
    assert (removed.added, removed.updated, removed.unchanged, removed.removed) == (0, 0, 56, 1)
    ordinals = sorted(e.source.ordinal for e in index.store.entries() if e.source.path == FILE)
    assert ordinals == list(range(1, 19))

    # A reopened index (new process) sees the same state.
    assert Index(settings, embedder=embedder).store.count() == 56


def test_bad_file_is_reported_and_nothing_stored_is_lost(settings, seeds_copy, embedder):
    index = Index(settings, embedder=embedder)
    index.ingest([seeds_copy])
    (seeds_copy / FILE).write_bytes(b"\x00\x01binary now")
    (seeds_copy / "new.jsonl").write_text('{"title": "New paper", "abstract": "We study tiny things."}\n')
    report = index.ingest([seeds_copy])
    assert report.errors == [f"{FILE}: binary file, not text; give {FORMATS}"]
    assert (report.added, report.removed, report.entries) == (1, 0, 58)


def test_other_embedding_model_is_a_clear_error(settings, embedder):
    Index(settings, embedder=embedder).store  # creates the index
    with pytest.raises(IndexMismatchError) as e:
        Store(settings.data_dir, settings.collection, IndexInfo("other/model", 768, "x"))
    msg = str(e.value)
    assert "other/model" not in msg or "not other/model" in msg
    assert "rag ingest --rebuild" in msg and "\n" not in msg


def test_rebuild_replaces_an_index_built_differently(settings, seeds_copy, embedder):
    Store(settings.data_dir, settings.collection, IndexInfo("other/model", 768, "x"))
    report = Index(settings, embedder=embedder).ingest([seeds_copy], rebuild=True)
    assert report.entries == 57


def test_search_folds_chunks_to_entries_and_scores_in_unit_range(seeded_index):
    hits = seeded_index.search("1-bit post-training quantization of large language models", k=10)
    assert hits[0].entry.label == "BiLLM"
    assert len({h.entry.id for h in hits}) == len(hits) == 10
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_exact_method_name_finds_its_paper(seeded_index):
    for name in ("AnyTool", "DiCo", "R-UCBE", "clawNOs", "MAgg"):
        assert seeded_index.search(name, k=1)[0].entry.label == name


def test_unrelated_query_scores_low(seeded_index):
    hits = seeded_index.search("recipes for sourdough bread baking", k=3)
    assert hits[0].score < 0.3


def test_a_running_process_sees_another_processes_ingest(settings, seeds_copy, embedder, tmp_path):
    reader = Index(settings, embedder=embedder)
    reader.ingest([seeds_copy])
    assert reader.search("sourdough starter hydration", k=1)[0].entry.label != "Sourdough"
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"title": "Sourdough", "abstract": "We study sourdough starter hydration and bread rise."}\n')
    Index(settings, embedder=embedder).ingest([extra])  # another writer
    assert reader.search("sourdough starter hydration", k=1)[0].entry.label == "Sourdough"


def test_title_words_are_searched_lexically(settings, embedder, tmp_path):
    papers = tmp_path / "papers.jsonl"
    papers.write_text(
        '{"title": "Early Exiting for Efficient Transformer Inference", "abstract": "Large transformers '
        'spend the same computation on every token. We attach classifiers to intermediate layers so that '
        'confident tokens exit early."}\n'
        '{"title": "Hard Negative Mining", "abstract": "We sample hard negatives for contrastive learning '
        'and improve linear probing on ImageNet."}\n')
    index = Index(settings, embedder=embedder)
    index.ingest([papers])
    hit = index.search("efficient inference", k=2)[0]  # both words only in the title
    assert hit.entry.title.startswith("Early Exiting") and hit.lexical > 0


@pytest.mark.parametrize("question, query", [
    ("Which papers use optimal transport as a core tool, and for what purpose?",
     "optimal transport as a core tool"),
    ("Are there any papers on bandits?", "bandits?"),
    ("papers that learn a high-level policy", "learn a high-level policy"),
    # One paper is asked for.
    ("paper linking attention layers to distributed computation",
     "paper linking attention layers to distributed computation"),
    # Not a survey question: the second clause is what is asked.
    ("What is Sparse-IFT, and what accuracy gains do they report?",
     "What is Sparse-IFT, and what accuracy gains do they report?"),
    ("Which papers?", "Which papers?"),
    ("LLMs as agents or planners - which papers address this?", "LLMs as agents or planners"),
    ("Can networks stand in for fluid solvers? What work is there on this?", "Can networks stand in for fluid solvers?"),
    # The topic follows the ask: kept whole.
    ("How does BiLLM work? What research exists on binarization?",
     "How does BiLLM work? What research exists on binarization?"),
    # Topic words inside the frame are kept; where to look is not searched for.
    ("What kernel methods work is in this set?", "kernel methods work ?"),
    ("Which recent papers study bandits?", "bandits?"),
    # ... nor what the papers do with the topic, nor "here".
    ("What papers here look at security or privacy vulnerabilities of ML models?",
     "security or privacy vulnerabilities of ML models?"),
    ("Which papers propose or analyze reinforcement learning methods?", "reinforcement learning methods?"),
    ("Which papers prove convergence?", "prove convergence?"),
    # A tail with a topic of its own loses only its frame words.
    ("Biology: which abstracts apply ML to molecules or proteins?", "Biology: apply ML to molecules or proteins?"),
    # The topic put first.
    ("Efficiency of large models: which works make trained networks cheaper to run?",
     "Efficiency of large models: make trained networks cheaper to run?"),
    # One method is asked for.
    ("Which method works best for binarization?", "Which method works best for binarization?"),
    # Keywords naming a plural kind of method ask for every method of the kind (corpus13).
    ("kernel methods", "kernel methods"),
    ("sequence architectures whose compute grows linearly with length",
     "sequence architectures whose compute grows linearly with length"),
    # ... not a method that merely uses models.
    ("Thompson sampling for contextual bandits with neural network reward models",
     "Thompson sampling for contextual bandits with neural network reward models"),
])
def test_survey_frame_is_not_searched_for(question, query):
    assert focus(question) == query
    assert is_survey(question) == (question != "What is Sparse-IFT, and what accuracy gains do they report?"
                                   and not question.startswith(("paper linking", "Which method works", "Thompson")))


def test_survey_question_finds_what_its_topic_finds(seeded_index):
    framed = seeded_index.search("Which papers study optimal transport, and what do they use it for?", 3)
    bare = seeded_index.search("optimal transport", 3)
    assert [h.entry.id for h in framed] == [h.entry.id for h in bare]
    assert framed[0].score == pytest.approx(bare[0].score)


def test_rebuild_of_an_index_that_recorded_no_sources_never_swaps_in_the_seeds(settings, embedder):
    from rag.errors import UsageError

    index = Index(settings, embedder=embedder)
    index.ingest()  # the seeds, recorded
    index.sources.path.unlink()  # as an index made before sources were recorded
    with pytest.raises(UsageError, match="does not record the files it was built from"):
        Index(settings, embedder=embedder).ingest(rebuild=True)
    assert Index(settings, embedder=embedder).store.count() == 57  # nothing dropped


def _sqlite_rows(settings, sql: str) -> list:
    import sqlite3

    with sqlite3.connect(settings.data_dir / "chroma" / "chroma.sqlite3") as db:
        return db.execute(sql).fetchall()


def test_the_store_writes_no_chroma_documents_and_reads_its_text_back(settings, seeds_copy, embedder):
    # Chroma indexes every document for full-text search, a third of the index's
    # size that nothing here uses: entry text is metadata, a chunk its place in it.
    index = Index(settings, embedder=embedder)
    index.ingest([seeds_copy])
    assert _sqlite_rows(settings, "select count(*) from embedding_metadata where key = 'chroma:document'") == [(0,)]
    # Empty fields are not stored (the seeds have no title, authors, year, ...).
    assert _sqlite_rows(settings, "select count(*) from embedding_metadata where key = 'title'") == [(0,)]
    entries = index.store.entries()
    assert len(entries) == 57 and all(len(e.text) > 200 for e in entries)
    hit = index.search("1-bit post-training quantization of large language models", k=1)[0]
    assert hit.entry.label == "BiLLM" and hit.snippet in hit.entry.text
    # Nor a vector per entry (a sixth of the disk): one number, since Chroma wants one;
    # a chunk's metadata is its place only, its id naming its entry.
    assert len(index.store._entries.get(limit=1, include=["embeddings"])["embeddings"][0]) == 1
    assert {k for m in index.store._chunks.get(include=["metadatas"])["metadatas"] for k in m} == {"start", "end"}
    chunks = index.store._chunks.get(where={"start": {"$gte": 0}}, include=["embeddings"])
    mine = np.asarray([v for i, v in zip(chunks["ids"], chunks["embeddings"]) if i.startswith(f"{hit.entry.id}:")])
    mean = mine.mean(axis=0)
    assert np.allclose(index.store.entry_vectors([hit.entry.id])[0], mean / np.linalg.norm(mean), atol=1e-5)


def test_an_index_written_with_documents_is_still_read(settings, seeds_copy, embedder):
    # Indexes written before this format keep their documents and empty fields.
    index = Index(settings, embedder=embedder)
    index.ingest([seeds_copy])
    store = index.store
    entries = store.entries()
    chunks = store._chunks.get(include=["metadatas", "embeddings"])
    by_id = {e.id: e for e in entries}
    # Chroma's upsert merges metadata: rows are written anew, as the old format had them.
    store._chunks.delete(ids=chunks["ids"])
    owner = [i.rsplit(":", 1)[0] for i in chunks["ids"]]
    store._chunks.add(ids=chunks["ids"], embeddings=chunks["embeddings"], documents=[
        Chunk.cut(by_id[e].text, m["start"], m["end"]) for e, m in zip(owner, chunks["metadatas"])],
        metadatas=[{"entry_id": e, "index": int(i.rsplit(":", 1)[1])} for e, i in zip(owner, chunks["ids"])])
    rows = store._entries.get(ids=list(by_id), include=["metadatas", "embeddings"])
    store._entries.delete(ids=rows["ids"])
    store._entries.add(ids=rows["ids"], embeddings=rows["embeddings"],
                          documents=[by_id[i].text for i in rows["ids"]],
                          metadatas=[{k: v for k, v in m.items() if k != "ztext"} | {"title": ""}
                                     for m in rows["metadatas"]])
    assert not any("ztext" in m or "start" in m for m in store._entries.get(include=["metadatas"])["metadatas"]
                   + store._chunks.get(include=["metadatas"])["metadatas"])
    old = Index(settings, embedder=embedder)
    assert sorted(e.text for e in old.store.entries()) == sorted(e.text for e in entries)
    hit = old.search("1-bit post-training quantization of large language models", k=1)[0]
    assert hit.entry.label == "BiLLM" and hit.snippet in hit.entry.text


def test_entry_text_is_stored_compressed_and_plain_text_rows_are_still_read(settings, seeds_copy, embedder):
    index = Index(settings, embedder=embedder)
    index.ingest([seeds_copy])
    entries = {e.id: e for e in index.store.entries()}
    rows = index.store._entries.get(include=["metadatas"])
    assert all("text" not in m for m in rows["metadatas"])
    packed = sum(len(m["ztext"]) for m in rows["metadatas"])
    assert packed < 0.75 * sum(len(e.text.encode()) for e in entries.values())
    # Rows written from 2026-12-01 to 2026-12-02 keep their text as it is.
    plain = {i: {"text": entries[i].text, "ztext": None} for i in rows["ids"][:5]}
    index.store._entries.update(ids=list(plain), metadatas=list(plain.values()))
    assert {e.id: e.text for e in Index(settings, embedder=embedder).store.entries()} == {
        i: e.text for i, e in entries.items()}


def test_an_index_written_with_mean_entry_vectors_is_still_written_and_read(settings, seeds_copy, embedder):
    # Entries once carried the mean of their chunk vectors (384 numbers, a sixth of
    # the disk) where they now carry one number: Chroma fixes a collection's dimension
    # at its first row, so such an index goes on writing means.
    from rag.store import _client

    index = Index(settings, embedder=embedder)
    info = index.info
    _client(settings.data_dir).create_collection(f"{settings.collection}_entries", embedding_function=None, metadata={
        "hnsw:space": "cosine", "embed_model": info.embed_model, "embed_dim": info.embed_dim,
        "chunker": info.chunker, "revision": "old"})
    index.ingest([seeds_copy])
    ids = [e.id for e in index.store.entries()[:3]]
    got = index.store._entries.get(ids=ids, include=["embeddings"])
    stored = dict(zip(got["ids"], got["embeddings"]))
    assert len(stored[ids[0]]) == info.embed_dim
    assert np.allclose(index.store.entry_vectors(ids), [stored[i] for i in ids], atol=1e-5)
    index.store.delete(ids[:1])
    assert index.store.count() == 56 and not index.store._chunks.get(ids=[f"{ids[0]}:0"])["ids"]


def test_a_moved_entry_loses_a_field_now_empty(settings, embedder, tmp_path):
    papers = tmp_path / "papers.jsonl"
    first = '{"title": "Sourdough", "year": "2020", "abstract": "We study sourdough starter hydration."}\n'
    other = '{"title": "Rye", "abstract": "We study rye bread crumb structure and rise."}\n'
    papers.write_text(other + first)
    index = Index(settings, embedder=embedder)
    index.ingest([papers])
    papers.write_text(first.replace('"year": "2020", ', "") + other)  # moved, year gone
    index.ingest([papers])
    entry = next(e for e in index.store.entries() if e.title == "Sourdough")
    assert (entry.source.ordinal, entry.year) == (1, "")
