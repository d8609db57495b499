"""How right the research table's cells are (rag/compare.py), against a reader's.

    python bench/table.py [--blind [FILE]] [--show N]

``eval/table.jsonl`` holds, for each of the 57 seed abstracts, the sentences a
careful reader accepts in each column (problem, approach, main result, data /
setting) and none where the abstract does not give it; a second reader's cells for
19 of them agreed on 73 of 76. Each paper's row is built as ``rag review`` and
"compare [1] and [2]" build it (the real judge, the abstracts indexed with the real
embedder), and a cell counts as right when it quotes an accepted sentence, or says
"not stated" where the reader found none.

compare.py's weights were set against the seeds' cells, so those figures are not
blind. ``--blind`` reads ``eval/table-blind.jsonl`` instead: 30 abstracts of many
fields and shapes written for this check, with their cells, indexed on their own
(its misses were read on 2026-12-03, so it is no longer blind);
``--blind eval/table-blind2.jsonl`` reads 30 more, written after that.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

import _util
from rag import compare
from rag.answer import Answerer
from rag.config import Settings
from rag.index import Index
from rag.prompts import load

SEEDS = _util.ROOT / "eval" / "table.jsonl"
BLIND = _util.ROOT / "eval" / "table-blind.jsonl"


def gold(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def index_of(rows: list[dict], blind: bool) -> Index:
    """The seeds, or the blind set's abstracts as a JSONL corpus of their own."""
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="rag-bench-")))
    index = Index(settings)
    if not blind:
        index.ensure_ingested()
        return index
    corpus = settings.data_dir / "table-blind.jsonl"
    corpus.write_text("".join(json.dumps({"title": r.get("title") or "", "abstract": " ".join(r["sentences"])}) + "\n"
                              for r in rows), encoding="utf-8")
    index.ingest([corpus])
    return index


def gold_index(ours: list[str], theirs: list[str]) -> list[int]:
    """For each of our sentences, the reader's sentence it is (or holds most of),
    in case the two splits differ."""
    def overlap(a: str, b: str) -> float:
        wa, wb = set(a.split()), set(b.split())
        return len(wa & wb) / max(len(wa), 1)
    return [max(range(len(theirs)), key=lambda j: overlap(s, theirs[j])) for s in ours]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blind", nargs="?", type=Path, const=BLIND, default=None,
                    help="a blind set (default eval/table-blind.jsonl), not the seeds")
    ap.add_argument("--show", type=int, default=0, help="print this many wrong cells")
    args = ap.parse_args()
    rows = gold(args.blind or SEEDS)
    index = index_of(rows, bool(args.blind))
    answerer = Answerer(index, None, load())
    entries = {" ".join(answerer.sentences(e)): e for e in index.store.entries()}
    right, total, wrong_none, missed_none = Counter(), Counter(), Counter(), Counter()
    shown = 0
    for g in rows:
        text = " ".join(g["sentences"])
        # Cleaning (LaTeX, spaces) may change the text a little: then the closest.
        entry = entries.get(text) or entries[max(entries, key=lambda t: len(set(t.split()) & set(text.split())))]
        ours = answerer.sentences(entry)
        theirs = gold_index(ours, g["sentences"])
        r = compare.row(entry, ours, answerer.fit)
        for col in compare.COLUMNS:
            ok = set(g["cells"][col]["ok"])
            got = theirs[r.sources[col]] if col in r.sources else None
            good = got in ok if got is not None else not ok
            total[col] += 1
            right[col] += good
            wrong_none[col] += got is None and bool(ok)
            missed_none[col] += got is not None and not ok
            if not good and shown < args.show:
                shown += 1
                print(f"- {entry.label} / {col}: got {got} {r.cells[col][:100]!r}; reader: {sorted(ok)}")
    which = str(args.blind or "eval/table.jsonl")
    rows = [[c, total[c], right[c] / total[c], wrong_none[c], missed_none[c]] for c in compare.COLUMNS]
    n, k = sum(total.values()), sum(right.values())
    rows.append(["all", n, k / n, sum(wrong_none.values()), sum(missed_none.values())])
    _util.table(f"research-table cells against {which}",
                ["column", "cells", "right", "false 'not stated'", "filled, reader: none"], rows)
    _util.summary("table", {"set": which, "right": round(k / n, 4), "cells": n,
                            **{c: round(right[c] / total[c], 4) for c in compare.COLUMNS}})


if __name__ == "__main__":
    main()
