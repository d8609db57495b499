"""Cited answers in which the code, not the model, owns the citations.

1. Retrieve; when the best relevance score is below ``REFUSE_BELOW`` the collection
   does not cover the question: say so, list the closest entries, call no model.
   Below ``WEAK_MATCH`` the answer opens with a caution.
2. Near miss: when the question names specifics (a dataset, a number, a model) that
   none of the kept entries contains, say that the top paper's abstract does not
   report them, citing it, instead of answering around the gap. When the gap is
   only inferred and the question asks something else too, answer, then say so.
3. Evidence: for each kept entry, the model answers from that entry alone (short
   context, one source); the code attributes the statement to the entry.
4. Verification: every generated sentence is checked against its source
   (rag/verify.py); one that fails, only restates the question, uses a word of the
   question that its source never uses (the question's premise put on the paper),
   or brings words of its own that neither uses, is dropped.
   The source sentences closest to the question are quoted after it (three for a
   single-paper question, one when nothing else stands for an entry), so every
   sentence is verified or the paper's own words; citations name retrieved entries.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .index import Index
from .llm import ChatModel
from .prompts import Prompts
from .records import Entry, Hit
from .lexical import terms
from .text import STOPWORDS, URL, content_words, is_survey, sentences, specific_terms, tokens, words
from .verify import NUMBER, Verifier, missing_terms, names

# Calibrated on the dev questions (bench/calibrate.py prints the trade-off): the
# point where at most ~5% of answerable questions are declined.
REFUSE_BELOW = 0.08
# Below this the answer opens with a caution: most unanswerable questions that pass
# REFUSE_BELOW score under it (10 of 14 on the dev questions), few answerable ones do.
WEAK_MATCH = 0.3
CONTEXT_TOKENS = 200  # of abstract text per evidence call: prefill is the latency
ANSWER_TOKENS = 72
SAME_SENTENCE = 0.9  # cosine above which two sentences say the same
SAME_WORDS = 0.75  # share of a quote's content words above which a statement repeats it
MIN_NOVEL_WORDS = 3  # content words a claim must add to the question
MAX_ADDED_WORDS = 2  # content words in neither the source nor the question that reject a claim


@dataclass(frozen=True)
class Plan:
    """How many entries serve as evidence: an entry is kept when its score is at
    least ``floor`` and at least ``relative`` times the best score."""

    floor: float
    relative: float
    most: int
    quotes: int  # source sentences quoted for the top entry


# "How does BiLLM ...?" wants one paper, told well; "Which papers ...?" wants all
# the relevant ones, each in a sentence. Both fitted on the dev questions
# (eval/questions.jsonl dev split and eval/holdout.jsonl).
SINGLE = Plan(floor=0.08, relative=0.7, most=2, quotes=3)
SURVEY = Plan(floor=0.03, relative=0.1, most=6, quotes=1)


def plan_for(question: str) -> Plan:
    return SURVEY if is_survey(question) else SINGLE


@dataclass(frozen=True)
class Sentence:
    text: str
    cites: list[int]
    status: str  # "verified" | "quoted" | "uncited"

    def render(self, marks: str | None = None) -> str:
        """The sentence with its citation marks (``[1] [2]`` unless given, e.g.
        pandoc's ``[@key]``); quoted source sentences in quotation marks."""
        marks = " " + marks if marks else "".join(f" [{n}]" for n in self.cites)
        if not marks:
            return self.text
        if self.status == "quoted":
            return f"“{self.text}”{marks}"
        return f"{self.text.rstrip('.')}{marks}."


@dataclass
class Answer:
    question: str
    refused: bool = False
    sentences: list[Sentence] = field(default_factory=list)
    cited: dict[int, Entry] = field(default_factory=dict)
    retrieved: list[Hit] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    model: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False

    @property
    def text(self) -> str:
        return " ".join(s.render() for s in self.sentences)

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "answer": self.text,
            "refused": self.refused,
            "sentences": [{"text": s.text, "cites": s.cites, "status": s.status} for s in self.sentences],
            "citations": [{"n": n, "id": e.id, "label": e.label, "source": e.source.to_json()}
                          for n, e in sorted(self.cited.items())],
            "retrieved": [h.to_json() for h in self.retrieved],
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "model": self.model,
        }


_CLEAN = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]|\*\*|^(?:answer|response)\s*:\s*", re.I | re.M)


_PREAMBLE = re.compile(r"^(?:the )?answer(?: to (?:this|the) question)?(?: is)?(?:\s*:|\s+that\b)\s*", re.I)


def clean(generated: str) -> list[str]:
    """Model text -> at most two candidate sentences: any [n] the model wrote is
    removed (citations are the code's), fragments and repeats dropped."""
    # A line that does not end a sentence before another line starts is a heading
    # ("BiLLM: A groundbreaking 1-bit scheme"); joined to the next it would pass as
    # part of a sentence. The last line may stop mid-sentence at the token limit.
    lines = [_LIST_MARK.sub("", line).strip() for line in _CLEAN.sub("", generated).splitlines()]
    lines = [line for line in lines if line]
    text = " ".join(" ".join(line for line in lines[:-1] if line.endswith((".", "!", "?"))).split()
                    + lines[-1:])
    text = _PREAMBLE.sub("", text)
    text = text[:1].upper() + text[1:]
    out: list[str] = []
    for s in sentences(text):
        # The model copies the abstract's voice; "We propose" in an answer would read
        # as the assistant's own claim.
        s = _FIRST_PERSON.sub(lambda m: _THIRD_PERSON[m.group(0)], s)
        if (len(s.split()) >= 5 and s[-1] in ".!" and s not in out and not s.lower().startswith("question")
                and not _degenerate(s) and not _PAPER_FRAME.match(s)):
            out.append(s)
    return out[:2]


def _degenerate(sentence: str) -> bool:
    """A sentence that loops ("the minimax regret bounds for ... are the upper bounds
    of the minimax regret bounds for ...") or leaves a quotation or bracket open."""
    w = words(sentence)
    # Five words again, or three content words again ("score-based image generator");
    # an abstract's own phrasing repeats shorter runs ("a constant number of").
    runs = list(zip(*(w[i:] for i in range(5)))) + [
        t for t in zip(w, w[1:], w[2:]) if not STOPWORDS.intersection(t)]
    return (len(set(runs)) < len(runs)
            or sentence.count('"') % 2 == 1 or sentence.count("(") != sentence.count(")"))


# "The paper that proposes X is the paper by the authors of the paper.", "The paper
# mentioned in the abstract is ...": the question's words put back as a subject, then
# a title, an author or the paper itself; in 313 recorded outputs never a fact.
_PAPER_FRAME = re.compile(r"^(?:The|This|A|One)\s+(?:\w+\s+)?(?:paper|study|work|article|research)s?\s+"
                          r"(?:that|which|who|mentioned|building|examining|discussing|proposing|on|about)\b",
                          re.I)
_TAXONOMY = re.compile(r"\b(?:is|are)\s+(?:a|an|the)\s+(?:\w+\s+)?(type|kind|subset|class|form|variant|"
                       r"example|special case|part|branch|family)\s+of\b", re.I)
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_THIRD_PERSON = {"We": "The authors", "we": "the authors", "Our": "Their", "our": "their",
                 "us": "them", "ours": "theirs"}
_FIRST_PERSON = re.compile(r"\b(?:We|we|Our|our|us|ours)\b")


class Answerer:
    def __init__(self, index: Index, model: ChatModel, prompts: Prompts):
        self.index = index
        self.model = model
        self.prompts = prompts
        self.verifier = Verifier(index.embedder.encode)

    def _context(self, entry: Entry, question: str) -> str:
        """The abstract's sentences that share the question's rarest terms (then the
        earliest), in their order, within the per-call token budget and always within
        the model's window. Lexical on purpose: embedding the sentences here would
        delay the first token."""
        sents = sentences(entry.text) or [entry.text]
        lexical = self.index.lexical()
        asked = set(terms(question))
        weight = [sum(lexical.idf(t) for t in asked & set(terms(s))) for s in sents]
        budget = min(CONTEXT_TOKENS, self.model.n_ctx - ANSWER_TOKENS - 160)
        chosen, used = set(), 0
        for i in sorted(range(len(sents)), key=lambda i: (-weight[i], i)):
            n = self.model.count_tokens(sents[i])
            if used + n <= budget:
                chosen.add(i)
                used += n
        if not chosen:  # one sentence longer than the budget: cut it by words
            best = max(range(len(sents)), key=lambda i: (weight[i], -i))
            return " ".join(sents[best].split()[: max(budget * 2 // 3, 1)])
        return " ".join(sents[i] for i in sorted(chosen))

    def ask(self, question: str, k: int | None = None, *, query: str | None = None,
            only: list[Entry] | None = None, number: Callable[[Entry], int] | None = None,
            on_token: Callable[[str], None] | None = None,
            on_sentence: Callable[[Sentence], None] | None = None) -> Answer:
        """Answer ``question``. ``query`` is what retrieval searches for (a chat turn
        rewritten to stand alone); ``only`` restricts the evidence to given entries
        ("compare [1] and [3]"); ``number`` gives each cited entry its citation
        number (a conversation keeps them stable), by default 1, 2, ... in order."""
        t0 = time.perf_counter()
        query = query or question
        ans = Answer(question=question)
        ans.retrieved = (self.index.score_entries(query, only) if only
                         else self.index.search(query, k))
        ans.timings["retrieval_ms"] = (time.perf_counter() - t0) * 1000
        first_token: list[float] = []
        numbers: dict[str, int] = {}

        def num(entry: Entry) -> int:
            if entry.id not in numbers:
                numbers[entry.id] = number(entry) if number else len(numbers) + 1
            return numbers[entry.id]

        def emit(s: Sentence) -> None:
            ans.sentences.append(s)
            if on_sentence:
                on_sentence(s)

        hits = ans.retrieved
        if not only and (not hits or hits[0].score < REFUSE_BELOW):
            ans.refused = True
            emit(Sentence("The collection does not cover this question; the closest entries "
                          "are listed below.", [], "uncited"))
        else:
            plan = plan_for(question) if not only else (SINGLE if len(only) == 1 else SURVEY)
            kept = hits[:SURVEY.most] if only else [
                h for h in hits if h.score >= max(plan.floor, hits[0].score * plan.relative)][:plan.most]
            absent, inferred = self._absent_specifics(question, kept)

            def gap() -> None:
                n = num(kept[0].entry)
                ans.cited[n] = kept[0].entry
                emit(Sentence(f"The abstract of {kept[0].entry.name} does not report "
                              f"{_join(absent)}", [n], "verified"))

            # A question with a second ask ("What is X, and how much does it save?")
            # whose gap is only inferred (no figure near the question) gets what the
            # abstracts answer, then the note on what they do not report.
            partial = inferred and bool(_COMPOUND.search(question))
            if absent and not partial:
                ans.refused = True
                gap()
            else:
                if not only and hits[0].score < WEAK_MATCH:
                    emit(Sentence("The closest entries match this question only weakly, so the "
                                  "collection may not answer it; this is what they say.", [], "uncited"))
                qvec = self.index.query_vector(question)

                def token(tok: str) -> None:
                    if not first_token:
                        first_token.append(time.perf_counter() - t0)
                    if on_token:
                        on_token(tok)

                try:
                    for i, hit in enumerate(kept):
                        n = num(hit.entry)
                        quotes = plan.quotes if i == 0 or only else 0
                        for s in self.evidence(hit.entry, n, question, qvec, quotes, token):
                            ans.cited[n] = hit.entry
                            emit(s)
                except KeyboardInterrupt:
                    ans.interrupted = True
                if partial and not ans.interrupted:
                    gap()
        ans.timings["first_token_s"] = first_token[0] if first_token else time.perf_counter() - t0
        ans.timings["total_s"] = time.perf_counter() - t0
        ans.model = {"path": self.model.path, "sha256": getattr(self.model, "sha256", "")}
        return ans

    def _absent_specifics(self, question: str, kept: list[Hit]) -> tuple[list[str], bool]:
        """What the question asks for that none of the kept entries contains:
        specific terms (numbers, acronyms, named datasets or models); in a question
        after a detail ("which hardware", "what score"), also capitalised names
        ("Dice", "Cerebras"); and for a question after a figure ("how many") or a
        name ("which LLM"), one in the sentences of the top entry that match the
        question. The flag tells that the gap was inferred in this last way."""
        # A name that occurs only in a link ("github.com/CerebrasResearch/...") is
        # not something the abstract reports.
        text = URL.sub(" ", " ".join(h.entry.text + " " + h.entry.label for h in kept))
        absent = [_with_unit(t, question) for t in missing_terms(question, text)]
        if _DETAIL.search(question):
            names = {m.group(1) for m in _PROPER.finditer(question)} - _QUESTION_WORDS
            absent += [n for n in sorted(names) if n.lower() not in text.lower() and n not in absent]
        # "Which papers ...?" asks for papers, not for a detail of one.
        quantity, named, kind = ((None, None, None) if is_survey(question) else (
            _QUANTITY.search(question), _WHICH_NAME.search(question), _NAMED_KIND.search(question)))
        if not absent and kind:
            if not _names_kind(kept[0].entry.text, kind.group("kind"), question):
                return [f"which {kind.group('kind')}"], True
            named = None  # the name asked for is there
        if absent or not (quantity or named):
            return absent, False
        qvec = self.index.query_vector(question)
        near = [s for s, _ in self.verifier.closest_sentences(kept[0].entry, qvec, 3)]
        if quantity and not any(_FIGURE.search(s) for s in near):
            return [f"the {quantity.group('what') or 'figure'} asked for"], True
        # "Which LLM ...?" wants a name; the matching sentences must hold one
        # that the question does not already give.
        asked = {t.lower() for t in specific_terms(question)}
        if named and not quantity and not any(t.lower() not in asked and not t[0].isdigit()
                                              for s in near for t in specific_terms(s)):
            return [f"which {named.group(1)}"], True
        return [], False

    def evidence(self, entry: Entry, n: int, question: str, qvec: np.ndarray, quotes: int,
                 on_token: Callable[[str], None] | None = None,
                 prompt: tuple[str, dict[str, str]] = ("evidence.user", {})) -> list[Sentence]:
        """What entry [n] says about ``question``: the model's statements that pass
        verification, then the ``quotes`` source sentences closest to ``qvec`` (at
        least one when no statement passed). ``prompt`` names the user template and
        any values it needs beyond the abstract and the question."""
        name, extra = prompt
        values = {"abstract": self._context(entry, question), "question": question} | extra
        needed = {k: v for k, v in values.items() if "{" + k + "}" in self.prompts.templates[name]}
        user = self.prompts.render(name, **needed)
        parts = []
        for tok in self.model.stream(self.prompts.render("evidence.system"), user, ANSWER_TOKENS):
            parts.append(tok)
            if on_token:
                on_token(tok)
        out: list[Sentence] = []
        said: list[np.ndarray] = []

        def add(text: str, vec: np.ndarray, status: str) -> None:
            # A quote of the sentence a statement paraphrased repeats it, even where
            # the rewording keeps their cosine under SAME_SENTENCE.
            if any(float(vec @ v) > SAME_SENTENCE for v in said) or (
                    status == "quoted" and any(_overlap(text, s.text) >= SAME_WORDS for s in out)):
                return
            said.append(vec)
            out.append(Sentence(text, [n], status))

        asked = {_fold(w) for w in content_words(question)}
        source, question_words = _stems(entry.text + " " + entry.label), _stems(question)
        # Words of the question the source never uses: a claim that has them puts
        # the question's premise on the paper ("RICE proposes a hierarchical RL
        # framework" when asked about hierarchical RL).
        premise = question_words - source - _FILLER_STEMS
        allowed = source | question_words | _REPORTING
        for claim in clean("".join(parts)):
            # A claim that only restates the question ("The answer to this question
            # is that X does Y") says nothing, however close to the source it is;
            # one that brings words of its own ("a classic example of", "the paper
            # mentioned by the user", "in the realm of quantum computing") adds what
            # the source does not say.
            said_words = _stems(claim)
            novel = {_fold(w) for w in content_words(claim)} - asked - _FILLER
            # "DPMs are a subset of GANs", "Sparse-IFTs are a type of Sparse-IFT
            # algorithm": a kind the model puts the method in, unless the source does.
            category = _TAXONOMY.search(claim)
            if (len(novel) < MIN_NOVEL_WORDS or said_words & premise
                    or len(said_words - allowed) >= MAX_ADDED_WORDS
                    or (category and f"{category.group(1).lower()} of" not in entry.text.lower())):
                continue
            vec = self.index.embedder.encode([claim])[0]
            if self.verifier.check(claim, entry, vec).ok:
                add(claim, vec, "verified")
        # The source sentences closest to the question back the answer with the
        # paper's own words; one also stands in when every claim failed.
        for best, vec in self.verifier.closest_sentences(entry, qvec, max(quotes, 0 if out else 1)):
            add(best, vec, "quoted")
        return out


# Questions after one detail of a paper, and those after a figure.
_DETAIL = re.compile(r"\b(how (many|much|long|large|fast)|which|what (is|are) the|what \w+ (does|did|do))\b", re.I)
# "How many ...?" asks for a figure; "a cap on how many it may act on" describes.
_QUANTITY = re.compile("".join(rf"(?<!\b{p} )" for p in ("on", "of", "in", "to", "for", "about", "by", "at"))
                       + r"\bhow (many|much)\b|\b(?:what|which) (?:[\w()-]+ ){0,3}(?P<what>score|accuracy|"
                       r"error|speedup|perplexity|pass rate|rate|percentage|value)\b", re.I)
# A figure an abstract reports ("1.08-bit", "90%", "12 points"), not a digit inside a
# name ("LLaMA-7B", "C4").
_FIGURE = re.compile(r"(?<![\w.-])\d+(?:[.,]\d+)?(?![A-Za-z\d])")
# "Which LLM ...", "on which hardware ...": a question word, not a relative pronoun
# ("a model which improves") nor "choosing which of several".
_WHICH_NAME = re.compile(r"(?:^|[,;:]\s*|\b(?:and|or|on|in|for|with|by|to|from|at|under)\s+)which "
                         r"(?!(?:papers?|works?|stud\w*|methods?|approach\w*|ones?|of|is|are|was|were|"
                         r"can|could|do|does|did|has|have|will|would)\b)([a-z]\w+)", re.I)
# "Which datasets ...", "what GPU ...": asks for things an abstract names next to
# the word when it names them ("the MUTAG and PTC datasets", "an A100 GPU").
_NAMED_KIND = re.compile(r"\b(?:which|what)\s+(?:(?:are|is|were|was)\s+the\s+)?(?:[\w()/-]+\s+){0,4}?"
                         r"(?P<kind>datasets?|benchmarks?|GPUs?|hardware|accelerators?)\b", re.I)
_LIST_CUES = frozenset({"including", "such", "e.g", "namely"})
_COMPOUND = re.compile(r"(?:,\s*|\s)and (?:(?:on|in|for|by|to|with|from) )?(?:what|how|which|when|why|"
                       r"where|who|whether|does|do|did|is|are|can)\b", re.I)
_PROPER = re.compile(r"(?<![.?!]\s)(?<!^)\b([A-Z][a-z]{2,})\b(?!-)")
_QUESTION_WORDS = frozenset("What Which How Does Did Do Is Are Can Could When Where Why Who".split())

_FILLER = frozenset("answer question abstract paper author discuss discusse highlight "
                    "provide describe mention state".split())
# How a statement reports a paper; words a claim may use that its source need not.
_REPORTING_WORDS = ("authors discusses describes introduces presents demonstrates focuses explores "
                    "investigates addresses highlights provides aims proposes considers examines "
                    "analyzes studies")


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _stems(text: str) -> set[str]:
    """Content words by their first five letters, so "identifies" meets "identifying"."""
    return {w[:5] for w in content_words(text)}


_REPORTING = _stems(_REPORTING_WORDS)
_FILLER_STEMS = _stems(" ".join(_FILLER))


def _overlap(quote: str, statement: str) -> float:
    """The share of the quote's content words that the statement uses."""
    q = _stems(quote)
    return len(q & _stems(statement)) / len(q) if q else 1.0


def _with_unit(term: str, question: str) -> str:
    """A bare number with the word it counts in the question: "4 bits", not "4"."""
    if not NUMBER.fullmatch(term):
        return term
    m = re.search(rf"(?<![\w.]){re.escape(term)}\s*(%|[A-Za-z]+\b)", question)
    return m.group(0) if m and m.group(1).lower() not in STOPWORDS else term


def _names_kind(text: str, kind: str, question: str) -> bool:
    """Whether ``text`` names a ``kind`` ("datasets") that the question does not
    already give: a name within five words of the word, or a list after "including",
    "such as"; where the text never uses the word, a name anywhere in it."""
    asked = question.lower()
    given = {n for n in names(text) if n.lower() not in asked}
    stem, used = kind.lower().rstrip("s"), False
    for sentence in sentences(text):
        toks = tokens(sentence)
        for i, tok in enumerate(toks):
            if not tok.lower().startswith(stem):
                continue
            used = True
            # A capital after the sentence's first word starts a name ("on Criteo").
            if any(w in given or w.lower() in _LIST_CUES or (j and w[0].isupper() and w.lower() not in asked)
                   for j, w in enumerate(toks) if j != i and abs(j - i) <= 5):
                return True
    return not used and bool(given)


def _join(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " or " + terms[-1]
