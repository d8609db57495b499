"""The judge: a small cross-encoder, trained here, that reads a pair of texts.

It is all-MiniLM-L6-v2 fine-tuned on synthetic abstracts (``training/judge/``,
model card in ``rag/judge_model/MODEL_CARD.md``) and run as int8 ONNX. One encoder with
two outputs serves every gate of the pipeline:

- ``answers``: the passage answers the question, or supports the claim;
- ``about``: the question is about the paper the passage comes from, whether or
  not the passage answers it (a near miss is about the paper and not answered).

A passage is a window of up to ``WINDOW`` consecutive sentences of one abstract,
headed by the entry's name when it has one; an entry's verdict is the best of its
windows. Training and inference build pairs with the same functions below, so the
model always sees the format it was trained on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import ModelError

MODEL_DIR = Path(__file__).resolve().parent / "judge_model"
MODEL_FILE = MODEL_DIR / "judge.int8.onnx"
# The same network trained again on twice the data: it reads whether a passage
# answers a single-paper question better and "Which papers ...?", claims and review
# topics worse (MODEL_CARD.md), so it reads those questions and the first judge the rest.
QUESTIONS_MODEL_FILE = MODEL_DIR / "questions.int8.onnx"
MAX_TOKENS = 192  # question or claim + passage, in word pieces
WINDOW = 3  # sentences per passage
STRIDE = 2  # windows overlap by one sentence, so a two-sentence fact is read whole
QUESTION, CLAIM = "question", "claim"


def first_segment(kind: str, text: str) -> str:
    """The pair's first text: the task marker, then the question or claim."""
    return f"{kind}: {' '.join(text.split())}"


def passage(name: str, sents: Sequence[str]) -> str:
    """The pair's second text: the entry's name (when it has one), then sentences."""
    body = " ".join(sents)
    return f"{name}: {body}" if name else body


def windows(n: int, size: int = WINDOW, stride: int = STRIDE) -> list[tuple[int, int]]:
    """Half-open sentence ranges covering ``n`` sentences with windows of ``size``."""
    if n <= size:
        return [(0, n)]
    starts = list(range(0, n - size + 1, stride))
    if starts[-1] + size < n:
        starts.append(n - size)
    return [(s, s + size) for s in starts]


@lru_cache(maxsize=1)
def _tokenizer():
    from tokenizers import Tokenizer

    from .embed import model_dir

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS, strategy="longest_first")
    tok.enable_padding()
    return tok


def encode(firsts: Sequence[str], seconds: Sequence[str]) -> dict[str, np.ndarray]:
    """Token ids of pairs for the model; training feeds it the same."""
    enc = _tokenizer().encode_batch(list(zip(firsts, seconds)))
    return {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}


@dataclass(frozen=True)
class Reading:
    """The judge's verdict on one entry for one question or claim."""

    answers: float  # best window
    about: float  # best window
    window: tuple[int, int]  # sentence range of the best-answering window


class Judge:
    """Scores pairs with the shipped ONNX model (or another one given)."""

    def __init__(self, model_file: Path = MODEL_FILE, threads: int | None = None):
        self.model_file = Path(model_file)
        self._threads = threads
        self.seconds = 0.0  # spent scoring, summed: what the judge adds to an answer
        if not self.model_file.is_file():
            raise ModelError(f"the judge model {self.model_file} is missing; reinstall the project "
                             "(pip install -e .) or retrain it with training/judge/train.py")

    @cached_property
    def _session(self):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads or min(os.cpu_count() or 1, 4)
        # Threads that wait for work sleep instead of spinning: on cores other
        # processes keep busy, a spinning wait burns the time slice its partner
        # needs (bench/README.md, "Under load"); idle, reading is as fast.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        try:
            return ort.InferenceSession(str(self.model_file), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise ModelError(f"cannot load the judge model {self.model_file} ({e}); "
                             "reinstall the project or retrain it") from None

    def score(self, firsts: Sequence[str], seconds: Sequence[str], batch: int = 8) -> np.ndarray:
        """(n, 2) probabilities: ``answers`` and ``about`` per pair. A batch is one
        ONNX run, which a Ctrl-C waits for: 8 pairs score as fast as 16 and take
        half as long (~0.15 s idle, ~0.3 s with both cores busy)."""
        t0 = time.perf_counter()
        out = np.zeros((len(firsts), 2), dtype=np.float32)
        order = sorted(range(len(firsts)), key=lambda i: len(firsts[i]) + len(seconds[i]))
        for a in range(0, len(order), batch):
            rows = order[a:a + batch]
            logits = self._session.run(None, encode([firsts[i] for i in rows],
                                                    [seconds[i] for i in rows]))[0]
            out[rows] = 1.0 / (1.0 + np.exp(-logits))
        self.seconds += time.perf_counter() - t0
        return out

    def read(self, kind: str, text: str, entries: Sequence[tuple[str, Sequence[str]]]) -> list[Reading]:
        """One reading per entry, given as (name, sentences): every window of every
        entry is scored in one batch."""
        firsts, seconds, spans = [], [], []
        for i, (name, sents) in enumerate(entries):
            for w in windows(len(sents)):
                firsts.append(first_segment(kind, text))
                seconds.append(passage(name, sents[w[0]:w[1]]))
                spans.append((i, w))
        probs = self.score(firsts, seconds) if firsts else np.zeros((0, 2))
        best: list[Reading | None] = [None] * len(entries)
        for (i, w), (ans, about) in zip(spans, probs):
            r = best[i]
            if r is None:
                best[i] = Reading(float(ans), float(about), w)
            else:
                best[i] = Reading(max(r.answers, float(ans)), max(r.about, float(about)),
                                  w if ans > r.answers else r.window)
        return [r or Reading(0.0, 0.0, (0, 0)) for r in best]

    def sentences(self, question: str, name: str, sents: Sequence[str]) -> np.ndarray:
        """How well each sentence alone answers the question (for choosing quotes)."""
        return self.score([first_segment(QUESTION, question)] * len(sents),
                          [passage(name, [s]) for s in sents])[:, 0]
