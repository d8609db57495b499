"""What single-paper answers are made of: key facts, and how many quotes are
background or links that the question did not ask for.

    python bench/composition.py [FILE ...]        # default: every eval/*.jsonl question set
    python bench/composition.py --quotes-only    # no chat model: what is quoted (~3 min)
    cd eval/corpus13 && python ../../bench/composition.py --quotes-only --data-dir D holdout13.jsonl

Runs every single-paper question (direct and paraphrased) of the given question
sets through ``Answerer.ask`` on the seeds with the default model, then:

- facts: share of each question's ``answer_facts`` found in the answer (the
  measure of ``rag eval``), per kind;
- aside quotes: of the source sentences quoted, the share that a separate reader
  labelled background or other (code links, organisation) in ``eval/roles.jsonl``,
  counted only for questions that do not ask for either (``Query.wants``). The
  roles come from that hand-labelled file, not from the tagger the pipeline uses,
  so this measures the pipeline rather than agreeing with itself. Target: <= 10%;
- the tagger's own accuracy on ``eval/roles.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

import _util
from rag.answer import Answerer
from rag.config import Settings
from rag.evaluate import fact_share
from rag.index import Index
from rag.llm import load_model
from rag.prompts import load
from rag.query import Query
from rag.roles import tagger

ROLES = _util.ROLES
ASIDE = {"background", "other"}


def role_of(quote: str, roles: dict[str, str]) -> str | None:
    """The role of the sentence a quote was cut from (quotes may drop an opener
    like "In this work," and end in "…")."""
    core = quote.strip(" …")
    core = core[:1].lower() + core[1:]
    found = [r for s, r in roles.items() if core.lower() in s.lower()]
    return found[0] if found else None


def tagger_accuracy() -> float:
    t, right, n = tagger(), 0, 0
    for line in ROLES.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        right += sum(a == b for a, b in zip(t.tag(r["sentences"]), r["roles"]))
        n += len(r["roles"])
    return right / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--quotes-only", action="store_true",
                    help="a model that writes nothing: what the pipeline quotes, in a few minutes")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="an index already built (a corpus of eval/corpusN), instead of the seeds")
    args = ap.parse_args()
    files = args.files or sorted(p for p in (_util.ROOT / "eval").glob("*.jsonl")
                                 if p.name.startswith(("questions", "holdout")))
    index = Index(Settings(data_dir=args.data_dir or Path(tempfile.mkdtemp(prefix="rag-bench-"))))
    index.ensure_ingested()
    answerer = Answerer(index, _util.Silent() if args.quotes_only else load_model(), load())
    roles = _util.gold_roles()
    facts: dict[str, list[float]] = defaultdict(list)
    quotes: dict[str, int] = defaultdict(int)
    examples: list[str] = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            if not q["kind"].startswith("single"):
                continue
            ans = answerer.ask(q["question"])
            if q.get("answer_facts"):
                share = fact_share(tuple(q["answer_facts"]), ans.text)
                facts[q["kind"]].append(share)
                facts[f"{path.stem} {q['kind']}"].append(share)
            if Query.analyse(q["question"]).wants:
                continue
            for s in ans.sentences:
                if s.status != "quoted":
                    continue
                role = role_of(s.text, roles)
                quotes["all"] += 1
                quotes[role or "unmatched"] += 1
                if role in ASIDE and len(examples) < 12:
                    examples.append(f"  [{role}] {q['question']!r} -> {s.text[:110]!r}")
    rows = [[kind, len(v), sum(v) / len(v)] for kind, v in sorted(facts.items())]
    _util.table("key facts in single-paper answers", ["kind", "n", "facts"], rows)
    aside = sum(quotes[r] for r in ASIDE)
    matched = quotes["all"] - quotes["unmatched"]
    share = aside / matched if matched else 0.0
    _util.table("quotes in single-paper answers (roles from eval/roles.jsonl)", ["role", "quotes"],
                [[r, quotes[r]] for r in ("contribution", "method", "result", "background", "other", "unmatched")])
    print(f"\nbackground or links quoted unasked: {aside} of {matched} = {share:.1%} (target <= 10%)")
    print("\n".join(examples))
    acc = tagger_accuracy()
    print(f"role tagger accuracy on eval/roles.jsonl: {acc:.1%}")
    _util.summary("composition", {"facts": {k: round(sum(v) / len(v), 4) for k, v in facts.items()},
                                  "aside_share": round(share, 4), "quotes": matched,
                                  "tagger_accuracy": round(acc, 4)})


if __name__ == "__main__":
    main()
