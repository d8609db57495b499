"""The judge on the eval sets: how well it reads, and the decisions its thresholds give.

    python bench/judge.py [eval/questions.jsonl ...] [--split dev]
    python bench/judge.py --fit eval/questions.jsonl:dev eval/holdout.jsonl eval/holdout2.jsonl
    python bench/judge.py --judge training/judge/work/onnx/judge.int8.onnx ...   # a retrained one
    python bench/judge.py --questions-judge FILE ...   # ... for single-paper questions only

``--fit`` fits rag/answer.py FUSION (a logistic model over the retrieval score and
the judge's outputs, for single-paper and survey questions) on the files given,
prints it, and reports the decisions with it; paste it into rag/answer.py.

For every question, the retrieved entries (as `rag ask` reads them) are read by the
judge. Printed per question set:

- pair level: AUC of the judge's ``answers``, of the retrieval score and of the fused
  score, for gold entries against every other entry read (single-paper and
  unanswerable questions; multi-paper questions apart);
- decision level at the pipeline's thresholds (rag/answer.py ANSWERS): unanswerable
  questions declined, answerable ones declined, the right entry chosen first for
  single-paper questions, recall and precision of the entries kept for multi-paper
  questions; the same for a sweep of thresholds, to see the trade-off;
- the judge's time per question (median), which is what it adds to an answer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import _util
import numpy as np

from rag import answer as A
from rag.answer import Answerer
from rag.config import Settings
from rag.evaluate import load_questions
from rag.index import Index
from rag.judge import QUESTION

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training" / "judge"))
from train import auc  # noqa: E402


def collect(answerer: Answerer, path: Path, split: str | None) -> list[tuple]:
    """(question, query, hits, readings, gold flags, judge seconds) per question."""
    rows = []
    for q in load_questions(path, split):
        query = answerer.analyse(q.question)
        plan = A.SURVEY if query.survey else A.SINGLE
        hits = [h for h in answerer.index.search(query.search, plan.read) if h.score >= A.REFUSE_BELOW]
        t0 = time.perf_counter()
        readings = answerer.read(QUESTION, query.text, [h.entry for h in hits])
        gold = [(h.entry.source.path, h.entry.source.ordinal) in q.gold for h in hits]
        rows.append((q, query, hits, readings, gold, time.perf_counter() - t0))
    return rows


def fit(rows: list[tuple]) -> dict[str, tuple[float, ...]]:
    from sklearn.linear_model import LogisticRegression

    out = {}
    for kind in ("single", "survey"):
        x = [A.features(h, r) for _, query, hits, rs, _, _ in rows if query.survey == (kind == "survey")
             for h, r in zip(hits, rs)]
        y = [g for _, query, _, _, gs, _ in rows if query.survey == (kind == "survey") for g in gs]
        m = LogisticRegression(C=1.0).fit(np.array(x), np.array(y))
        out[kind] = tuple(round(float(v), 3) for v in [m.intercept_[0], *m.coef_[0]])
    return out


def report(answerer: Answerer, name: str, rows: list[tuple]) -> None:
    print(f"\n{name}: {len(rows)} questions")
    for label, survey in (("single-paper and unanswerable", False), ("multi-paper", True)):
        sel = [(h, r, g) for q, query, hits, rs, gs, _ in rows if (q.base_kind == "multi") == survey
               for h, r, g in zip(hits, rs, gs)]
        if not sel:
            continue
        g = np.array([x[2] for x in sel], dtype=int)
        aucs = {what: auc(g, np.array([f(h, r) for h, r, _ in sel])) for what, f in (
            ("judge", lambda h, r: r.answers), ("about", lambda h, r: r.about),
            ("retrieval", lambda h, r: h.score), ("fused", lambda h, r: A.fused(survey, h, r)))}
        print(f"  pair AUC, {label} ({g.sum()} gold of {len(g)}): "
              + ", ".join(f"{k} {v:.3f}" for k, v in aucs.items()))
    times = [row[5] for row in rows]
    print(f"  judge time per question: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms")
    base = A.ANSWERS
    for t in sorted({base, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2}):
        A.ANSWERS = t
        declined = {"unanswerable": [], "answerable": []}
        first, recall, precision = [], [], []
        for q, query, hits, readings, gold, _ in rows:
            kept = answerer.select(query, hits, readings)
            declined["unanswerable" if q.base_kind == "unanswerable" else "answerable"].append(not kept)
            ids = [(h.entry.source.path, h.entry.source.ordinal) for h, _ in kept]
            if q.base_kind == "single" and kept:
                first.append(ids[0] in q.gold)
            if q.base_kind == "multi":
                recall.append(len(q.gold & set(ids)) / len(q.gold))
                if ids:
                    precision.append(len(q.gold & set(ids)) / len(ids))
        mark = " <- pipeline" if t == base else ""
        print(f"  ANSWERS={t:.2f}: unanswerable declined {_pct(declined['unanswerable'])}, "
              f"answerable declined {_pct(declined['answerable'])}, single right first {_pct(first)}, "
              f"multi recall {_pct(recall)} precision {_pct(precision)}{mark}")
    A.ANSWERS = base
    top = A.ON_TOPIC
    for t in sorted({top, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}):
        A.ON_TOPIC = t
        recall, precision, declined = [], [], []
        for q, query, hits, readings, gold, _ in rows:
            if q.base_kind != "multi":
                continue
            ids = [(h.entry.source.path, h.entry.source.ordinal) for h, _ in answerer.select(query, hits, readings)]
            recall.append(len(q.gold & set(ids)) / len(q.gold))
            declined.append(not ids)
            if ids:
                precision.append(len(q.gold & set(ids)) / len(ids))
        mark = " <- pipeline" if t == top else ""
        print(f"  ON_TOPIC={t:.2f}: multi recall {_pct(recall)} precision {_pct(precision)} "
              f"declined {_pct(declined)}{mark}")
    A.ON_TOPIC = top
    # Before the judge: declined when the best retrieval score is under REFUSE_BELOW.
    for t in (0.05, 0.08, 0.12):
        declined = {"unanswerable": [], "answerable": []}
        for q, _, hits, _, _, _ in rows:
            declined["unanswerable" if q.base_kind == "unanswerable" else "answerable"].append(
                not hits or hits[0].score < t)
        print(f"  retrieval score alone < {t:.2f}: unanswerable declined {_pct(declined['unanswerable'])}, "
              f"answerable declined {_pct(declined['answerable'])}")


def _pct(xs: list) -> str:
    return f"{100 * statistics.fmean(xs):.1f}% (n={len(xs)})" if xs else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=["eval/questions.jsonl"],
                    help="question files, each optionally FILE:dev or FILE:test for a split")
    ap.add_argument("--fit", action="store_true", help="fit FUSION on these files and report with it")
    ap.add_argument("--data-dir", type=Path, default=None)
    _util.judge_options(ap)
    args = ap.parse_args()
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    index = Index(settings)
    index.ensure_ingested()
    answerer = Answerer(index, model=None, prompts=None, **_util.judges(args))
    sets = []
    for f in args.files:
        path, _, split = f.partition(":")
        sets.append((f, collect(answerer, Path(path), split or None)))
    if args.fit:
        A.FUSION = fit([row for _, rows in sets for row in rows])
        print(f"FUSION = {A.FUSION}")
    for name, rows in sets:
        report(answerer, name, rows)


if __name__ == "__main__":
    main()
