"""`rag eval`: run a question set through the pipeline and measure it.

Question file: one JSON object per line,
``{"id", "kind", "question", "gold": [{"path", "ordinal"}], "answer_facts": [str]}``
(optional ``"split"``: "dev" for tuning, "test" held out). ``kind`` is "single",
"multi" or "unanswerable", possibly with a suffix ("single-paraphrase"); metrics are
reported per kind and per base kind.

Conversation file (``rag eval eval/chat.jsonl``): one conversation per line,
``{"id", "turns": [{"question", "kind", "gold"}], "split"}``; the turns are asked in
order through one chat conversation, each scored like a question against its own
gold. A follow-up turn's kind gets the suffix "followup" ("single-followup").

Retrieval metrics: recall@1/5/10 (share of gold entries in the top n, averaged over
questions with gold) and MRR (reciprocal rank of the first gold entry).

Answer metrics: citation validity (share of cited entries that were retrieved),
citation precision (share of cited entries that are gold) and recall (share of gold
entries cited), declined (answers flagged ``refused``: wanted on unanswerable kinds,
a false refusal on the others), facts (share of ``answer_facts`` found in the
answer: a fact counts when every one of its normalised tokens occurs among the
answer's; tokens are lower-cased alphanumeric runs, plural "s" folded), and latency
percentiles (first token, total).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError
from .records import Hit
from .text import words


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


@dataclass(frozen=True)
class Dialogue:
    id: str
    turns: tuple[Question, ...]
    split: str = "dev"


def is_dialogues(path: Path) -> bool:
    """Whether a question file holds conversations (records with "turns")."""
    try:
        first = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()), "")
        return "turns" in json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError):
        return False  # load_questions reports what is wrong with it


def load_dialogues(path: Path, split: str | None = None) -> list[Dialogue]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            turns = tuple(
                Question(f"{d['id']}.{i}", t["kind"] + ("-followup" if i > 1 else ""), str(t["question"]),
                         frozenset((g["path"], int(g["ordinal"])) for g in t.get("gold", [])),
                         tuple(t.get("answer_facts", [])), str(d.get("split", "dev")))
                for i, t in enumerate(d["turns"], 1))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}:{n}: not a conversation record ({e}); "
                             "expected id and turns of question, kind, gold") from None
        if turns and (split in (None, "all") or d.get("split", "dev") == split):
            out.append(Dialogue(str(d["id"]), turns, str(d.get("split", "dev"))))
    if not out:
        raise InputError(f"{path}: no conversations{f' in split {split}' if split else ''}")
    return out


def retrieval_metrics(q: Question, hits: list[Hit]) -> dict[str, float]:
    """Recall@1/5/10 and reciprocal rank of one question (gold non-empty)."""
    got = [(h.entry.source.path, h.entry.source.ordinal) for h in hits]
    out = {f"recall@{n}": len(q.gold & set(got[:n])) / len(q.gold) for n in (1, 5, 10)}
    first = next((i for i, g in enumerate(got, 1) if g in q.gold), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


@dataclass
class Scores:
    """Per-kind averages of per-question metric dicts."""

    rows: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))

    def add(self, q: Question, metrics: dict[str, float]) -> None:
        for group in {q.kind, q.base_kind, "all"}:
            for k, v in metrics.items():
                self.rows[group][k].append(v)

    def summary(self) -> dict[str, dict[str, float]]:
        """Mean of every metric per group; latencies as p50 and p90 instead."""
        out = {}
        for g, m in sorted(self.rows.items()):
            row: dict[str, float] = {"n": max(len(v) for v in m.values())}
            for k, v in m.items():
                if k.endswith("_s"):
                    row[f"{k[:-2]}_p50_s"] = round(percentile(v, 50), 3)
                    row[f"{k[:-2]}_p90_s"] = round(percentile(v, 90), 3)
                else:
                    row[k] = round(statistics.fmean(v), 4)
            out[g] = row
        return out


def _tokens(text: str) -> set[str]:
    out = set()
    for w in words(text):
        for t in [w] + w.split("-"):
            out.add(t[:-1] if len(t) > 3 and t.endswith("s") else t)
    return out


def fact_share(facts: tuple[str, ...], answer: str) -> float:
    have = _tokens(answer)
    return sum(_tokens(f) <= have for f in facts) / len(facts)


def answer_metrics(q: Question, ans) -> dict[str, float]:
    """Per-question answer metrics; ``ans`` is an :class:`rag.answer.Answer`."""
    retrieved = {h.entry.id for h in ans.retrieved}
    cited = {(e.source.path, e.source.ordinal): e.id for e in ans.cited.values()}
    out: dict[str, float] = {"declined": float(ans.refused),
                             "first_token_s": ans.timings.get("first_token_s", 0.0),
                             "total_s": ans.timings.get("total_s", 0.0)}
    if cited:
        out["citation_validity"] = sum(i in retrieved for i in cited.values()) / len(cited)
    if q.gold:
        if cited:
            out["citation_precision"] = len(q.gold & set(cited)) / len(cited)
        out["citation_recall"] = len(q.gold & set(cited)) / len(q.gold)
        if q.answer_facts:
            out["facts"] = fact_share(q.answer_facts, ans.text)
    return out


def percentile(values: list[float], p: float) -> float:
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]) if len(values) > 1 else (values[0] if values else 0.0)
