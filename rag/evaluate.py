"""`rag eval`: run a question set through the pipeline and measure it.

Question file: one JSON object per line,
``{"id", "kind", "question", "gold": [{"path", "ordinal"}], "answer_facts": [str]}``
(optional ``"split"``: "dev" for tuning, "test" held out). ``kind`` is "single",
"multi" or "unanswerable", possibly with a suffix ("single-paraphrase"); metrics are
reported per kind and per base kind.

Retrieval metrics: recall@1/5/10 (share of gold entries in the top n, averaged over
questions with gold) and MRR (reciprocal rank of the first gold entry).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError
from .records import Hit


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    gold: frozenset[tuple[str, int]]
    answer_facts: tuple[str, ...] = ()
    split: str = "dev"

    @property
    def base_kind(self) -> str:
        return self.kind.split("-")[0]


def load_questions(path: Path, split: str | None = None) -> list[Question]:
    qs = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read ({e}); give a UTF-8 JSON Lines file") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            q = Question(str(d["id"]), str(d["kind"]), str(d["question"]),
                         frozenset((g["path"], int(g["ordinal"])) for g in d.get("gold", [])),
                         tuple(d.get("answer_facts", [])), str(d.get("split", "dev")))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}:{n}: not a question record ({e}); "
                             "expected id, kind, question, gold") from None
        if split in (None, "all") or q.split == split:
            qs.append(q)
    if not qs:
        raise InputError(f"{path}: no questions{f' in split {split}' if split else ''}")
    return qs


def retrieval_metrics(q: Question, hits: list[Hit]) -> dict[str, float]:
    """Recall@1/5/10 and reciprocal rank of one question (gold non-empty)."""
    got = [(h.entry.source.path, h.entry.source.ordinal) for h in hits]
    out = {f"recall@{n}": len(q.gold & set(got[:n])) / len(q.gold) for n in (1, 5, 10)}
    first = next((i for i, g in enumerate(got, 1) if g in q.gold), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


@dataclass
class Table:
    """Per-kind averages of per-question metric dicts."""

    rows: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))

    def add(self, q: Question, metrics: dict[str, float]) -> None:
        for group in {q.kind, q.base_kind, "all"}:
            for k, v in metrics.items():
                self.rows[group][k].append(v)

    def summary(self) -> dict[str, dict[str, float]]:
        return {g: {k: round(statistics.fmean(v), 4) for k, v in m.items()} | {"n": max(len(v) for v in m.values())}
                for g, m in sorted(self.rows.items())}
