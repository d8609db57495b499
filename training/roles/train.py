"""Train the sentence-role tagger (rag/roles.py) on invented abstracts whose sentences
are tagged background / contribution / method / result / other: the synthetic judge
data (training/judge/data/raw, DATA_SPEC.md) and the abstracts written for the
tagger (training/roles/data, README.md there), which vary where each part stands.

    python training/roles/train.py            # seconds; writes rag/roles_model/

Logistic regression (scikit-learn, multinomial, L2) over the features of
``rag.roles.features``; features seen fewer than twice are left out. The validation
split is the judge's (12% of the records by a hash of their id), so the figures are
on abstracts never trained on. Weights are written as JSON, rounded, with the
features whose weights are all near zero left out, so numpy alone runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import classification_report, confusion_matrix

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
sys.path[:0] = [str(ROOT), str(ROOT / "training" / "judge")]
from pairs import is_validation, load_records  # noqa: E402
from rag.roles import MODEL_FILE, ROLES, features  # noqa: E402


def examples(records: list[dict]) -> tuple[list[dict], list[str]]:
    X, y = [], []
    for rec in records:
        n = len(rec["sentences"])
        for i, (s, r) in enumerate(zip(rec["sentences"], rec["roles"])):
            X.append(Counter(features(s, i, n)))
            y.append(r)
    return X, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=MODEL_FILE)
    ap.add_argument("--c", type=float, default=2.0, help="inverse L2 strength")
    args = ap.parse_args()
    records = load_records() + [json.loads(line) for f in sorted(DATA.glob("*.jsonl"))
                                for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    train = [r for r in records if not is_validation(r["id"])]
    val = [r for r in records if is_validation(r["id"])]
    Xtr, ytr = examples(train)
    Xva, yva = examples(val)
    seen = Counter(f for x in Xtr for f in x)
    keep = lambda x: {f: 1.0 for f in x if seen[f] >= 2}  # noqa: E731
    vec = DictVectorizer()
    A = vec.fit_transform([keep(x) for x in Xtr])
    model = LogisticRegression(C=args.c, max_iter=3000)
    model.fit(A, ytr)
    pred = model.predict(vec.transform([keep(x) for x in Xva]))
    print(f"{len(train)} training records ({len(ytr)} sentences), {len(val)} held out ({len(yva)})")
    print(classification_report(yva, pred, digits=3))
    print("confusion (rows true, columns predicted):", list(model.classes_))
    print(confusion_matrix(yva, pred, labels=model.classes_))
    order = [list(model.classes_).index(r) for r in ROLES]
    W = model.coef_.T[:, order]
    names = vec.get_feature_names_out()
    live = np.abs(W).max(axis=1) >= 0.01
    out = {"roles": list(ROLES), "features": [str(f) for f in names[live]],
           "weights": np.round(W[live], 3).tolist(),
           "bias": np.round(model.intercept_[order], 3).tolist(),
           "training": {"records": len(train), "sentences": len(ytr), "C": args.c},
           "validation": {"records": len(val), "sentences": len(yva),
                          "accuracy": round(float(np.mean(pred == np.array(yva))), 4)}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, separators=(",", ":")), encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB, {int(live.sum())} features)")


if __name__ == "__main__":
    main()
