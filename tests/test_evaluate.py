"""The evaluation metrics on tiny hand-checked cases."""

from __future__ import annotations

import json

import pytest

from rag.answer import Answer, Sentence
from rag.errors import InputError
from rag.evaluate import Question, Scores, answer_metrics, fact_share, load_questions, retrieval_metrics
from rag.records import Entry, Hit, Source


def entry(path: str, ordinal: int, text: str = "BiLLM reaches 8.41 perplexity with 1.08-bit weights.") -> Entry:
    return Entry(id=f"{path}:{ordinal}", label=f"E{ordinal}", text=text, source=Source(path, ordinal))


def hits(*entries: Entry) -> list[Hit]:
    return [Hit(e, 0.9, 0.5, 0.5, "", rank=i) for i, e in enumerate(entries, 1)]


A, B, C = entry("f.txt", 1), entry("f.txt", 2), entry("f.txt", 3)
SINGLE = Question("q1", "single", "How?", frozenset({("f.txt", 1)}), ("8.41 perplexity", "1.08-bit"))
UNANSWERABLE = Question("q2", "unanswerable-nearmiss", "Which GPU?", frozenset())


def answer(cited: dict[int, Entry], retrieved: list[Hit], refused=False, text="") -> Answer:
    sents = [Sentence(text or "x", sorted(cited), "verified")] if cited or text else []
    return Answer("q", refused, sents, cited, retrieved, {"first_token_s": 0.5, "total_s": 1.0})


def test_a_perfect_run_scores_one():
    retrieved = hits(A, B, C)
    m = retrieval_metrics(SINGLE, retrieved)
    assert m == {"recall@1": 1.0, "recall@5": 1.0, "recall@10": 1.0, "mrr": 1.0}
    a = answer({1: A}, retrieved, text="BiLLM reaches 8.41 perplexity with 1.08-bit weights.")
    m = answer_metrics(SINGLE, a)
    assert (m["citation_validity"], m["citation_precision"], m["citation_recall"], m["facts"]) == (1, 1, 1, 1)
    assert m["declined"] == 0.0


def test_citing_an_entry_that_was_not_retrieved_loses_validity():
    a = answer({1: A, 2: C}, hits(A, B))
    m = answer_metrics(SINGLE, a)
    assert m["citation_validity"] == 0.5
    assert m["citation_precision"] == 0.5 and m["citation_recall"] == 1.0


def test_an_empty_answer_counts_as_declined_only_when_flagged():
    assert answer_metrics(UNANSWERABLE, answer({}, hits(A), refused=False))["declined"] == 0.0
    assert answer_metrics(UNANSWERABLE, answer({}, hits(A), refused=True))["declined"] == 1.0


def test_rank_and_recall_of_a_later_hit():
    m = retrieval_metrics(SINGLE, hits(B, C, A))
    assert m["recall@1"] == 0.0 and m["recall@5"] == 1.0 and m["mrr"] == pytest.approx(1 / 3)


def test_fact_match_is_normalised_token_containment():
    assert fact_share(("Binary residual approximation", "8.41"), "uses binary residual-approximations; 8.41") == 1.0
    assert fact_share(("salient weights",), "weights only") == 0.0


def test_scores_average_per_kind_and_base_kind():
    t = Scores()
    t.add(SINGLE, {"recall@1": 1.0, "total_s": 1.0})
    t.add(Question("q3", "single-paraphrase", "?", frozenset({("f", 1)})), {"recall@1": 0.0, "total_s": 3.0})
    s = t.summary()
    assert s["single"]["recall@1"] == 0.5 and s["single-paraphrase"]["recall@1"] == 0.0
    assert s["all"]["n"] == 2 and s["all"]["total_p50_s"] == 2.0


def test_question_file_errors_name_the_line(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"id": "a", "kind": "single", "question": "?", "gold": []}) + "\n{bad\n")
    with pytest.raises(InputError, match=r"q.jsonl:2: not a question record"):
        load_questions(p)


def test_the_repository_question_set_is_well_formed():
    from rag.config import PROJECT_ROOT

    qs = load_questions(PROJECT_ROOT / "eval" / "questions.jsonl", "all")
    assert len(qs) >= 100
    assert {q.base_kind for q in qs} == {"single", "multi", "unanswerable"}
    assert {q.split for q in qs} == {"dev", "test"}
    assert all(q.gold for q in qs if q.base_kind != "unanswerable")


def test_the_chat_set_loads_as_conversations_with_follow_up_kinds():
    from rag.config import PROJECT_ROOT
    from rag.evaluate import is_dialogues, load_dialogues

    path = PROJECT_ROOT / "eval" / "chat.jsonl"
    assert is_dialogues(path) and not is_dialogues(PROJECT_ROOT / "eval" / "questions.jsonl")
    ds = load_dialogues(path)
    assert len(ds) >= 20 and all(len(d.turns) >= 2 for d in ds)
    assert {t.kind for d in ds for t in d.turns[1:]} <= {"single-followup", "multi-followup",
                                                          "unanswerable-followup"}
    assert all(t.gold for d in ds for t in d.turns if t.base_kind != "unanswerable")


def test_conversation_file_errors_name_the_line(tmp_path):
    from rag.evaluate import load_dialogues

    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"id": "c", "turns": [{"question": "?", "kind": "single", "gold": []}]})
                 + "\n" + json.dumps({"id": "d", "turns": [{"kind": "single"}]}) + "\n")
    with pytest.raises(InputError, match=r"c.jsonl:2: not a conversation record"):
        load_dialogues(p)
