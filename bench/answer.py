"""Answer latency: the cited-answer pipeline against raw llama.cpp on the same prompts.

    python bench/answer.py [--stride 2]

Runs ``Answerer.ask`` over the "single" and "multi" questions of
eval/questions.jsonl (every other one by default) on the seeds, recording every
``stream(system, user, max_tokens)`` call the pipeline makes to the chat model. Then
replays exactly those calls, in the same order, directly on the same model object
and times them per question (first token, and total = all calls of the question).
llama.cpp reuses the KV cache of the longest common prompt prefix with the previous
call, so replaying in the same order gives the raw side the same cache hits.

Ours is the wall time of ``ask`` (retrieval, context selection, generation,
verification); first token is from the start of ``ask``. Medians are printed per
kind; overhead = ours/raw - 1 on the summed times of the same questions (paired).
Target: <= 10% (printed for total time and for first token). The judge's time
(reading entries, ranking sentences, checking statements) is part of ours and is
also printed on its own: median per question and share of the total. Target:
it adds at most 0.4 s to the median single-paper answer.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import _util
from rag import prompts
from rag.answer import Answerer
from rag.config import Settings
from rag.index import Index
from rag.llm import load_model

KINDS = ("single", "multi")
TARGET_OVERHEAD = 0.10


@dataclass
class Call:
    system: str
    user: str
    max_tokens: int
    pieces: int = 0  # streamed pieces: a check that the replay generated the same


@dataclass
class Timing:
    first_token_s: float
    total_s: float
    pieces: int = 0
    judge_s: float = 0.0  # of total_s: the judge reading entries, sentences and claims


class Recorder:
    """Stands in for the chat model: passes everything through to it and records
    each stream call and when the first token of a question arrived."""

    def __init__(self, model):
        self.model = model
        self.calls: list[Call] = []
        self.first_token_at: float | None = None

    def __getattr__(self, name):  # path, n_ctx, count_tokens, sha256, ...
        return getattr(self.__dict__["model"], name)

    def reset(self) -> None:
        self.calls = []
        self.first_token_at = None

    def stream(self, system: str, user: str, max_tokens: int):
        call = Call(system, user, max_tokens)
        self.calls.append(call)
        for piece in self.model.stream(system, user, max_tokens):
            if self.first_token_at is None:
                self.first_token_at = time.perf_counter()
            call.pieces += 1
            yield piece


def ask(answerer: Answerer, recorder: Recorder, question: str) -> tuple[Timing, list[Call]]:
    """Time one question through the pipeline; also return the model calls it made."""
    recorder.reset()
    t0 = time.perf_counter()
    ans = answerer.ask(question)
    total = time.perf_counter() - t0
    # No model call (declined, or a near miss answered by the code): first token is
    # the whole answer, as the pipeline itself reports it.
    first = recorder.first_token_at - t0 if recorder.first_token_at else total
    return Timing(first, total, sum(c.pieces for c in recorder.calls), ans.timings["judge_s"]), recorder.calls


def replay(model, calls: list[Call]) -> Timing:
    """The same calls straight on the model, back to back."""
    first, pieces = None, 0
    t0 = time.perf_counter()
    for c in calls:
        for _ in model.stream(c.system, c.user, c.max_tokens):
            if first is None:
                first = time.perf_counter() - t0
            pieces += 1
    total = time.perf_counter() - t0
    return Timing(first if first is not None else total, total, pieces)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stride", type=int, default=2, help="use every n-th question of each kind")
    args = ap.parse_args()
    contention = _util.Contention()

    by_kind = {k: _util.questions({k})[::args.stride] for k in KINDS}
    index = Index(Settings(data_dir=_util.fresh_dir("bench-answer-")))
    index.ingest()
    model = load_model()
    recorder = Recorder(model)
    answerer = Answerer(index, recorder, prompts.load())

    # Warm-up: BM25 build, Chroma load, first ONNX and llama.cpp runs. A question
    # left out by the stride, so it is not also measured.
    warm_q = _util.questions({"single"})[1]["question"]
    _, warm_calls = ask(answerer, recorder, warm_q)

    ours: dict[str, list[tuple[Timing, list[Call]]]] = {k: [] for k in KINDS}
    for kind, qs in by_kind.items():
        for q in qs:
            ours[kind].append(ask(answerer, recorder, q["question"]))

    # Replay: first the warm-up's calls (untimed), so the KV cache holds what it
    # held before the first measured question of the pipeline run.
    replay(model, warm_calls)
    raw: dict[str, list[Timing]] = {k: [replay(model, calls) for _, calls in ours[k]] for k in KINDS}

    rows, figures = [], {}
    for kind in (*KINDS, "all"):
        kinds = KINDS if kind == "all" else (kind,)
        # Only questions that called the model: a declined one has nothing to replay.
        pairs = [(o, r) for k in kinds for (o, calls), r in zip(ours[k], raw[k]) if calls]
        asked = sum(len(ours[k]) for k in kinds)
        calls = sum(len(c) for k in kinds for _, c in ours[k])
        f = {"questions": len(pairs), "calls": calls}
        for what in ("first_token_s", "total_s"):
            o = [getattr(p[0], what) for p in pairs]
            r = [getattr(p[1], what) for p in pairs]
            # Overhead on the summed time of the same questions: paired, and not
            # thrown off by "all" mixing one-call and five-call questions, whose
            # separate medians would land on different kinds.
            f |= {f"ours_{what}": round(_util.median(o), 3), f"raw_{what}": round(_util.median(r), 3),
                  f"overhead_{what[:-2]}": round(sum(o) / sum(r) - 1, 3)}
        # The judge's own share, over every question asked (declined ones included).
        every = [o for k in kinds for o, _ in ours[k]]
        f |= {"ours_judge_s": round(_util.median([o.judge_s for o in every]), 3),
              "judge_share": round(sum(o.judge_s for o in every) / sum(o.total_s for o in every), 3)}
        pieces = (sum(o.pieces for o, _ in pairs), sum(r.pieces for _, r in pairs))
        rows.append([kind, f"{len(pairs)}/{asked}", calls,
                     f["ours_first_token_s"], f["raw_first_token_s"], f"{f['overhead_first_token']:+.0%}",
                     f["ours_total_s"], f["raw_total_s"], f"{f['overhead_total']:+.0%}",
                     f["ours_judge_s"], f"{f['judge_share']:.0%}", f"{pieces[0]}/{pieces[1]}"])
        figures[kind] = f
    _util.table(f"Answer latency (stride {args.stride} over each kind; n = questions that "
                "called the model / asked; medians in seconds; overhead = sum ours / sum raw - 1)",
                ["kind", "n", "calls", "ours 1st", "raw 1st", "overhead", "ours total", "raw total",
                 "overhead", "judge", "judge share", "pieces ours/raw"], rows)
    overhead, first = figures["all"]["overhead_total"], figures["all"]["overhead_first_token"]
    print(f"  overhead (all): total {overhead:+.0%}, first token {first:+.0%}; target <= {TARGET_OVERHEAD:.0%}: "
          f"total {'met' if overhead <= TARGET_OVERHEAD else 'NOT met'}, "
          f"first token {'met' if first <= TARGET_OVERHEAD else 'NOT met'}")

    others = contention.report()
    _util.summary("answer", {**figures, "model": model.path.rsplit("/", 1)[-1],
                             "target_overhead": TARGET_OVERHEAD,
                             "target_met": overhead <= TARGET_OVERHEAD,
                             "target_met_first_token": first <= TARGET_OVERHEAD,
                             "other_cpu_share": round(others, 3)})


if __name__ == "__main__":
    main()
