"""Latency guarantees that are functional checks, not timed benchmarks (those are
bench/answer.py --load): a Ctrl-C lands within a bound while the real GGUF model
reads a long prompt, and the model answers as before afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rag.config import DEFAULT_SEEDS

pytestmark = pytest.mark.model

# Generous against the 0.5 s the prompt batches are sized for (rag/llm.py), so a
# busy machine does not make it flaky; a prompt read in one C call takes several
# seconds at this length even on an idle machine.
BOUND_S = 2.0
SYSTEM = "You are a helpful research assistant. Answer in one sentence."


@pytest.fixture(scope="module")
def model():
    from rag.llm import load_model

    return load_model()


def long_user(model, tokens: int) -> str:
    """Seed abstract text cut to about ``tokens`` of the model's tokens."""
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in sorted(DEFAULT_SEEDS.glob("*.txt")))
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the most words within the budget
        mid = (lo + hi + 1) // 2
        if model.count_tokens(" ".join(words[:mid])) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + "\n\nQuestion: What is this about?"


def interrupted_after(model, system: str, user: str, delay: float) -> tuple[float, list[str]]:
    """Stream with a SIGINT sent from another thread ``delay`` seconds in, as Ctrl-C
    sends it; the seconds from the signal to the KeyboardInterrupt, and the pieces
    streamed before it."""
    sent: list[float] = []

    def ctrl_c() -> None:
        time.sleep(delay)
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    pieces: list[str] = []
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=ctrl_c, daemon=True)
    try:
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            for piece in model.stream(system, user, 16):
                pieces.append(piece)
            sender.join()  # the whole answer came first (a very fast machine): let it land here
            time.sleep(BOUND_S)
        caught = time.perf_counter()
        sender.join()
    finally:
        signal.signal(signal.SIGINT, old)
    return caught - sent[0], pieces


def test_ctrl_c_during_a_long_prompt_stops_generation_promptly(model):
    user = long_user(model, min(model.n_ctx, 4096) - 200)
    assert len(model.prompt_tokens(SYSTEM, user)) > 2500
    waited, pieces = interrupted_after(model, SYSTEM, user, delay=0.3)
    assert not pieces, "the prompt was read before the interrupt: it did not test the prompt's reading"
    assert waited < BOUND_S, f"KeyboardInterrupt came {waited:.2f} s after SIGINT"


def test_model_answers_as_before_after_an_interrupted_prompt(model):
    short = "BiLLM is a 1-bit post-training quantization scheme for large language models.\n\nQuestion: What is BiLLM?"
    before = "".join(model.stream(SYSTEM, short, 24))
    interrupted_after(model, SYSTEM, long_user(model, 3000), delay=0.2)
    assert "".join(model.stream(SYSTEM, short, 24)) == before
