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

    python bench/answer.py --load [--load-procs 2] [--load-kind spin|matmul] [--load-session]

Runs the pipeline over the same questions twice in one process: on the machine as
it is (idle), then while ``--load-procs`` processes (default: one per core) keep
every core busy (pure-Python busy loops, or numpy matmuls on one BLAS thread each),
started with multiprocessing and stopped after. ``--load-session`` starts each in
a session of its own: Linux autogroup scheduling then gives them a group share, as
to programs started from another terminal, instead of treating them as this
process's peers. Prints first token and total per kind idle and loaded side by
side, the loaded/idle ratio of the medians, where the time of a question goes
(embedding, the rest of retrieval, judge, prefill = call start to first piece,
decode = first piece to end; medians per question), and the longest single
llama.cpp decode call (a prompt batch) and ONNX judge run, which bound how long a
Ctrl-C waits. Target: ratio <= 3, and the multi-paper median <= 6 s idle. No raw
replay in this mode.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import _util
from rag import prompts
from rag.answer import Answerer
from rag.config import Settings
from rag.index import Index
from rag.llm import load_model

KINDS = ("single", "multi")
TARGET_OVERHEAD = 0.10
TARGET_LOAD_RATIO = 3.0  # loaded/idle median, first token and total
TARGET_MULTI_IDLE_S = 6.0
STAGES = ("embed", "retrieval", "judge", "prefill", "decode", "other")


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
    stages: dict[str, float] = field(default_factory=dict)  # --load: seconds per stage


class Recorder:
    """Stands in for the chat model: passes everything through to it and records
    each stream call and when the first token of a question arrived."""

    def __init__(self, model):
        self.model = model
        self.calls: list[Call] = []
        self.first_token_at: float | None = None
        self.prefill_s = 0.0  # stream call start to its first piece, summed
        self.decode_s = 0.0  # first piece to the end of the call, summed

    def __getattr__(self, name):  # path, n_ctx, count_tokens, sha256, ...
        return getattr(self.__dict__["model"], name)

    def reset(self) -> None:
        self.calls = []
        self.first_token_at = None
        self.prefill_s = self.decode_s = 0.0

    def stream(self, system: str, user: str, max_tokens: int):
        call = Call(system, user, max_tokens)
        self.calls.append(call)
        t0 = time.perf_counter()
        first = None
        try:
            for piece in self.model.stream(system, user, max_tokens):
                now = time.perf_counter()
                if first is None:
                    first = now
                if self.first_token_at is None:
                    self.first_token_at = now
                call.pieces += 1
                yield piece
        finally:
            end = time.perf_counter()
            self.prefill_s += (first or end) - t0
            self.decode_s += end - (first or end)


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
        # As far as the pipeline read: it stops a call once its claims are settled.
        for i, _ in enumerate(model.stream(c.system, c.user, c.max_tokens), 1):
            if first is None:
                first = time.perf_counter() - t0
            pieces += 1
            if i == c.pieces:
                break
    total = time.perf_counter() - t0
    return Timing(first if first is not None else total, total, pieces)


def _own_session() -> None:
    """A session (and so an autogroup) of this process's own, with the group nice of
    the parent's, so that the load weighs as much as the benchmark's own group."""
    parent = Path(f"/proc/{os.getppid()}/autogroup")
    os.setsid()
    try:
        Path("/proc/self/autogroup").write_text(parent.read_text().split()[-1])
    except (OSError, IndexError):  # no autogroup, or not allowed: the default group nice
        pass


def _spin(own_session: bool = False) -> None:
    if own_session:
        _own_session()
    while True:
        pass


def _matmul(own_session: bool = False) -> None:
    if own_session:
        _own_session()
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    import numpy as np

    a = np.random.default_rng(0).random((256, 256))
    while True:
        a = (a @ a) / 256.0


class Load:
    """``procs`` processes that each keep a core busy until stopped (spawned, so a
    matmul child sets its BLAS threads before numpy loads)."""

    def __init__(self, procs: int, kind: str, own_session: bool = False):
        ctx = multiprocessing.get_context("spawn")
        self.procs = [ctx.Process(target=_spin if kind == "spin" else _matmul, args=(own_session,), daemon=True)
                      for _ in range(procs)]

    def __enter__(self) -> "Load":
        for p in self.procs:
            p.start()
        time.sleep(1.0)  # let them start (spawn imports) and reach their loop
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()


class Probe:
    """Times the stages the pipeline does not report itself: every embedder call
    (to split it from the rest of retrieval), every llama.cpp decode call (the C
    call a prompt batch or one token is) and every ONNX judge run."""

    def __init__(self, index: Index, model, answerer: Answerer):
        self.embeds: list[tuple[float, float]] = []  # (start, seconds)
        self.worst = {"prefill_call": 0.0, "token_call": 0.0, "judge_run": 0.0}
        self._wrap(index.embedder, "encode", self._embed)
        llm = getattr(model, "_llm", None)
        if llm is not None:
            self._wrap(llm._ctx, "decode", self._decode)
        for judge in (answerer.judge, answerer.questions_judge):
            self._wrap(judge._session, "run", lambda f, *a: self._max("judge_run", f, *a))

    @staticmethod
    def _wrap(obj, name, how) -> None:
        orig = getattr(obj, name)
        setattr(obj, name, lambda *a, **kw: how(orig, *a, **kw))

    def _embed(self, f, *a, **kw):
        t0 = time.perf_counter()
        try:
            return f(*a, **kw)
        finally:
            self.embeds.append((t0, time.perf_counter() - t0))

    def _decode(self, f, batch):
        return self._max("prefill_call" if batch.batch.n_tokens > 1 else "token_call", f, batch)

    def _max(self, what, f, *a):
        t0 = time.perf_counter()
        try:
            return f(*a)
        finally:
            self.worst[what] = max(self.worst[what], time.perf_counter() - t0)

    def reset(self) -> None:
        self.embeds = []
        self.worst = dict.fromkeys(self.worst, 0.0)


def ask_stages(answerer: Answerer, recorder: Recorder, probe: Probe, question: str) -> Timing:
    """Like :func:`ask`, with the question's time split into stages."""
    probe.embeds = []
    recorder.reset()
    t0 = time.perf_counter()
    ans = answerer.ask(question)
    total = time.perf_counter() - t0
    first = recorder.first_token_at - t0 if recorder.first_token_at else total
    retrieval = ans.timings["retrieval_ms"] / 1000
    embed_in_retrieval = sum(d for s, d in probe.embeds if s < t0 + retrieval)
    st = {"embed": sum(d for _, d in probe.embeds), "retrieval": retrieval - embed_in_retrieval,
          "judge": ans.timings["judge_s"], "prefill": recorder.prefill_s, "decode": recorder.decode_s}
    st["other"] = total - sum(st.values())
    return Timing(first, total, sum(c.pieces for c in recorder.calls), ans.timings["judge_s"], st)


def setup(stride: int):
    """Every ``stride``-th question of each kind, a fresh seeds index, the model behind
    a Recorder, the answerer, and a warm-up question the stride leaves out (so it is
    not also measured)."""
    by_kind = {k: _util.questions({k})[::stride] for k in KINDS}
    index = Index(Settings(data_dir=_util.fresh_dir("bench-answer-")))
    index.ingest()
    model = load_model()
    recorder = Recorder(model)
    answerer = Answerer(index, recorder, prompts.load())
    return by_kind, index, model, recorder, answerer, _util.questions({"single"})[1]["question"]


def run_phase(answerer, recorder, probe, by_kind, warm_q) -> dict:
    ask(answerer, recorder, warm_q)  # the same KV cache and warm state at the start of each phase
    probe.reset()
    contention = _util.Contention()
    timings = {k: [ask_stages(answerer, recorder, probe, q["question"]) for q in qs] for k, qs in by_kind.items()}
    return {"timings": timings, "worst": dict(probe.worst), "contention": contention}


def main_load(args) -> None:
    procs = args.load_procs or os.cpu_count() or 1
    by_kind, index, model, recorder, answerer, warm_q = setup(args.stride)
    ask(answerer, recorder, warm_q)
    probe = Probe(index, model, answerer)

    phases = {"idle": run_phase(answerer, recorder, probe, by_kind, warm_q)}
    phases["idle"]["others"] = phases["idle"]["contention"].others_share()
    load = Load(procs, args.load_kind, args.load_session)
    with load:
        phases["loaded"] = run_phase(answerer, recorder, probe, by_kind, warm_q)
    # After the load processes are reaped, so their CPU counts as ours, not others'.
    phases["loaded"]["others"] = phases["loaded"]["contention"].others_share()

    def med(ph: str, kind: str, what: str) -> float:
        ts = [t for k in (KINDS if kind == "all" else (kind,)) for t in phases[ph]["timings"][k]]
        return _util.median([getattr(t, what) if what.endswith("_s") else t.stages[what] for t in ts])

    rows, figures = [], {}
    for kind in (*KINDS, "all"):
        f = {}
        for what in ("first_token_s", "total_s"):
            idle, loaded = med("idle", kind, what), med("loaded", kind, what)
            f |= {f"idle_{what}": round(idle, 3), f"loaded_{what}": round(loaded, 3),
                  f"ratio_{what[:-2]}": round(loaded / idle, 2)}
        n = sum(len(phases["idle"]["timings"][k]) for k in (KINDS if kind == "all" else (kind,)))
        rows.append([kind, n, f["idle_first_token_s"], f["loaded_first_token_s"], f"{f['ratio_first_token']:.2f}",
                     f["idle_total_s"], f["loaded_total_s"], f"{f['ratio_total']:.2f}"])
        figures[kind] = f
    where = " in their own sessions" if args.load_session else ""
    _util.table(f"Answer latency idle vs loaded ({procs} {args.load_kind} processes{where} on {os.cpu_count()} cores; "
                f"stride {args.stride}; medians in seconds; ratio = loaded/idle)",
                ["kind", "n", "idle 1st", "loaded 1st", "ratio", "idle total", "loaded total", "ratio"], rows)

    rows = []
    for kind in KINDS:
        for stage in STAGES:
            idle, loaded = med("idle", kind, stage), med("loaded", kind, stage)
            rows.append([f"{kind} {stage}", round(idle, 3), round(loaded, 3),
                         f"{loaded / idle:.2f}" if idle > 0.005 else "-"])
            figures[kind][f"idle_{stage}_s"], figures[kind][f"loaded_{stage}_s"] = round(idle, 3), round(loaded, 3)
    _util.table("Where a question's time goes (median seconds per question; prefill = stream call start "
                "to first piece, decode = the rest of the call)", ["kind stage", "idle", "loaded", "ratio"], rows)

    rows = [[w, round(phases["idle"]["worst"][w], 3), round(phases["loaded"]["worst"][w], 3)]
            for w in phases["idle"]["worst"]]
    _util.table("Longest single C call (seconds; a Ctrl-C waits for the call it lands in)",
                ["call", "idle", "loaded"], rows)
    figures["worst_call_s"] = {ph: {w: round(v, 3) for w, v in phases[ph]["worst"].items()} for ph in phases}

    ratios = [figures[k][f"ratio_{w}"] for k in KINDS for w in ("first_token", "total")]
    met_ratio = max(ratios) <= TARGET_LOAD_RATIO
    met_multi = figures["multi"]["idle_total_s"] <= TARGET_MULTI_IDLE_S
    print(f"  worst ratio {max(ratios):.2f}, target <= {TARGET_LOAD_RATIO:g}: {'met' if met_ratio else 'NOT met'}; "
          f"multi idle median {figures['multi']['idle_total_s']:.2f} s, target <= {TARGET_MULTI_IDLE_S:g} s: "
          f"{'met' if met_multi else 'NOT met'}")
    for ph in phases:
        share = phases[ph]["others"]
        note = "" if share < 0.05 else "  <- the machine was busy: figures are noisy/slow"
        print(f"other processes (not this benchmark's load) used {share:.0%} of the {os.cpu_count()} cores "
              f"during the {ph} phase{note}")
    _util.summary("answer-load", {**figures, "model": model.path.rsplit("/", 1)[-1],
                                  "load_procs": procs, "load_kind": args.load_kind,
                                  "load_session": args.load_session,
                                  "target_ratio": TARGET_LOAD_RATIO, "target_met_ratio": met_ratio,
                                  "target_multi_idle_s": TARGET_MULTI_IDLE_S, "target_met_multi_idle": met_multi,
                                  "other_cpu_share": {ph: round(phases[ph]["others"], 3) for ph in phases}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stride", type=int, default=2, help="use every n-th question of each kind")
    ap.add_argument("--load", action="store_true",
                    help="run idle, then with every core kept busy; print both and the ratio")
    ap.add_argument("--load-procs", type=int, default=0, help="competing processes (default: one per core)")
    ap.add_argument("--load-kind", choices=("spin", "matmul"), default="spin",
                    help="what they run: a Python busy loop, or numpy matmuls on one BLAS thread")
    ap.add_argument("--load-session", action="store_true",
                    help="start each in a session of its own: with Linux autogroup scheduling they then "
                         "compete as programs started from another terminal do, not as this one's children")
    args = ap.parse_args()
    if args.load:
        return main_load(args)
    contention = _util.Contention()

    by_kind, index, model, recorder, answerer, warm_q = setup(args.stride)
    # Warm-up: BM25 build, Chroma load, first ONNX and llama.cpp runs.
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
