"""The judge against the checks it replaces, on the held-out synthetic records.

    python bench/judge_vs_proxies.py

Claims: supported claims against their minimally edited twins, read by (a) the
proxies the pipeline used before the judge (every specific term in the source,
cosine >= 0.62 to the closest source sentence, same polarity as it) and (b) the
judge (with the specific-term check beside it, as rag/answer.py runs it).
Quotes: for every answerable question, is the sentence ranked first an evidence
sentence, when ranked by (a) cosine to the question, as before, or (b) the question
judge; and the share of quoted sentences that are evidence (precision) and of evidence
sentences quoted (recall) when a fixed three are quoted, or the first and those the
judge rates at least rag/answer.py QUOTE_SHARE of it (as rag/answer.py quotes).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training" / "judge"))
from pairs import is_validation, load_records  # noqa: E402
from train import auc  # noqa: E402

from rag import answer as A  # noqa: E402
from rag.embed import Embedder  # noqa: E402
from rag.judge import CLAIM, QUESTIONS_MODEL_FILE, Judge  # noqa: E402
from rag.verify import invented  # noqa: E402

_NEGATION = re.compile(r"\b(not|no|never|cannot|neither|nor|none)\b|n't\b", re.I)


def main() -> None:
    recs = [r for r in load_records() if is_validation(r["id"])]
    emb, judge, asker = Embedder(), Judge(), Judge(QUESTIONS_MODEL_FILE)
    proxy_ok, judge_p, labels, kinds = [], [], [], []
    top_cos, top_judge = [], []
    quoted = {"a fixed three": [], f"share >= {A.QUOTE_SHARE}": []}  # (precision, recall)
    for r in recs:
        sents = r["sentences"]
        svec = emb.encode(sents)
        text = " ".join(sents)
        for c in r["claims"]:
            v = emb.encode([c["claim"]])[0]
            sims = svec @ v
            best = sents[int(np.argmax(sims))]
            proxy_ok.append(not invented(c["claim"], text) and sims.max() >= 0.62
                            and bool(_NEGATION.search(c["claim"])) == bool(_NEGATION.search(best)))
            p = judge.read(CLAIM, c["claim"], [("", sents)])[0].answers
            judge_p.append(0.0 if invented(c["claim"], text) else p)
            labels.append(c["label"] == "supported")
            kinds.append(c["kind"])
        for q in r["questions"]:
            if q["type"] not in ("direct", "paraphrase"):
                continue
            qv = emb.encode([q["q"]])[0]
            top_cos.append(int(np.argmax(svec @ qv)) in q["evidence"])
            fit = asker.sentences(q["q"], "", sents)
            order = list(np.argsort(-fit))
            top_judge.append(order[0] in q["evidence"])
            for rule, picked in zip(quoted, (order[:3], [i for i in order[:3] if fit[i] >= A.QUOTE_SHARE * fit[order[0]]])):
                quoted[rule].append((np.mean([i in q["evidence"] for i in picked]),
                                     np.mean([i in picked for i in q["evidence"]])))
    y, jp, px = np.array(labels), np.array(judge_p), np.array(proxy_ok)
    print(f"{len(recs)} held-out records, {len(y)} claims ({y.sum()} supported)")
    for name, ok in (("proxies", px), (f"judge >= {A.SUPPORTED}", jp >= A.SUPPORTED)):
        acc = (ok == y).mean()
        passed_false = (ok & ~y).sum() / max(ok.sum(), 1)
        print(f"  {name:14}: accuracy {acc:.3f}, supported kept {ok[y].mean():.3f}, "
              f"unsupported kept {ok[~y].mean():.3f}, share of kept claims that are false {passed_false:.3f}")
    print(f"  judge AUC {auc(y.astype(int), jp):.3f}")
    for t in (0.5, 0.7, 0.8, 0.9, 0.95):
        ok = jp >= t
        print(f"    judge >= {t}: supported kept {ok[y].mean():.3f}, unsupported kept {ok[~y].mean():.3f}, "
              f"false share of kept {(ok & ~y).sum() / max(ok.sum(), 1):.3f}")
    for k in sorted(set(kinds) - {"paraphrase", "join"}):
        sel = np.array([x == k for x in kinds])
        print(f"    {k:20} kept by proxies {px[sel].mean():.2f}, by judge {(jp[sel] >= A.SUPPORTED).mean():.2f}")
    print(f"quotes: first-ranked sentence answers the question: cosine {np.mean(top_cos):.3f}, "
          f"judge {np.mean(top_judge):.3f} (n={len(top_cos)})")
    for rule, pr in quoted.items():
        p, r = np.mean(pr, axis=0)
        print(f"  quoting {rule:14}: precision {p:.3f}, recall {r:.3f}")


if __name__ == "__main__":
    main()
