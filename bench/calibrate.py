"""Fit the retrieval weights (rag/retrieve.py WEIGHTS) on the dev split of the
evaluation questions, and print ranking metrics on dev and the held-out test split,
and the refusal trade-off behind rag/answer.py REFUSE_BELOW.

    python bench/calibrate.py [--questions FILE ...]   (default: eval/questions.jsonl
                                                         and eval/holdout.jsonl)

A logistic regression over (dense, bm25, coverage) of every candidate entry, with
"entry is gold for this question" as the label. Unanswerable questions contribute
negatives only, which is what makes the score usable for declining.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from rag import retrieve
from rag.config import Settings
from rag.evaluate import load_questions
from rag.index import Index
from rag.text import focus

FEATURES = ("dense", "bm25", "coverage")


def collect(index: Index, questions):
    lexical = index.lexical()
    by_id = {e.id: e for e in index.store.entries()}
    rows = []
    for q in questions:
        # The vector and the lexical query Index.search would use.
        cands = retrieve.candidates(index.store, lexical, index.query_vector(q.question), focus(q.question))
        rows.append((q, [(c, (by_id[c.entry_id].source.path, by_id[c.entry_id].source.ordinal) in q.gold)
                         for c in cands]))
    return rows


def ranking(rows, w, split):
    """(single-entry recall@1, multi recall@5, multi recall@10) under weights w."""
    s1 = s5 = s10 = n1 = nm = 0
    for q, cands in rows:
        if not q.gold or (split != "all" and q.split != split):
            continue
        rel = [ok for c, ok in sorted(cands, key=lambda t: -t[0].logit(w))]
        if q.base_kind == "single":
            n1 += 1
            s1 += rel[0] if rel else 0
        else:
            nm += 1
            s5 += sum(rel[:5]) / len(q.gold)
            s10 += sum(rel[:10]) / len(q.gold)
    return round(s1 / n1, 3), round(s5 / nm, 3), round(s10 / nm, 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=Path, nargs="+",
                    default=[Path("eval/questions.jsonl"), Path("eval/holdout.jsonl")])
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="rag-cal-"))
    index = Index(Settings(data_dir=data_dir))
    index.ensure_ingested()
    questions = [q for f in args.questions for q in load_questions(f)]
    dev = collect(index, [q for q in questions if q.split == "dev"])
    test = collect(index, [q for q in questions if q.split == "test"])

    # 1. Ranking weights: grid search on dev for the best sum of the three recalls
    #    (dense fixed at 12 as the scale).
    grid = [{"bias": 0.0, "dense": 12.0, "bm25": b, "coverage": c}
            for b, c in itertools.product([0, 0.5, 1, 1.5, 2, 3, 4, 6], [0, 1, 2, 3, 4, 6, 8, 10])]
    best = max(grid, key=lambda w: sum(ranking(dev, w, "dev")))
    # 2. Platt scaling: a 1-D logistic regression of "is gold" on the ranking logit,
    #    unanswerable questions included, gives the bias and the overall scale.
    X = np.array([[c.logit(best)] for _, cs in dev for c, _ in cs])
    y = np.array([ok for _, cs in dev for _, ok in cs])
    platt = LogisticRegression(C=100.0).fit(X, y)
    a, b0 = float(platt.coef_[0][0]), float(platt.intercept_[0])
    fitted = {"bias": round(b0, 3)} | {f: round(a * best[f], 3) for f in FEATURES}
    print("current WEIGHTS:", retrieve.WEIGHTS)
    print("fitted  WEIGHTS:", json.dumps(fitted))
    print("\n(single recall@1, multi recall@5, multi recall@10)")
    for name, w in (("current", retrieve.WEIGHTS), ("fitted", fitted),
                    ("dense only", {"bias": 0, "dense": 1, "bm25": 0, "coverage": 0})):
        print(f"{name:10}", {split: ranking(rows, w, split)
                             for split, rows in (("dev", dev), ("test", test), ("all", dev + test))})
    print("\nrefusal threshold on the top score (current weights): share declined")
    print(f"  {'below':>6} {'unanswerable dev':>17} {'answerable dev':>15} {'unanswerable test':>18} {'answerable test':>16}")
    for t in (0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3):
        shares = []
        for rows in (dev, test):
            tops = [(q.base_kind, max((retrieve.score(c) for c, _ in cs), default=0.0)) for q, cs in rows
                    if q.kind != "unanswerable-nearmiss"]  # near misses are declined later, by content
            for want in (True, False):
                sel = [top for kind, top in tops if (kind == "unanswerable") == want]
                shares.append(sum(top < t for top in sel) / max(len(sel), 1))
        print(f"  {t:>6} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(shares, (17, 15, 18, 16))))
    print("\nmedian top score per kind (current weights):")
    for split, rows in (("dev", dev), ("test", test)):
        for kind in sorted({q.kind for q, _ in rows}):
            tops = [max((retrieve.score(c) for c, _ in cs), default=0.0) for q, cs in rows if q.kind == kind]
            print(f"  {split:4} {kind:24} {np.median(tops):.3f}")


if __name__ == "__main__":
    main()
