"""Chunks fit the embedder's window and lose nothing."""

from __future__ import annotations

from rag.chunking import chunk_entry
from rag.config import DEFAULT_SEEDS
from rag.corpus import discover, read_file
from rag.records import Chunk, Entry, Source
from rag.text import sentences


def _entry(text: str) -> Entry:
    return Entry(id="e", label="x", text=text, source=Source("f", 1))


def count_words(text: str) -> int:
    return len(text.split()) + 2


def test_short_text_is_one_chunk():
    chunks = chunk_entry(_entry("One sentence. Two sentences."), count_words, 50)
    assert [c.text for c in chunks] == ["One sentence. Two sentences."]


def test_windows_fit_overlap_and_cover_every_sentence():
    text = " ".join(f"Sentence number {i} has some words in it." for i in range(30))
    chunks = chunk_entry(_entry(text), count_words, 40, overlap=1)
    assert len(chunks) > 3
    assert all(count_words(c.text) <= 40 + 2 for c in chunks)
    covered = {s for c in chunks for s in sentences(c.text)}
    assert covered == set(sentences(text))
    for a, b in zip(chunks, chunks[1:]):
        assert sentences(a.text)[-1] == sentences(b.text)[0]  # one sentence shared


def test_overlong_sentence_is_cut_not_truncated():
    text = "word " * 300 + "end."
    chunks = chunk_entry(_entry(text.strip()), count_words, 50, overlap=1)
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_real_seed_chunks_fit_minilm(embedder):
    for f in discover([DEFAULT_SEEDS])[0]:
        for e in read_file(f).entries:
            chunks = chunk_entry(e, embedder.count_tokens, 200, 1)
            assert all(embedder.count_tokens(c.text) <= 256 for c in chunks)
            joined = " ".join(c.text for c in chunks)
            assert all(s in joined for s in sentences(e.text))


def test_a_chunk_is_its_place_in_the_entry_text():
    # The store keeps where a chunk lies, not its text: the place must give it back,
    # line breaks and a sentence cut into word runs included.
    text = "First line\nof a sentence.  Second one here. " + "word " * 120 + "end. Last one."
    for c in chunk_entry(_entry(text), count_words, 40, overlap=1):
        assert Chunk.cut(text, c.start, c.end) == " ".join(c.text.split())


def test_real_seed_chunks_are_their_place_in_the_text(embedder):
    for f in discover([DEFAULT_SEEDS])[0]:
        for e in read_file(f).entries:
            for c in chunk_entry(e, embedder.count_tokens, 200, 1):
                assert Chunk.cut(e.text, c.start, c.end) == c.text
