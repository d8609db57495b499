"""The ONNX embedder gives sentence-transformers' own vectors."""

from __future__ import annotations

import numpy as np

from rag.config import DEFAULT_SEEDS
from rag.corpus import discover, read_file
from rag.text import sentences


def test_onnx_vectors_match_sentence_transformers_in_padded_batches(embedder):
    from sentence_transformers import SentenceTransformer

    from rag.embed import model_dir

    texts = [s for f in discover([DEFAULT_SEEDS])[0][:1] for e in read_file(f).entries[:4] for s in sentences(e.text)]
    texts += ["short", "a much longer text " * 80]  # beyond 256 word pieces: truncated alike
    ours = embedder.encode(texts)
    ref = SentenceTransformer(str(model_dir()), device="cpu").encode(texts, normalize_embeddings=True)
    assert ours.shape == (len(texts), 384)
    assert np.abs(ours - ref).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_same_text_same_vector_whatever_the_batch(embedder):
    alone = embedder.encode(["optimal transport for CLIP"])[0]
    mixed = embedder.encode(["x " * 200, "optimal transport for CLIP", "y"])[1]
    assert np.abs(alone - mixed).max() < 1e-5


def test_token_count_is_of_real_tokens(embedder):
    assert embedder.count_tokens("hello world") == 4  # [CLS] hello world [SEP]


def test_int8_embedder_is_close_to_fp32_and_an_index_knows_which_built_it(embedder, tmp_path):
    import numpy as np
    import pytest

    from rag.config import Settings
    from rag.embed import Embedder
    from rag.errors import IndexMismatchError
    from rag.index import Index

    int8 = Embedder(embedder.onnx_file.parent, quantized=True)
    assert int8.name.endswith("-int8") and int8.name != embedder.name
    texts = ["BiLLM is a 1-bit post-training quantization scheme.", "Bandits with delayed feedback."]
    cos = (int8.encode(texts) * embedder.encode(texts)).sum(axis=1)
    assert np.all(cos > 0.97)
    settings = Settings(data_dir=tmp_path / "d", embed_quantized=True)
    Index(settings, embedder=int8).store  # an index built with the int8 model
    with pytest.raises(IndexMismatchError, match="rag ingest --rebuild"):
        Index(Settings(data_dir=tmp_path / "d"), embedder=embedder).store


def test_a_warmed_embedder_loads_on_another_thread_and_embeds_alike(embedder, tmp_path):
    from rag.embed import Embedder

    expected = embedder.encode(["optimal transport for CLIP"])
    cold = Embedder(tmp_path / "none")
    cold.warm()  # nothing exported under this cache yet: a first run exports in the foreground
    assert cold._warming is None
    warmed = Embedder(embedder.fp32_file.parent)
    warmed.warm()
    assert warmed._warming is not None
    assert np.abs(warmed.encode(["optimal transport for CLIP"]) - expected).max() < 1e-6


def test_importing_the_library_leaves_chromadb_for_the_store_to_import():
    """A search loads the embedder while chromadb imports (rag/index.py, Index.store):
    an import of chromadb at the top of a module the CLI imports first would undo it."""
    import subprocess
    import sys

    code = "import sys, rag.cli, rag.index, rag.answer; print('chromadb' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
