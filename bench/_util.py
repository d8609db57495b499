"""Helpers shared by the benchmark scripts (not a benchmark itself).

The scripts are run as ``python bench/NAME.py``, which puts bench/ on sys.path, so
they import this module as ``_util``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"  # git-ignored
QUESTIONS = ROOT / "eval" / "questions.jsonl"
ROLES = ROOT / "eval" / "roles.jsonl"  # the seed sentences' roles, labelled by a reader


class Silent:
    """A chat model that writes nothing, as a stand-in for one whose statements never
    pass the check (SmolLM2-135M's rarely do): every answer and review bullet is then
    quoted, and what is decided before the model writes is the pipeline's own."""

    path, sha256, n_ctx = "silent", "", 2048

    def count_tokens(self, text: str) -> int:
        return len(text.split()) * 2

    def stream(self, system: str, user: str, max_tokens: int):
        return iter(())


def use_fusion(spec: str) -> None:
    """Set rag/answer.py FUSION for one kind from "KIND=B,RETRIEVAL,ANSWERS,ABOUT" (KIND
    single or survey), as bench/judge.py --fit prints it for a retrained judge."""
    from rag import answer

    kind, _, values = spec.partition("=")
    answer.FUSION = answer.FUSION | {kind: tuple(float(v) for v in values.split(","))}


def judge_options(ap) -> None:
    """The options that put other ONNX judges in place of the shipped ones."""
    ap.add_argument("--judge", type=Path, default=None,
                    help="another ONNX judge for every reading (a retrained one)")
    ap.add_argument("--questions-judge", type=Path, default=None,
                    help="another ONNX judge for single-paper questions only")


def judges(args) -> dict:
    """Answerer's judge arguments from :func:`judge_options`."""
    from rag.judge import Judge

    files = {"judge": args.judge, "questions_judge": args.questions_judge or args.judge}
    return {k: Judge(f) for k, f in files.items() if f}


def questions(kinds: set[str] | None = None) -> list[dict]:
    """The evaluation questions, optionally only those whose ``kind`` is in ``kinds``."""
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if kinds is None or r["kind"] in kinds]


def gold_roles() -> dict[str, str]:
    """Each labelled seed sentence -> its role (sentences are unique in the seeds)."""
    out = {}
    for line in ROLES.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.update(zip(r["sentences"], r["roles"]))
    return out


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def median(values) -> float:
    return pct(values, 50)


def table(title: str, header: list[str], rows: list[list]) -> None:
    """Print a small fixed-width table; floats get 3 significant decimals."""
    def cell(v) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for r in cells:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def summary(name: str, figures: dict) -> None:
    """The final one-line JSON summary every script ends with."""
    print(json.dumps({"bench": name, **figures}))


def rag_command() -> list[str]:
    """The `rag` console script of the running interpreter's environment (so a
    subprocess runs the same install as this process)."""
    script = Path(sys.executable).parent / "rag"
    return [str(script)] if script.exists() else [sys.executable, "-m", "rag.cli"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float


# Runs argv[2:] and writes {"returncode", "max_rss_kb"} of that child to argv[1].
# A launcher is needed because Linux starts a child's max RSS at the RSS of the
# process it was forked from: measured directly, every child of a benchmark that has
# loaded a model would report at least the benchmark's own size. The launcher is a
# bare interpreter (~10 MB), so what it reports is the child's own peak.
_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
proc.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as f:
    json.dump({"returncode": proc.returncode, "max_rss_kb": usage.ru_maxrss}, f)
"""


def run_measured(cmd: list[str], timeout: float = 300) -> Run:
    """Run ``cmd``; return its output, wall time and peak RSS (of ``cmd`` alone).

    The wall time includes starting the launcher's interpreter (~20 ms); use
    :func:`run_timed` where only time matters.
    """
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        run = run_timed([sys.executable, "-S", "-c", _LAUNCHER, str(stats), *cmd], timeout)
        got = json.loads(stats.read_text()) if stats.exists() else {"returncode": run.returncode, "max_rss_kb": 0}
    run.returncode = got["returncode"]
    run.max_rss_mb = got["max_rss_kb"] / 1024  # KiB on Linux
    return run


def run_timed(cmd: list[str], timeout: float = 300) -> Run:
    """Run ``cmd``; return its output and wall time (max_rss_mb is not measured).
    Output goes to temporary files so a chatty child cannot block on a full pipe."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return Run(proc.returncode, out.read().decode(errors="replace"),
                   err.read().decode(errors="replace"), seconds, 0.0)


def check(run: Run, what: str) -> Run:
    if run.returncode != 0:
        sys.exit(f"{what} failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    return run


def fresh_dir(prefix: str) -> Path:
    """A new temporary directory, removed when the script exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def copy_models(src_data_dir: Path, dst_data_dir: Path) -> None:
    """Give a fresh data dir the ONNX export of another, so a run there does not
    pay the one-time export (which imports torch)."""
    shutil.copytree(src_data_dir / "models", dst_data_dir / "models", dirs_exist_ok=True)


class Contention:
    """How much CPU other processes took while a benchmark ran.

    On a 2-core machine, anything else running (a test suite, a build) shows up
    directly in every figure; the scripts print this so a reader can tell a slow
    result from a busy machine. Busy time of the whole machine (/proc/stat) minus this
    process's and its reaped children's CPU time, as a share of all cores.
    """

    def __init__(self):
        self.cores = os.cpu_count() or 1
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
        t = os.times()
        return time.monotonic(), busy, t.user + t.system + t.children_user + t.children_system

    def others_share(self) -> float:
        """Share of all cores used by other processes since construction, in [0, 1]."""
        try:
            end = self._sample()
        except OSError:  # no /proc: not Linux
            return float("nan")
        wall, busy, own = (e - s for e, s in zip(end, self._start))
        return max(0.0, min(1.0, (busy - own) / max(wall * self.cores, 1e-9)))

    def report(self) -> float:
        share = self.others_share()
        note = "" if share < 0.05 else "  <- the machine was busy: figures are noisy/slow"
        print(f"\nother processes used {share:.0%} of the {self.cores} cores during this run{note}")
        return share
