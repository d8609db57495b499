"""What `rag ask` decides on every question set, without the chat model.

    python bench/decisions.py                       # every eval/holdout*.jsonl and questions.jsonl
    python bench/decisions.py eval/holdout6.jsonl --questions-judge NEW.onnx

Whether an answer is declined ("not covered", or a "does not report" notice) and
which entries it cites are decided before the chat model writes a word, so the
pipeline runs here with a model that writes nothing: the decisions are the real
ones, without the model's decoding (about 8 minutes for all twelve sets on this
machine). Printed per set and pooled:
unanswerable questions declined, answerable ones declined, and for single- and
multi-paper questions the share of gold entries cited and of cited entries that
are gold. ``--show`` lists the questions each decision got wrong.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

import _util
from rag import answer as A
from rag.answer import Answerer
from rag.config import Settings
from rag.evaluate import load_questions
from rag.index import Index
from rag.prompts import load as load_prompts


def run(answerer: Answerer, path: Path, show: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for q in load_questions(path):
        ans = answerer.ask(q.question)
        cited = {(e.source.path, e.source.ordinal) for e in ans.cited.values()}
        kind = q.base_kind
        out[f"{'unanswerable' if kind == 'unanswerable' else 'answerable'} declined"].append(ans.refused)
        if not ans.refused:
            out[f"{'unanswerable' if kind == 'unanswerable' else 'answerable'} cautioned"].append(
                any(s.text == A.CAUTION for s in ans.sentences))
        wrong = ans.refused != (kind == "unanswerable")
        if q.gold and not ans.refused:
            out[f"{kind} recall"].append(len(q.gold & cited) / len(q.gold))
            if cited:
                out[f"{kind} precision"].append(len(q.gold & cited) / len(cited))
            wrong = wrong or not q.gold & cited
        if show and wrong:
            print(f"  {q.id} [{q.kind}] {q.question}\n      -> {ans.sentences[0].text[:110] if ans.sentences else ''}")
    return out


def line(name: str, m: dict[str, list[float]]) -> str:
    keys = ("unanswerable declined", "answerable declined", "unanswerable cautioned", "answerable cautioned",
            "single recall", "single precision", "multi recall", "multi precision")
    return f"{name:28s} " + "  ".join(
        f"{k} {100 * statistics.fmean(m[k]):5.1f}% (n={len(m[k])})" for k in keys if m.get(k))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path,
                    default=sorted(_util.ROOT.glob("eval/holdout*.jsonl")) + [_util.QUESTIONS])
    _util.judge_options(ap)
    ap.add_argument("--fusion", action="append", default=[], metavar="KIND=B,RETRIEVAL,ANSWERS,ABOUT",
                    help="FUSION coefficients for a retrained judge (KIND single or survey), "
                         "as bench/judge.py --fit prints them")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="another value for a threshold of rag/answer.py (ANSWERS, ON_TOPIC, ABOUT, ...)")
    ap.add_argument("--show", action="store_true", help="list the questions decided wrongly")
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args()
    for spec in args.set:
        name, _, value = spec.partition("=")
        if not isinstance(getattr(A, name, None), float):
            ap.error(f"{name} is not a threshold of rag/answer.py")
        setattr(A, name, float(value))
    for spec in args.fusion:
        _util.use_fusion(spec)
    index = Index(Settings(**({"data_dir": args.data_dir} if args.data_dir else {})))
    index.ensure_ingested()
    answerer = Answerer(index, _util.Silent(), load_prompts(), **_util.judges(args))
    pooled: dict[str, list[float]] = defaultdict(list)
    for path in args.files:
        m = run(answerer, path, args.show)
        print(line(path.stem, m), flush=True)
        for k, v in m.items():
            pooled[k] += v
    print(line("pooled", pooled))


if __name__ == "__main__":
    main()
