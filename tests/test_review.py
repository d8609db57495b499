"""Reviews: relevant entries grouped by theme, every citation resolves, the .bib has
exactly the cited entries and parses."""

from __future__ import annotations

import json
import re

import bibtexparser
import pytest
from click.testing import CliRunner

from rag.answer import Answerer
from rag.bibtex import citation_keys
from rag.prompts import load
from rag.review import WRITE_TRIES, _named_once, group, proposal, review, themes

from fakes import FakeModel

BANDIT_PAPERS = {("000_e37aa35e238d35ea.txt", 4), ("003_635826d5ffaa2f6c.txt", 5),
                 ("003_635826d5ffaa2f6c.txt", 15), ("004_97b00aa727c9fbe0.txt", 10),
                 ("004_97b00aa727c9fbe0.txt", 12)}


@pytest.fixture
def answerer(seeded_index):
    return Answerer(seeded_index, FakeModel("Nothing to verify here."), load())


def test_review_covers_the_topic_and_cites_every_reference_once(answerer):
    rv = review(answerer, "bandits")
    got = {(e.source.path, e.source.ordinal) for e in rv.cited}
    assert len(got & BANDIT_PAPERS) >= 4  # at least 80% of the relevant entries
    assert len(got - BANDIT_PAPERS) <= len(got) // 10  # at most 1 in 10 irrelevant
    md = rv.markdown()
    used = {int(n) for n in re.findall(r"\[(\d+)\](?!\s+\S+ —)", md.split("## References")[0])}
    listed = {int(n) for n in re.findall(r"^- \[(\d+)\] ", md, re.M)}
    assert used == listed == set(range(1, len(rv.cited) + 1))
    assert sum(len(t.entries) for t in rv.themes) == len(rv.cited)
    assert len(rv.themes) > 1 or rv.themes[0].name == "Bandits"  # one group is the topic


def test_theme_synthesis_relates_its_papers_in_their_own_words(answerer):
    rv = review(answerer, "large language models")  # enough papers for themes
    related = [t for t in rv.themes if t.relations]
    assert related
    md = rv.markdown()
    for t in related:
        members = {e.id for e in t.entries}
        for r in t.relations:
            cited = [e for e, _ in r.papers] + r.others
            assert len(cited) >= 2 and {e.id for e in cited} <= members
            for e, quote in r.papers:  # quotes are the paper's words, cut at "…"
                assert all(p.strip()[1:] in e.text for p in quote.split("…") if p.strip())
            assert r.render(lambda e: f"[{rv.numbers[e.id]}]") in md
    assert all(r.render(lambda e: f"[@{rv.keys()[e.id]}]") in rv.markdown("pandoc")
               for t in related for r in t.relations)


def test_synthesis_names_what_each_paper_proposes_in_a_phrase_not_the_bullets_sentence():
    # The bullets quote the whole sentence; the theme's synthesis sets the papers
    # side by side by the phrase after "we propose", the paper's own words.
    assert proposal("In complement, we propose an online policy MIN-UCB, which outperforms UCB when "
                    "a bound is given.") == ("proposes", "an online policy MIN-UCB")
    # A bare name is told by its apposition.
    assert proposal("We introduce BYOL, a new approach to self-supervised image representation learning.") == \
        ("introduces", "BYOL, a new approach to self-supervised image representation learning")
    # Words leaning on another sentence's referent are left out.
    assert proposal("Then, for the non-salient weights, we propose an optimal splitting search to group "
                    "and binarize them accurately.") == ("proposes", "an optimal splitting search")
    # "a framework that ..." is not cut to "a framework".
    assert proposal("We present a framework that routes queries to small models.") == \
        ("presents", "a framework that routes queries to small models")
    # Neither a study, nor a proposal to do something, nor a qualified claim names a method.
    assert proposal("We study the problem of pure exploration.") is None
    assert proposal("We propose to understand CLIP from the optimal transport perspective.") is None
    assert proposal("If labels are scarce, we propose a new loss.") is None
    # The paper's own name is not said twice ("BYOL [1] introduces “BYOL, a new ...”").
    assert _named_once("BYOL", *proposal("We introduce BYOL, a new approach to self-supervised image "
                                         "representation learning.")) == \
        ("is", "a new approach to self-supervised image representation learning")
    assert _named_once("GiLOT", *proposal("This work proposes GiLOT that leverages Optimal Transport to "
                                          "measure distributional change.")) == \
        ("leverages", "Optimal Transport to measure distributional change")


def test_bibtex_has_exactly_the_cited_entries_and_round_trips(answerer, tmp_path):
    rv = review(answerer, "optimal transport")
    lib = bibtexparser.parse_string(rv.bibtex())
    assert not lib.failed_blocks
    assert {e.key for e in lib.entries} == set(rv.keys().values())
    assert len(lib.entries) == len(rv.cited)
    pandoc = rv.markdown("pandoc")
    assert set(re.findall(r"\[@([^\]]+)\]", pandoc)) == set(rv.keys().values())
    first = lib.entries[0]
    assert first.fields_dict["year"].value == "2024"
    assert first.fields_dict["abstract"].value.startswith(rv.cited[0].text[:40])


def test_citation_keys_are_stable_and_unique(seeded_index):
    entries = seeded_index.store.entries()
    keys = citation_keys(entries)
    assert len(set(keys.values())) == len(entries)
    assert keys == citation_keys(list(reversed(entries)))
    assert keys[next(e.id for e in entries if e.label == "BiLLM")] == "billm2024"


def test_a_near_topic_needs_the_topics_rarest_term(answerer, seeded_index):
    # DiCo is a multi-agent RL paper, about as close to "hierarchical reinforcement
    # learning" in meaning as BAIL and the Decision Transformer paper, which say
    # "hierarchical"; it does not.
    rv = review(answerer, "hierarchical reinforcement learning")
    got = {e.label: e for e in rv.cited}
    assert "DiCo" not in got and "BAIL" in got
    assert ("004_97b00aa727c9fbe0.txt", 15) in {(e.source.path, e.source.ordinal) for e in rv.cited}
    lexical = seeded_index.lexical()
    row = lexical.row_of[got["BAIL"].id]
    assert lexical.has_rarest("hierarchical agents", [row]) == [True]
    assert lexical.has_rarest("explaining model predictions", [row]) == [False]


def test_a_statement_never_puts_the_topic_on_a_paper_that_does_not_name_it(seeded_index):
    # The model says the same of every paper; it is true only of those whose
    # abstract says "hierarchical".
    model = FakeModel("This paper proposes a hierarchical reinforcement learning framework "
                      "that combines explanation methods to improve agent performance.")
    rv = review(Answerer(seeded_index, model, load()), "hierarchical reinforcement learning")
    for e in rv.cited:
        for s in rv.statements[e.id]:
            if s.status == "verified":
                assert "hierarchical" in e.text.lower()


def test_uncovered_topic_gives_a_not_covered_report(answerer):
    rv = review(answerer, "sourdough bread baking recipes")
    assert rv.refused and not rv.cited and rv.closest
    assert "does not cover" in rv.markdown()


def test_grouping_splits_unrelated_vectors():
    import numpy as np

    v = np.array([[1, 0], [0.99, 0.14], [0, 1], [0.1, 0.99]], dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    assert sorted(map(sorted, group(list("abcd"), v, 0.5))) == [[0, 1], [2, 3]]


def test_six_papers_or_more_always_form_themes_of_two_or_more():
    import numpy as np

    rng = np.random.default_rng(0)
    centres = np.eye(8)[:2]
    v = np.concatenate([c + 0.3 * rng.standard_normal((4, 8)) for c in centres]).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    for threshold in (-1.0, 0.45, 0.999):  # one group, the natural cut, every paper alone
        clusters = group(list(range(8)), v, threshold)
        assert sorted(map(sorted, clusters)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # Under six papers the threshold decides, and a paper alike no other stays alone.
    assert len(group(list(range(4)), v[[0, 1, 4, 5]], 0.999)) == 4


def test_theme_names_are_noun_phrases():
    from rag.review import _nameable

    assert _nameable(("language", "model")) and _nameable(("molecular", "docking"))
    assert not _nameable(("graph", "neural")) and not _nameable(("generative", "adversarial"))
    assert not _nameable(("state-of-the-art",)) and not _nameable(("outperform",))
    assert not _nameable(("model",))  # a vague word names a theme only inside a phrase


def test_themes_are_named_by_a_phrase_their_papers_share(seeded_index):
    lexical = seeded_index.lexical()
    entries = [h.entry for h in seeded_index.search("machine learning", 20)]
    vectors = seeded_index.store.entry_vectors([e.id for e in entries])
    found = themes(entries, vectors, group(entries, vectors), "machine learning", lexical.idf,
                   seeded_index.embedder.encode)
    # Twenty papers: two themes at least, every paper in one (none left "Other").
    assert sum(len(t.entries) for t in found) == len(entries) and len(found) >= 2
    for t in found:
        assert len(t.entries) >= 2 and t.name != "Other papers"
        assert t.name.lower() not in ("learning", "machine learning")
        # Without a phrase two of them share, a theme is named by its papers' labels.
        if t.name != "Related papers" and not all(e.label.lower() in t.name.lower() for e in t.entries):
            assert sum(t.name.lower() in e.text.lower() for e in t.entries) >= 2
    # Fewer than two groups of two: one group, headed by the topic.
    one = themes(entries[:3], vectors[:3], [[0], [1], [2]], "machine learning", lexical.idf,
                 seeded_index.embedder.encode)
    assert [(t.name, len(t.entries)) for t in one] == [("Machine learning", 3)]


@pytest.mark.model
def test_cli_review_with_real_model_writes_markdown_and_bib(seeded_index, tmp_path):
    from rag.cli import main

    md, bib = tmp_path / "r.md", tmp_path / "r.bib"
    res = CliRunner().invoke(main, ["review", "--json", "--data-dir", str(seeded_index.settings.data_dir),
                                    "bandits", "--out", str(md), "--bib", str(bib)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert not data["refused"] and data["themes"]
    assert data["markdown"] == md.read_text()
    ids = {c["id"] for c in data["citations"]}
    assert ids == {i for t in data["themes"] for i in t["entries"]}
    assert len(bibtexparser.parse_string(bib.read_text()).entries) == len(ids)


def test_cli_review_refuses_an_unwritable_output_before_it_starts(tmp_path):
    from rag.cli import main

    res = CliRunner().invoke(main, ["review", "--data-dir", str(tmp_path / "never-made"), "bandits",
                                    "--bib", str(tmp_path / "missing" / "r.bib")])
    assert res.exit_code == 2 and "no such writable folder" in res.output
    assert not (tmp_path / "never-made").exists()  # nothing was indexed or generated


def _table_row(label: str, sents: list[str]):
    """The research-table row of an abstract of ``sents``, read by roles and words alone."""
    from rag import compare
    from rag.records import Entry, Source

    e = Entry(id=label.lower(), label=label, text=" ".join(sents), source=Source("t.jsonl", 1))
    return compare.row(e, sents, lambda q, entry: [0.0] * len(sents))


def test_research_table_quotes_one_sentence_per_column_and_says_what_is_missing():
    from rag import compare

    sents = ["While recent work has seen a surge of interest in widgets, little is known.",
             "We study the problem of widget alignment under noise.",
             "We propose WidgetNet, a method based on contrastive pairs.",
             "WidgetNet improves accuracy by 12% over the best baseline."]
    row = _table_row("WidgetNet", sents)
    assert row.cells == {"problem": sents[1], "approach": sents[2], "result": sents[3],
                         "setting": compare.NO_DATA}
    table = compare.markdown([row], lambda entry: "[1]")
    assert table[0].startswith("| Paper | Problem | Approach | Main result | Data / setting |")
    assert table[2].startswith("| WidgetNet [1] | We study the problem")
    assert compare.cut("In this paper, we " + "do many things, " * 20 + "end.").startswith("We do many")
    assert compare.cut("word " * 40).endswith(" …")
    # An answer's long quote keeps the clauses the question asks about, in order.
    long = ("We show that CFG (1) improves the performance of Pythia, GPT-2 and LLaMA-family models across: "
            "Q&A, reasoning, code generation, and machine translation, achieving SOTA on LAMBADA with "
            "LLaMA-7B over PaLM-540B; (2) brings improvements equivalent to a model with twice the "
            "parameter-count; (3) can stack alongside other inference-time methods like Chain-of-Thought "
            "and Self-Consistency, yielding further improvements in difficult tasks; (4) can be used to "
            "increase the faithfulness and coherence of assistants in challenging form-driven and "
            "content-driven prompts: in a human evaluation we show a 75% preference for GPT4All using CFG "
            "over baseline.")
    got = compare.excerpt(long, "On which benchmark did LLaMA-7B reach SOTA, and what human preference "
                                "rate did CFG get?", 60)
    assert got.startswith("We show that CFG") and "LAMBADA" in got and "75% preference" in got
    assert len(got.split()) <= 62 and all(p.strip() in long for p in got.split("…"))
    assert compare.excerpt(long, "What is the weather?", 60) == compare.cut(long, 60)
    # A question after a figure keeps the clause with the figures (corpus12: "How much
    # does that help?" had lost "from 17.7% to 78.7%").
    cot = ("Experimental results demonstrate that our Zero-shot-CoT, using the same single prompt template, "
           "significantly outperforms zero-shot LLM performances on diverse benchmark reasoning tasks including "
           "arithmetics (MultiArith, GSM8K, AQUA-RAT, SVAMP), symbolic reasoning (Last Letter, Coin Flip), and "
           "other logical reasoning tasks (Date Understanding, Tracking Shuffled Objects), without any "
           "hand-crafted few-shot examples, e.g. increasing the accuracy on MultiArith from 17.7% to 78.7% and "
           "GSM8K from 10.4% to 40.7% with large InstructGPT model (text-davinci-002), as well as similar "
           "magnitudes of improvements with another off-the-shelf large model, 540B parameter PaLM.")
    asked = ("Can big language models solve multi-step arithmetic without any worked examples, just by adding "
             "one generic sentence to the prompt? How much does that help?")
    assert "78.7%" not in compare.excerpt(cot, asked, 60)
    assert "from 17.7% to 78.7%" in compare.excerpt(cot, asked, 60, figures=True)
    assert compare.excerpt("A short sentence.", "anything", 60) == "A short sentence."
    # A cell is read alone: no opener that leans on the sentence before it.
    assert compare.cut("To address above two challenges, this work proposes X.") == "This work proposes X."
    assert compare.cut("To address the issue of cost, we do Y.") == "To address the issue of cost, we do Y."
    assert "WidgetNet" in compare.to_csv([row], {"widgetnet": "widgetnet2024"}).splitlines()[1]


def test_a_cell_that_leans_on_the_sentence_before_it_brings_that_sentence():
    sents = ["Learning with expert advice and multi-armed bandit are two classic online decision problems.",
             "We study a family of problems interpolating the two.",
             "We propose GroupBandit, an algorithm that pulls one arm per group.",
             "GroupBandit attains regret 12% below the best baseline on synthetic instances."]
    row = _table_row("GroupBandit", sents)
    assert row.sources["problem"] == 1
    assert row.cells["problem"] == f"{sents[0]} {sents[1]}"
    assert row.cells["approach"] == sents[2]  # stands alone: nothing added
    # Leaning words in an opener that cut() drops do not bring the sentence before.
    sents = ["Bandit methods with grouped arms are widely used in online advertising and recommendation.",
             "Existing algorithms ignore the group structure, so their regret grows with the number of arms.",
             "As a consequence, they are slow in practice.",
             "To bridge this gap, we propose GroupBandit, an algorithm that pulls one arm per group.",
             "GroupBandit attains regret 12% below the best baseline on synthetic instances."]
    row = _table_row("GroupBandit", sents)
    assert row.sources["approach"] == 3 and 2 not in row.sources.values()
    assert row.cells["approach"] == "We propose GroupBandit, an algorithm that pulls one arm per group."


def test_an_abstract_that_opens_with_its_method_states_its_problem_there():
    sents = ["We propose FedWidget, a federated method that improves the calibration of client models.",
             "Unlike temperature scaling, FedWidget fits one small network per client on its label histogram.",
             "On three benchmarks FedWidget lowers the expected calibration error by 31%."]
    row = _table_row("FedWidget", sents)
    assert row.sources["problem"] == row.sources["approach"] == 0 and row.sources["result"] == 2
    # A question the paper sets itself is its problem; its method comes later.
    sents = ["In this paper, we question if self-supervised learning gives vision transformers new properties.",
             "We implement our findings into a simple method, called WidgetSSL, a form of self-distillation.",
             "WidgetSSL reaches 80.1% top-1 on ImageNet in linear evaluation."]
    row = _table_row("WidgetSSL", sents)
    assert row.sources["problem"] == 0 and row.sources["approach"] == 1


def test_research_table_cells_play_their_part_in_a_real_abstract(answerer, seeded_index):
    """BiLLM's row, with the real judge and tagger: the problem is the gap it takes
    on, not the sentence that answers it; the result carries its figure; the data,
    named in the result's sentence, is shown as the words around it."""
    from rag import compare

    e = next(e for e in seeded_index.store.entries() if "BiLLM" in e.text and "1.08-bit" in e.text)
    r = compare.row(e, answerer.sentences(e), answerer.fit)
    assert "we present billm" not in r.cells["problem"].lower()
    assert "8.41" in r.cells["result"]
    assert r.cells["setting"].startswith("… ") and "LLaMA2-70B" in r.cells["setting"]
    assert r.cells["setting"].strip(" …") in e.text


def test_a_review_gives_each_paper_its_contribution_then_its_main_result(answerer):
    """With no statement of the model's passing, each bullet quotes the sentences of
    the paper's approach and result cells, whole: BiLLM's bullet carries its figure."""
    from rag import compare
    from rag.answer import QUOTE_WORDS

    rv = review(answerer, "post-training quantization of LLMs")
    billm = next(e for e in rv.cited if "1.08-bit" in e.text)
    said = rv.statements[billm.id]
    row = next(r for r in rv.table if r.entry.id == billm.id)
    sents = answerer.sentences(billm)
    assert [s.text for s in said] == [compare.cut(sents[row.sources[c]], QUOTE_WORDS) for c in ("approach", "result")]
    assert all(s.status == "quoted" for s in said) and "8.41" in said[1].text


def test_a_paper_proves_or_measures_by_its_whole_abstract_not_its_digits():
    from rag.compare import MEASURED as _MEASURED
    from rag.review import _THEORY

    theory = "We prove tight minimax regret bounds for any $\\varepsilon>0$ and $K = 2$ groups."
    empirical = "On a testbed of 369 models, our relaxations raise the lower bound from 0.4598 to 0.9452."
    assert _THEORY.search(theory) and not _MEASURED.search(theory)
    assert _MEASURED.search(empirical) and not _THEORY.search(empirical)


def test_a_shared_setting_sentence_is_shown_around_its_data():
    from rag import compare

    s = "Experiments on the ImageNet and COCO benchmarks show that WidgetNet improves accuracy by 12% over every baseline we tried."
    assert compare.around(s, compare.DATA, 6) == "Experiments on the ImageNet and COCO …"
    assert compare.around("We report " + "many " * 5 + "results on ImageNet.", compare.DATA, 6) == \
        "… many many many results on ImageNet."
    # A result cell quotes what a paper found, not the lead-in.
    assert compare.gist("The results show that X beats Y on Z.", compare.FINDS, 3) == "… X beats Y …"
    # A condition before "we show that" stays with the claim it qualifies.
    qualified = "Without a bound on their gap, we show that no policy can beat UCB."
    assert compare.gist(qualified, compare.FINDS, 8) == qualified


class CopyingModel(FakeModel):
    """Answers with the first sentence of the abstract it is given: a statement
    that passes the check."""

    def stream(self, system: str, user: str, max_tokens: int):
        self.prompts.append(user)
        text = user.split("<abstract>", 1)[1].split("</abstract>", 1)[0]
        first = re.split(r"(?<=\.)\s", text.strip(), maxsplit=1)[0]
        yield from first.split(" ")[:1]
        for w in first.split(" ")[1:]:
            yield " " + w


def test_a_model_whose_statements_never_pass_is_asked_for_the_first_few_papers_only(seeded_index):
    failing = FakeModel("Nothing to verify here.")
    rv = review(Answerer(seeded_index, failing, load()), "large language models")
    assert len(rv.cited) > WRITE_TRIES and len(failing.prompts) == WRITE_TRIES
    assert all(rv.statements[e.id] and all(s.status == "quoted" for s in rv.statements[e.id]) for e in rv.cited)


def test_a_model_whose_statements_pass_writes_every_papers(seeded_index):
    copying = CopyingModel()
    rv = review(Answerer(seeded_index, copying, load()), "large language models")
    assert len(rv.cited) > WRITE_TRIES and len(copying.prompts) == len(rv.cited)
    assert any(s.status == "verified" for e in rv.cited for s in rv.statements[e.id])
