"""The shipped judges, loaded for real from their ONNX files, on real seed abstracts:
a supported claim against its minimally edited twin, a question the abstract answers
against its near-topic and near-miss twins. And a few-step run of the training
script, so that it keeps working."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag.judge import CLAIM, QUESTION, QUESTIONS_MODEL_FILE, MODEL_FILE, Judge, windows
from rag.text import sentences

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def judge():
    return Judge()


@pytest.fixture(scope="module", params=[MODEL_FILE, QUESTIONS_MODEL_FILE], ids=["judge", "questions"])
def question_reader(request):
    return Judge(request.param)


@pytest.fixture(scope="module")
def abstract(seeded_index):
    """The seed abstract whose label is ``name``, as (name, sentences)."""
    entries = {e.label: e for e in seeded_index.store.entries()}

    def get(name: str):
        return name, sentences(entries[name].text)
    return get


def test_shipped_models_are_small_int8_onnx():
    for model in (MODEL_FILE, QUESTIONS_MODEL_FILE):
        assert model.is_file() and model.stat().st_size < 30 * 2**20
    card = (MODEL_FILE.parent / "MODEL_CARD.md").read_text()
    assert "Limits" in card and "Training data" in card


def test_windows_cover_every_sentence_with_overlap():
    assert windows(2) == [(0, 2)]
    assert windows(7) == [(0, 3), (2, 5), (4, 7)]
    assert windows(8) == [(0, 3), (2, 5), (4, 7), (5, 8)]


YES = 0.5  # the judge's own decision point (the pipeline fuses it with retrieval)


@pytest.mark.parametrize("claim, twin", [
    ("BiLLM outperforms state-of-the-art quantization methods of LLMs by significant margins.",
     "BiLLM is outperformed by state-of-the-art quantization methods of LLMs by significant margins."),
    ("BiLLM outperforms state-of-the-art quantization methods of LLMs by significant margins.",
     "BiLLM does not outperform state-of-the-art quantization methods of LLMs."),
    ("BiLLM binarizes a 7-billion LLM within 0.5 hours on a single GPU.",
     "BiLLM binarizes a 7-billion LLM within 0.5 hours on eight GPUs."),
    ("BiLLM binarizes a 7-billion LLM within 0.5 hours on a single GPU.",
     "BiLLM was evaluated on image classification with ResNet-50."),
])
def test_supported_claim_passes_and_its_minimal_edit_fails(judge, abstract, claim, twin):
    good, bad = judge.read(CLAIM, claim, [abstract("BiLLM")])[0], judge.read(CLAIM, twin, [abstract("BiLLM")])[0]
    assert good.answers >= YES > bad.answers, (good, bad)


@pytest.mark.xfail(strict=True, reason="known limitation (model card): swapped entities and reversed "
                   "verbs inside a copied phrase mostly pass the judge; the copy check catches them")
@pytest.mark.parametrize("twin", ["BiLLM binarizes the weights of LLMs during pretraining.",
                                  "BiLLM identifies salient weights and maximizes the compression loss "
                                  "through binary residual approximation."])
def test_entity_swaps_are_beyond_the_judge(judge, abstract, twin):
    assert judge.read(CLAIM, twin, [abstract("BiLLM")])[0].answers < YES


def test_answerable_question_passes_and_its_near_topic_twin_fails(question_reader, abstract):
    judge, billm = question_reader, [abstract("BiLLM")]
    answered = judge.read(QUESTION, "How does BiLLM handle salient weights?", billm)[0]
    near_topic = judge.read(QUESTION, "How can vision transformers be binarized to one bit per weight?", billm)[0]
    near_miss = judge.read(QUESTION, "How much GPU memory does BiLLM need to binarize LLaMA2-70B?", billm)[0]
    assert answered.answers >= YES > near_topic.answers, (answered, near_topic)
    assert near_miss.answers < YES <= near_miss.about and near_topic.about < YES, (near_miss, near_topic)


def test_training_script_runs_a_few_steps(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "training/judge/train.py"), "--tiny",
                          "--work", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    metrics = json.loads((tmp_path / "tiny-onnx" / "metrics.json").read_text())
    assert metrics["training"]["steps"] >= 3
    assert (tmp_path / "tiny-onnx" / "judge.int8.onnx").is_file()


def test_single_paper_questions_are_read_by_the_questions_judge(seeded_index):
    from rag.answer import Answerer

    answerer = Answerer(seeded_index, None, None)
    assert answerer.questions_judge.model_file == QUESTIONS_MODEL_FILE
    assert answerer.reader(QUESTION, "How does BiLLM handle salient weights?") is answerer.questions_judge
    for kind, text in ((QUESTION, "Which papers study multi-armed bandits?"),
                       (CLAIM, "BiLLM binarizes LLM weights.")):
        assert answerer.reader(kind, text) is answerer.judge


def test_search_questions_pair_with_their_evidence_and_siblings_with_nothing():
    sys.path.insert(0, str(ROOT / "training" / "judge"))
    import random

    from check_data import check_queries
    from pairs import query_pairs

    sents = [f"Sentence {i} of an invented abstract." for i in range(7)]
    searches = [{"q": f"Is there work on problem {i}?", "style": style, "evidence": [1]}
                for i, style in enumerate(("is_there", "how_can", "keywords", "problem"))]
    siblings = [{"q": f"Is there work on problem {i} for audio?", "from": i, "swap": "text -> audio"}
                for i in range(4)]
    rec = {"id": "t-001", "sentences": sents, "searches": searches, "siblings": siblings}
    out = query_pairs(rec, random.Random(0))
    found = [p for p in out if p.task.startswith("q-search-") and p.task != "q-search-any"]
    assert found and all(p.answers == 1 == p.about and "Sentence 1 " in p.second for p in found)
    assert all(p.answers == -1 and p.about == 1 and "Sentence 1 " not in p.second
               for p in out if p.task == "q-search-any")
    sibs = [p for p in out if p.task == "q-sibling"]
    assert len(sibs) == 8 and all(p.answers == 0 == p.about for p in sibs)
    # Each sibling meets the window its search is answered by: the contrast it is for.
    assert all(any(s["q"] in p.first and "Sentence 1 " in p.second for p in sibs) for s in siblings)

    assert check_queries({"id": "t-001", "searches": searches, "siblings": siblings}, "x", {"t-001": rec}) == []
    same = [dict(siblings[0], q=searches[0]["q"])] + siblings[1:]
    assert check_queries({"id": "t-001", "searches": searches, "siblings": same}, "x", {"t-001": rec})


def test_topics_pair_with_papers_filed_under_them_and_not_with_unrelated_ones():
    sys.path.insert(0, str(ROOT / "training" / "judge"))
    import random

    from pairs import topic_pairs

    def rec(rid, field, topics, words):
        return {"id": rid, "field": field, "topics": topics, "roles": ["background", "contribution"],
                "sentences": [f"Background on {words}.", f"We propose a method for {words}."]}

    bandits = rec("w3-001", "bandits", ["multi-armed bandits"], "regret of arm pulls")
    records = [bandits,
               rec("w3-002", "bandits", ["offline multi-armed bandits"], "logged arm pulls"),
               rec("w3-003", "multi-agent RL", ["multi-agent reinforcement learning"], "agent diversity"),
               rec("w3-004", "bandits", ["dueling bandits"], "pairwise preferences"),
               rec("w6-001", "astronomy", ["exoplanet detection"], "transit photometry")]
    out = topic_pairs(bandits, records, random.Random(0))
    assert any("logged arm pulls" in p.second and p.answers == 1 == p.about for p in out)
    assert any("agent diversity" in p.second and p.answers == 0 == p.about for p in out)
    assert any("transit photometry" in p.second and p.answers == 0 for p in out)
    # "dueling bandits" shares "bandits" without holding the topic: a reader might file
    # it under multi-armed bandits or not, so it is left out.
    assert not any("pairwise preferences" in p.second for p in out)
