"""Cited answers in which the code, not the model, owns the citations, and a
trained judge (rag/judge.py) reads every decision that used to be guessed.

1. The question is analysed once (rag/query.py) and retrieved. The judge reads
   each retrieved entry against it: does it answer the question, is the question
   about it.
2. No entry answers: when the question is about one of them (a near miss: the
   right paper, a detail its abstract does not give), say that its abstract does
   not report it, citing it; otherwise say the collection does not cover it and
   list the closest entries. No model is called either way.
3. Evidence: the entries that answer (one or two; up to six for "Which papers
   ...?"), each read by the model alone with the sentences the judge ranks
   highest; the code attributes each statement to its entry.
4. Verification: a statement is kept when the judge finds it supported by its
   source and every number, acronym and name in it occurs there; the source
   sentences that best answer the question are quoted after it, so every
   sentence is verified or the paper's own words.

Source text is data: a sentence that addresses a reader or a model ("ignore all
previous instructions", role tags; rag/safety.py) is withheld from every stage
(the judge, the model, the quotes), counted and kept for ``--debug``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from . import compare, roles
from .labels import GENERIC
from .index import Index
from .judge import CLAIM, QUESTION, QUESTIONS_MODEL_FILE, Judge, Reading
from .llm import ChatModel
from .errors import UsageError
from .prompts import Prompts, fence
from .query import Query, check_length, description
from .records import Entry, Hit
from .safety import strip_control, suspicious
from .text import STOPWORDS, URL, content_words, is_survey, sentences, specific_terms, tokens, words
from .verify import NUMBER, copied, invented, missing_terms, names

# Retrieval score under which an entry is not worth reading: far below any
# answerable question's top entry on the dev questions (bench/calibrate.py).
REFUSE_BELOW = 0.02
# Whether an entry answers a question: a logistic model over the retrieval score
# and the judge's two outputs (all as logits), one for single-paper questions (read
# by the questions judge) and one for "Which papers ...?" (the first judge); fitted by
# bench/judge.py --fit on the dev questions (eval/questions.jsonl dev split,
# eval/holdout.jsonl, eval/holdout2.jsonl).
FUSION = {"single": (0.359, 0.635, 0.843, -0.412), "survey": (2.554, 1.149, 0.362, 0.452)}
ANSWERS = 0.08  # fused probability above which an entry answers a single-paper question
# ... and above which an entry belongs to a "Which papers ...?" answer. 0.4 rather than
# the 0.2 that recall favoured: on the multi questions of the tuning sets precision
# 0.74 -> 0.85 for recall 0.82 -> 0.72; on the blind ones (holdout3-5) precision
# 0.84/0.85/0.67 -> 0.97/0.95/0.86 for recall 0.97/0.67/0.88 -> 0.92/0.58/0.83.
# Citations that are right come first.
ON_TOPIC = 0.4
ON_TOPIC_FLOOR = 0.2  # ... when no entry reaches ON_TOPIC
# ... at which the answer's lead says the entry answers, rather than "may bear on it":
# of the entries kept on the multi questions of the sets, 98% at or above it were gold
# on the tuning sets, 84% on the blind holdout10; 73% and 57% below it.
SURE = 0.9
# Fused probability above which a second entry answers a single-paper question
# beside the first: at ANSWERS alone, 8 second entries on the eval sets' single-paper
# questions were right and 38 wrong; at 0.3, 1 and 4 (a careful reader counted quotes
# of wrong second papers among the irrelevant quotes).
SECOND = 0.3
# Retrieval score of the entry a search for a described paper ("the online cascade
# learning paper") finds first, and its lead over the second, for a comparison to
# take it as that paper: on the seeds "watermark", "feedback alignment" and "restless
# bandits" find theirs at 0.96-1.0 with the next at 0.36 or less; "LLM planning"
# finds two papers at 0.97 and 0.95, and "image generation" three above 0.85.
DESCRIBED = 0.8
DESCRIBED_GAP = 0.3
# An existence question ("Is there a paper on ...?", "Has anyone ...?") is declined
# when the first judge reads none of the kept entries as answering it above this. On
# the twelve seed sets and corpus12/13, such questions answered in the pipeline had,
# for the entry they were answered from: the 33 answerable ones 0.045 or more (0.067
# for single-paper ones), 10 of the 12 unanswerable ones 0.031 or less (speaker
# diarization read against VALL-E: 0.016). On the other questions no floor separates
# them (at 0.03, 78 of 566 answerable would be declined for 32 of 88 unanswerable).
EXISTS = 0.03
# "Which abstracts are position papers?" asks for a kind of paper, not a topic: the
# judge read such questions against SatML's "This position paper argues ..." at
# 0.02-0.32 and retrieval missed LLM-Modulo, so the eval sets' eight such questions
# were all declined. The kept entries are those that describe themselves as
# position papers (compare.is_position) among the question's own hits and those
# of this search.
POSITION_SEARCH = "position paper: we argue that"
ABOUT = 0.5  # the judge: the question is about the entry's paper (near miss when not answered)
SUPPORTED = 0.5  # the judge: a source supports a statement
CONFIDENT = 0.4  # fused probability below which the answer opens with a caution
CAUTION = ("The closest entries match this question only weakly, so the collection may not "
           "answer it; this is what they say.")
# The judge reads the entry as answering: no "does not report" notice. On the eval
# sets' single-paper questions with a gap found, 0.8 keeps 34 right notices and 4
# wrong ones; 0.5, 22 and 4 (the question judge, counted over eval/*.jsonl). A gap in
# names of a kind asked for ("which datasets") is not vetoed: 13 such notices on those
# sets, all on near misses, 2 of them read as answered at 0.96.
NOT_REPORTED_VETO = 0.8
CONTEXT_TOKENS = 200  # of abstract text per evidence call: prefill is the latency
ANSWER_TOKENS = 72
FRAME_TOKENS = 24  # the chat template's role markers around the two messages (14 for SmolLM2)
MIN_CONTEXT_TOKENS = 32  # of abstract text below which a call is not worth making
QUOTE_WORDS = 60  # a longer quoted sentence is cut at a clause boundary
QUOTE_SHARE = 0.5  # of the best sentence's judge score, under which a sentence is not quoted
# The judge's score at which a sentence answers a "Which papers ...?" question beside
# the paper's contribution: on holdout9-11, 23 of 159 kept papers had one, most of
# them the statement asked for ("we prove full sequence convergence"); under it,
# results and setup details the question did not ask for.
ANSWERING = 0.2
SAME_SENTENCE = 0.9  # cosine above which two sentences say the same
SAME_WORDS = 0.75  # share of a quote's content words above which a statement repeats it
MIN_NOVEL_WORDS = 3  # content words a claim must add to the question


@dataclass(frozen=True)
class Plan:
    """How many entries the judge reads and how many serve as evidence."""

    read: int  # retrieved entries the judge reads
    most: int  # entries used as evidence
    quotes: int  # source sentences quoted per entry at most


# "How does BiLLM ...?" wants one paper, told well; "Which papers ...?" wants all
# the relevant ones, each in a sentence or two.
SINGLE = Plan(read=5, most=2, quotes=3)
SURVEY = Plan(read=10, most=6, quotes=1)


@dataclass(frozen=True)
class Sentence:
    text: str
    cites: list[int]
    status: str  # "verified" | "quoted" | "uncited" | "lead" (lists the papers, marks inline)

    def render(self, marks: str | None = None) -> str:
        """The sentence with its citation marks (``[1] [2]`` unless given, e.g.
        pandoc's ``[@key]``); quoted source sentences in quotation marks."""
        if self.status == "lead":
            return self.text
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
    # Sentences of the entries read that address a reader or a model, never used.
    withheld: list[tuple[Entry, str]] = field(default_factory=list)
    table: list[compare.Row] = field(default_factory=list)  # "compare [1] and [3]"

    @property
    def suspicious(self) -> int:
        return len(self.withheld)

    def table_markdown(self) -> str:
        """The comparison table, each paper marked with its citation number."""
        if not self.table:
            return ""
        numbers = {e.id: n for n, e in self.cited.items()}
        return "\n".join(compare.markdown(self.table, lambda e: f"[{numbers[e.id]}]"
                                           if e.id in numbers else ""))

    @property
    def text(self) -> str:
        body = " ".join(s.render() for s in self.sentences)
        if self.table:
            body += "\n\n" + self.table_markdown()
        return strip_control(body)[0]

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "answer": self.text,
            "refused": self.refused,
            "sentences": [{"text": s.text, "cites": s.cites, "status": s.status} for s in self.sentences],
            "citations": [{"n": n, **e.to_json()} for n, e in sorted(self.cited.items())],
            "retrieved": [h.to_json() for h in self.retrieved],
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "model": self.model,
            "suspicious": self.suspicious,
            "table": [{"id": r.entry.id, **r.cells} for r in self.table],
        }


# Citations the model wrote, bold marks, an "Answer:" label, and markup tags it
# sometimes emits ("<blocked>The authors overcome ..." passed the check on corpus12).
_CLEAN = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]|\*\*|^(?:answer|response)\s*:\s*|</?[A-Za-z][\w-]*>", re.I | re.M)


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


def _claims(generated: str, asked: set[str]) -> list[str]:
    """The candidate sentences of clean() that say something: a claim that only
    restates the question ("The answer to this question is that X does Y") says
    nothing, however well its source supports it."""
    return [c for c in clean(generated)
            if len({_fold(w) for w in content_words(c)} - asked - _FILLER) >= MIN_NOVEL_WORDS]


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
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_THIRD_PERSON = {"We": "The authors", "we": "the authors", "Our": "Their", "our": "their",
                 "us": "them", "ours": "theirs"}
_FIRST_PERSON = re.compile(r"\b(?:We|we|Our|our|us|ours)\b")


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return float(np.log(p / (1 - p)))


def features(hit: Hit, reading: Reading) -> tuple[float, float, float]:
    """What the fused score reads: retrieval score and the judge's outputs, as logits."""
    return _logit(hit.score), _logit(reading.answers), _logit(reading.about)


def fused(survey: bool, hit: Hit, reading: Reading) -> float:
    b, *w = FUSION["survey" if survey else "single"]
    z = b + sum(wi * xi for wi, xi in zip(w, features(hit, reading)))
    return float(1 / (1 + np.exp(-z)))


class Answerer:
    def __init__(self, index: Index, model: ChatModel, prompts: Prompts, judge: Judge | None = None,
                 questions_judge: Judge | None = None):
        self.index = index
        self.model = model
        self.prompts = prompts
        self.judge = judge or Judge()  # claims, "Which papers ...?" and review topics
        self.questions_judge = questions_judge or Judge(QUESTIONS_MODEL_FILE)  # single-paper questions
        self._sentences: dict[str, list[str]] = {}
        self._withheld: dict[str, list[str]] = {}
        self._roles: dict[str, list[str]] = {}
        self._fit: tuple[tuple[str, str], np.ndarray] = (("", ""), np.zeros(0))

    def sentences(self, entry: Entry) -> list[str]:
        """The entry's sentences that may be read, quoted and given to the model:
        control characters stripped, and those that address a reader or a model
        withheld (see :meth:`withheld`); empty when every sentence is."""
        if entry.id not in self._sentences:
            text = strip_control(entry.text)[0]
            every = sentences(text) or [text]
            self._withheld[entry.id] = [s for s in every if suspicious(s)]
            self._sentences[entry.id] = [s for s in every if not suspicious(s)]
        return self._sentences[entry.id]

    def roles(self, entry: Entry) -> list[str]:
        """The role of each of :meth:`sentences` (rag/roles.py)."""
        if entry.id not in self._roles:
            self._roles[entry.id] = roles.tagger().tag(self.sentences(entry))
        return self._roles[entry.id]

    def withheld(self, entry: Entry) -> list[str]:
        """The entry's sentences that address a reader or a model (rag/safety.py)."""
        self.sentences(entry)
        return self._withheld[entry.id]

    def readable(self, hits: list[Hit]) -> tuple[list[Hit], list[tuple[Entry, str]]]:
        """The hits with a sentence left to read, and every withheld sentence of all
        of them with its entry (what ``--json`` counts and ``--debug`` names)."""
        withheld = [(h.entry, s) for h in hits for s in self.withheld(h.entry)]
        return [h for h in hits if self.sentences(h.entry)], withheld

    def redact(self, hit: Hit) -> Hit:
        """The hit with its snippet's withheld sentences left out, since a snippet
        is shown with an answer too."""
        kept = [s for s in sentences(strip_control(hit.snippet)[0]) if not suspicious(s)]
        return replace(hit, snippet=" ".join(kept))

    def _name(self, entry: Entry) -> str:
        """The name a passage is headed by: a title or method name, never first words."""
        return "" if entry.name == "this paper" else entry.name

    def fit(self, question: str, entry: Entry) -> np.ndarray:
        """How well each sentence of the entry alone answers the question (the judge;
        the last entry's kept, as the near-miss check and the evidence both ask)."""
        if self._fit[0] != (question, entry.id):
            self._fit = ((question, entry.id), self.reader(QUESTION, question).sentences(
                question, self._name(entry), self.sentences(entry)))
        return self._fit[1]

    def reader(self, kind: str, text: str) -> Judge:
        """The judge that reads ``text``: single-paper questions have their own."""
        return self.questions_judge if kind == QUESTION and not is_survey(text) else self.judge

    @property
    def judge_seconds(self) -> float:
        return self.judge.seconds + self.questions_judge.seconds

    def read(self, kind: str, text: str, entries: list[Entry]) -> list[Reading]:
        """The judge's reading of each entry for a question or a claim."""
        return self.reader(kind, text).read(kind, text, [(self._name(e), self.sentences(e)) for e in entries])

    def analyse(self, question: str, search: str | None = None) -> Query:
        return Query.analyse(question, search)

    def on_topic(self, topic: str, entries: list[Entry]) -> list[Entry]:
        """Those of ``entries`` that a "Which papers study TOPIC?" answer would keep
        (chat narrowing: "only the protein ones"); TOPIC may be such a question."""
        q = self.analyse(topic if is_survey(topic) else f"Which papers study {topic}?")
        hits, _ = self.readable(self.index.score_entries(q.search, entries))
        readings = self.read(QUESTION, q.text, [h.entry for h in hits])
        return [h.entry for h, _ in self.select(q, hits, readings, most=len(hits))]

    @staticmethod
    def rank(q: Query, hits: list[Hit], readings: list[Reading]) -> list[tuple[Hit, float]]:
        """Every hit with the probability that it answers ``q`` (the judge's reading
        fused with retrieval), best first."""
        return sorted(((h, fused(q.survey, h, r)) for h, r in zip(hits, readings)), key=lambda hp: -hp[1])

    def select(self, q: Query, hits: list[Hit], readings: list[Reading],
               most: int | None = None) -> list[tuple[Hit, float]]:
        """The entries that answer ``q`` with their fused probability, best first: for a
        single-paper question the best and any other nearly as good; for "Which
        papers ...?" every entry that answers."""
        scored = self.rank(q, hits, readings)
        kept = [(h, p) for h, p in scored if p >= (ON_TOPIC if q.survey else ANSWERS)]
        if q.survey:
            # None sure enough: the likely ones, rather than "not covered" for a
            # question the collection answers (3 of 12 on holdout at 0.4 alone).
            kept = kept or [(h, p) for h, p in scored if p >= ON_TOPIC_FLOOR]
            return kept[:most or SURVEY.most]
        return kept[:1] + [hp for hp in kept[1:SINGLE.most] if hp[1] >= max(kept[0][1] - 0.25, SECOND)]

    def ask(self, question: str, k: int | None = None, *, query: str | None = None,
            only: list[Entry] | None = None, number: Callable[[Entry], int] | None = None,
            on_token: Callable[[str], None] | None = None,
            on_sentence: Callable[[Sentence], None] | None = None,
            on_step: Callable[[str], None] | None = None) -> Answer:
        """Answer ``question``. ``query`` is what retrieval searches for (a chat turn
        rewritten to stand alone); ``only`` restricts the evidence to given entries
        ("compare [1] and [3]"); ``number`` gives each cited entry its citation
        number (a conversation keeps them stable), by default 1, 2, ... in order.
        ``on_step`` names each step as it starts ("searching", "reading [1] BiLLM")."""
        check_length(question)
        step = on_step or (lambda label: None)
        step("searching")
        t0, judged = time.perf_counter(), self.judge_seconds
        ans = Answer(question=question)
        q = self.analyse(question, query)
        # "How does Longformer differ from Performer?" is answered from the papers it
        # names, as "compare [1] and [2]" is; the judge reads neither as answering it.
        named = {} if only or not compare.ASKS.match(question) else self._compared(q)
        only = only or list(named) or None
        plan = SURVEY if q.survey or (only and len(only) > 1) else SINGLE
        k = k or self.index.settings.k
        ans.retrieved = [self.redact(h) for h in (self.index.score_entries(q.search, only) if only
                                                  else self.index.search(q.search, max(k, plan.read)))]
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

        pool = ans.retrieved if only else [h for h in ans.retrieved[:plan.read] if h.score >= REFUSE_BELOW]
        if q.position and not only:
            # Position papers, whatever their topic: those retrieval finds for what
            # they call themselves join the pool (module note at POSITION_SEARCH).
            seen = {h.entry.id for h in pool}
            pool += [h for h in self.index.search(POSITION_SEARCH, SURVEY.read) if h.entry.id not in seen]
        pool, ans.withheld = self.readable(pool)
        step(f"reading {len(pool)} entries")
        readings = self.read(QUESTION, q.text, [h.entry for h in pool])
        kept = [(h, 1.0) for h in pool] if only else self.select(q, pool, readings)
        read = {h.entry.id: r for h, r in zip(pool, readings)}
        if not kept and not q.survey and not only:
            # The paper asked about, read as not answering, whose one sentence holds
            # every detail the question gives besides its name, answers it: "What
            # happened when EQTransformer was run on ... the 2000 Tottori earthquake
            # sequence?" got "does not report what the question asks for" above
            # "Applying our model to ... 2000 Tottori earthquakes ..., we were able to
            # detect and locate two times more earthquakes".
            kept = [(h, fused(False, h, r)) for h, r in zip(pool, readings)
                    if r.about >= ABOUT and self._states(q, h.entry)][:1]
        if kept and q.exists and not only and max(
                r.answers for r in self.judge.read(QUESTION, q.text, [(self._name(h.entry), self.sentences(h.entry))
                                                                    for h, _ in kept])) < EXISTS:
            # "Is there work on speaker diarization?" is not answered by a speech paper
            # near it (module note at EXISTS).
            kept = []
        if q.position and not only:
            kept = [(h, 1.0) for h in pool if compare.is_position(self.sentences(h.entry))][:SURVEY.most]
        absent, partial, how = [], False, ""
        # A follow-up about one paper ("How many agents did they use?") may ask for
        # what it does not report, as a question that searched may; entries named
        # together ("compare [1] and [3]") are asked about as a whole.
        if kept and (not only or len(only) == 1):
            absent, how = self._absent_specifics(q, [h for h, _ in kept])
            # The judge vetoes a notice on an entry it reads as answering: the rules
            # above once said "does not report the figure asked for" of "by as
            # much as 90%". Not one for names of a kind the abstract gives none of:
            # the judge reads "two real-world datasets" as naming them.
            # Nor is a term a list question names among others ("proteins, docking,
            # RNA?") a gap when several entries answer it, or one answers another of
            # the items: each answers its part.
            # In both cases a kind of data the abstracts never touch stands: the judge
            # reads "watermarks in AI-generated images" as answered by a paper on LLM
            # text, and "RAG for source code" names a gap in three RAG papers on text.
            if (q.survey and (len(kept) > 1 or all(_listed(t, q.text) for t in absent))
                    or how != "kind" and read[kept[0][0].entry.id].answers >= NOT_REPORTED_VETO):
                unseen = set(_unseen_kinds(q.text, _reported([h.entry for h, _ in kept])))
                absent = [t for t in absent if unseen & set(t.split())]
            # A question with a second ask ("What is X, and how much does it save?")
            # whose gap is only inferred gets what the abstracts answer, then the note.
            partial = bool(how) and bool(_COMPOUND.search(q.text))
        # A comparison the question names ("... DeepONet ... the Fourier neural
        # operator on the Darcy flow problem?") cannot be made where one of the
        # papers never mentions what it is compared on; the names that pick the
        # papers out ("DeepONet", "Fourier") are not such a thing.
        lacking = [(e, gone) for e in named if (gone := [t for t in _named_absent(q.text, [e], detail=True)
                                                         if not any(n in t for n in named.values())])]

        def cite(entry: Entry) -> int:
            n = num(entry)
            ans.cited[n] = entry
            return n

        def gap(entry: Entry, what: str, nearest: bool = False) -> None:
            n = cite(entry)
            name = strip_control(entry.name)[0]
            # Nothing the question names is missing and no figure is asked for: only
            # the judge's low reading says the abstract lacks the answer, and it
            # misses answers in other words ("Where was EQTransformer tested, and on
            # which earthquake?" read the Tottori sentence at 0.06). So the notice
            # says no more than that, and shows the two closest sentences.
            unsaid = what == _UNSAID
            # A paper the judge reads as not what the question is about is only the
            # closest one: "The abstract of Earthquake transformer does not mention
            # “LIGO”" read as if the question were about it.
            elsewhere = not only and not q.survey and entry.id in read and read[entry.id].about < ABOUT
            emit(Sentence(f"The abstract of {name} may not answer this; its closest sentences follow" if unsaid
                          else f"The collection does not cover this question: the closest entry, {name}, "
                               f"does not {what}" if elsewhere
                          else f"The abstract of {name} does not {what}", [n], "verified"))
            # A notice that stands alone on the paper asked about is followed by what
            # the abstract reports closest to the question (not after an answer's
            # own quotes, which it would repeat).
            if nearest and not q.survey and read.get(entry.id) and read[entry.id].about >= ABOUT:
                for text in self._nearest(entry, q, 2 if unsaid else 1):
                    emit(Sentence(text, [n], "quoted"))

        if not kept or (absent and not partial) or lacking:
            ans.refused = True
            # The paper asked about: of those the judge reads as that paper, the best
            # retrieved (on "What ImageNet top-1 accuracy does MoMo-Adam reach?" it
            # read a theory paper at 0.95 as MoMo was; retrieval put MoMo at 0.85,
            # the other at 0.02).
            near = max(zip(pool, readings), key=lambda hr: (hr[1].about >= ABOUT, hr[0].score), default=None)
            if lacking:
                for entry, gone in lacking:
                    gap(entry, _gap(gone, ""))
            elif q.survey and len(kept) > 1:
                ns = [cite(h.entry) for h, _ in kept]
                names = [f"{strip_control(h.entry.name)[0]} [{n}]" for (h, _), n in zip(kept, ns)]
                emit(Sentence(f"The abstracts of {_join(names, 'and')} do not {_gap(absent, how)}", ns, "verified"))
            elif kept:
                gap(kept[0][0].entry, _gap(absent, how), nearest=True)
            elif near and near[1].about >= ABOUT and not q.survey and not q.exists:
                gap(near[0].entry, self._missing(q, near[0].entry), nearest=True)
            else:
                emit(Sentence("The collection does not cover this question; the closest entries "
                              "are listed below.", [], "uncited"))
        else:
            # A single-paper answer is cautioned only when its entry is not what the
            # question is about: one it is about answers or gets a "does not report"
            # notice, and a caution on it was wrong 43 times in 187 right answers of
            # the eval sets (9 with this condition, while 23 of 35 near-topic
            # questions answered still get it). "Which papers ...?" entries kept
            # below ON_TOPIC (select's fallback) always are: 6 of 10 such were right
            # on the eval sets, the rest on nothing asked ("continual learning"
            # answered by clawNOs and MoMo).
            top = kept[0][0].entry.id
            weak = q.survey and kept[0][1] < ON_TOPIC
            cautioned = not only and (weak or not q.survey and kept[0][1] < CONFIDENT and read[top].about < ABOUT)
            if cautioned:
                emit(Sentence(CAUTION, [], "uncited"))

            def token(tok: str) -> None:
                if not first_token:
                    first_token.append(time.perf_counter() - t0)
                if on_token:
                    on_token(tok)

            # "Which papers ...?": which ones first, then what each says; one paper
            # found is named first only when it is not a sure match (a weak one has
            # the caution).
            # "Is there a paper on ...?" is answered by naming the paper, before its quotes.
            if not only and (len(kept) > 1 or q.survey and not weak and kept[0][1] < SURE
                             or q.exists and not cautioned):
                ns = [cite(h.entry) for h, _ in kept]
                names = [f"{strip_control(h.entry.label)[0]} [{n}]" for (h, _), n in zip(kept, ns)]
                if q.survey:
                    emit(Sentence(_lead([(name, p) for name, (_, p) in zip(names, kept)], weak), ns, "lead"))
                elif len(kept) == 1:
                    # The single-paper fused score rarely reaches SURE on right answers,
                    # so below it the paper is named without a claim that it answers.
                    emit(Sentence(f"{names[0]} answers this." if kept[0][1] >= SURE
                                  else f"The closest match in the collection is {names[0]}.", ns, "lead"))
                else:
                    # A second paper nearly as sure is named before its quotes, which a
                    # reader took for the first paper's (corpus13: SimCLRv2's after DINOv2's).
                    emit(Sentence(f"Two entries bear on this: {_join(names, 'and')}.", ns, "lead"))
            try:
                # One paper found for "Which papers ...?" is told as a single-paper
                # answer is, not in the one sentence a paper gets beside others.
                plan = SINGLE if q.survey and len(kept) == 1 and not only else plan
                for i, (hit, _) in enumerate(kept):
                    n = num(hit.entry)
                    step(f"answering from [{n}] {hit.entry.label}")
                    quotes = plan.quotes if i == 0 or only else 1
                    for s in self.evidence(hit.entry, n, q, quotes, token):
                        ans.cited[n] = hit.entry
                        emit(s)
            except KeyboardInterrupt:
                ans.interrupted = True
            if partial and absent and not ans.interrupted:
                gap(kept[0][0].entry, _gap(absent, how))
            # A comparison is a table too, column by column, each cell the paper's
            # own words: of the entries named, else of every paper the answer cites.
            compared = only if only and len(only) > 1 else list(ans.cited.values())
            if compare.ASKS.match(question) and len(compared) > 1 and not ans.interrupted:
                numbered = {cite(e): e for e in compared}
                ans.table = [compare.row(e, self.sentences(e), self.fit) for _, e in sorted(numbered.items())]
        ans.timings["first_token_s"] = first_token[0] if first_token else time.perf_counter() - t0
        ans.timings["total_s"] = time.perf_counter() - t0
        ans.timings["judge_s"] = self.judge_seconds - judged
        ans.model = {"path": self.model.path, "sha256": getattr(self.model, "sha256", "")}
        return ans

    def _compared(self, q: Query) -> dict[Entry, str]:
        """The papers a comparison names, each with the words that picked it: for each
        name it gives ("Longformer", "BYOL"), the best retrieved entry that uses it;
        for a side it describes ("the online cascade learning paper"), the entry a
        search for the description finds clearly first. None unless two or more.
        A later name used by a paper already picked ("Darcy" after "Fourier") is a
        detail asked about, not another paper."""
        hits = self.index.search(q.search, SURVEY.read)
        asked = {m.group(1) for m in _PROPER.finditer(q.text)} - _QUESTION_WORDS
        asked |= {t for t in specific_terms(q.text) if not t[0].isdigit() and t not in GENERIC}
        found: dict[Entry, str] = {}
        parts = compare.sides(q.text)
        for part in parts or [q.text]:
            picked = False
            for name in sorted(asked, key=q.text.find):
                # A prefix: "Performer" is used as "Performers".
                used = re.compile(rf"(?<![\w-]){re.escape(name)}")
                if picked or not used.search(part):
                    continue
                hit = next((h for h in hits if used.search(f"{h.entry.title} {h.entry.label} {h.entry.text}")), None)
                if hit and hit.entry not in found:
                    found[hit.entry] = name
                    picked = bool(parts)  # one paper per side
            if parts and not picked:
                said, entry = self._described(part)
                if entry and entry not in found:
                    found[entry] = said
        return found if len(found) > 1 else {}

    def _described(self, side: str) -> tuple[str, Entry | None]:
        """What one side of a comparison says to pick out a paper ("online cascade
        learning" of "the online cascade learning paper") and the entry a search for
        it finds clearly first, if one does ("LLM planning" finds two)."""
        said = description(side) or re.sub(r"^(?:the|a|an)\s+", "", side.strip(" ?.!"), flags=re.I)
        hits = self.index.search(said, 2)
        if hits and hits[0].score >= DESCRIBED and (len(hits) < 2 or hits[1].score <= hits[0].score - DESCRIBED_GAP):
            return said, hits[0].entry
        return said, None

    def _absent_specifics(self, q: Query, kept: list[Hit]) -> tuple[list[str], str]:
        """What the question asks for that none of the kept entries contains:
        specific terms (numbers, acronyms, named datasets or models); in a question
        after a detail ("which hardware", "what score"), also capitalised names
        ("Dice", "Cerebras"); and for a question after a figure ("how many") or a
        name ("which LLM"), one in the sentences of the top entry that match the
        question. The second value tells how the gap was found: "" for terms the
        question gives, "kind" for names of a kind it asks for ("which datasets"),
        "guess" for the sentences' way."""
        question = q.text
        absent = _named_absent(question, [h.entry for h in kept])
        # "Which papers ...?" asks for papers, not for a detail of one.
        # What is asked is in the sentence that asks: "..., which changes who picks it
        # next. Is there a method ...?" does not ask which changes.
        ask = _asking(question)
        quantity, named, kind = ((None, None, None) if q.survey else (
            _QUANTITY.search(ask), _WHICH_NAME.search(ask),
            _NAMED_KIND.search(ask) or _SPECIFIC_KIND.search(ask)))
        if not absent and kind:
            what = kind.group("kind") or kind.group("thing")
            if not _names_kind(kept[0].entry.text, what, question):
                if kind.re is _SPECIFIC_KIND:
                    return [f"which {kind.group('phrase') or kind.group('named')}"], "kind"
                return [f"which {what} {'were' if what.endswith('s') else 'was'} used"], "kind"
            named = None  # the name asked for is there
        if absent or not (quantity or named):
            return absent, ""
        # The sentences the judge finds answer the question best.
        sents = self.sentences(kept[0].entry)
        near = [sents[i] for i in np.argsort(-self.fit(question, kept[0].entry))[:3]]
        # A figure is looked for among its results too, where an abstract reports them
        # and where the judge ranks them low for a paraphrase ("by what percentage does
        # feeding mesh geometry ... cut the error": "by as much as 41%").
        results = [s for s, role in zip(sents, self.roles(kept[0].entry)) if role == "result"]
        if quantity and not any(_FIGURE.search(s) for s in near + results):
            return [_figure_asked(quantity)], "guess"
        # "Which LLM ...?" wants a name; the matching sentences must hold one
        # that the question does not already give.
        asked = {t.lower() for t in q.specifics}
        given = _new_names(kept[0].entry.text, question.lower())
        # Not a field's acronym ("LLMs", "SOTA") nor a link's words: "which base
        # language model" wants a name.
        if named and not quantity and not any(t.lower() not in asked and not t[0].isdigit() and t not in GENERIC
                                              for s in near for t in specific_terms(URL.sub(" ", s))) and not any(
                _tested_on(s, given, question.lower()) for s in near + results):
            # "which training stage does ...": the words up to the verb name the thing.
            return [f"which {named.group(1)}{named.group(2) or ''}"], "guess"
        return [], ""

    def _states(self, q: Query, entry: Entry) -> bool:
        """Whether the entry holds every specific term and name the question gives
        (numbers, acronyms, capitalised names), and one sentence holds all of those
        besides its own name and title, at least one: "2000" and "Tottori" in "...
        recorded during 2000 Tottori earthquakes ...". Not a question after a figure
        that no such sentence gives."""
        ask = _asking(q.text)
        # Not one asking for a name or kind the abstract may not give ("which
        # specific GNN architecture ...?"), nor for two things at once.
        if (_named_absent(q.text, [entry], detail=True) or _COMPOUND.search(q.text)
                or any(p.search(ask) for p in (_WHICH_NAME, _NAMED_KIND, _SPECIFIC_KIND))):
            return False
        # Those the abstract writes as the question does, but for the paper's own
        # names: its title's and label's, those of the sentences that say what it
        # contributes ("We present X, ..."), and what it calls its method ("The
        # model, called EQTransformer, ...").
        sents, role = self.sentences(entry), self.roles(entry)
        named = " ".join([entry.name, entry.title or "", entry.label]
                         + [s for s, r in zip(sents, role) if r == "contribution"]
                         + _CALLED.findall(entry.text)).lower()
        text = entry.text.lower()
        given = set(q.specifics) | {m.group(1) for m in _PROPER.finditer(q.text)} - _QUESTION_WORDS
        asked = [t.lower() for t in given if t not in GENERIC and t.lower() not in named and t.lower() in text]
        if not asked:
            return False
        quantity = _QUANTITY.search(ask)
        return any(all(re.search(rf"(?<![\w.-]){re.escape(t)}", s.lower()) for t in asked)
                   and (not quantity or _FIGURE.search(s)) for s in sents)

    def _missing(self, q: Query, entry: Entry) -> str:
        """What a near miss asks that the abstract lacks: the names and figures the
        question gives that it does not, else the figure it asks for ("How many
        random features ...?"), else what the question asks for."""
        absent = _named_absent(q.text, [entry])
        if absent:
            return _gap(absent, "")
        quantity = _QUANTITY.search(_asking(q.text))
        return _gap([_figure_asked(quantity)], "guess") if quantity else _UNSAID

    def _nearest(self, entry: Entry, q: Query, most: int = 1) -> list[str]:
        """What the abstract reports closest to a question it does not answer: the
        nearby detail a researcher looks for next ("80.1% top-1 in linear evaluation"
        when k-NN accuracy is asked), and the evidence to see through a notice the
        judge got wrong (corpus13: "What happened when EQTransformer was run on ...
        Tottori ...?" read as not answered). None after a kind of data the abstract
        never touches: that paper is near the topic, not about it."""
        if _unseen_kinds(q.text, _reported([entry])):
            return []
        sents, role = self.sentences(entry), self.roles(entry)
        ranked = self.relevant(entry, q, self.fit(q.text, entry))
        # After a figure, the best result that gives one (the judge ranked "for more
        # than 50 years" of background first for a median GDT).
        figured = [i for i in ranked if role[i] == "result" and _FIGURE.search(sents[i])]
        best = (figured if _QUANTITY.search(q.text) else [])[:1] or ranked[:most]
        return [compare.excerpt(sents[i], q.text, QUOTE_WORDS, figures=True) for i in sorted(best)]

    def _budget(self, name: str, values: dict[str, str]) -> int:
        """Tokens of abstract text one call may carry: the per-call budget, within
        what the model's window leaves after the system prompt, the rest of the user
        prompt (the question included), the template's role markers and the answer."""
        frame = (self.model.count_tokens(self.prompts.render("evidence.system"))
                 + self.model.count_tokens(self.prompts.render(name, **values | {"abstract": ""})))
        room = self.model.n_ctx - ANSWER_TOKENS - FRAME_TOKENS - frame
        if room < MIN_CONTEXT_TOKENS:
            raise UsageError(f"the question leaves no room for an abstract in the model's window of "
                             f"{self.model.n_ctx} tokens; ask a shorter question")
        return min(CONTEXT_TOKENS, room)

    def _cut(self, text: str, budget: int) -> str:
        """The longest start of ``text`` within ``budget`` tokens, cut at a space
        where it has one (a sentence longer than the budget; a run of thousands of
        characters without a space)."""
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.model.count_tokens(text[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut = text[:lo]
        return cut.rsplit(" ", 1)[0] if lo < len(text) and " " in cut else cut

    def _context(self, entry: Entry, ranked: list[int], budget: int) -> str:
        """The abstract's sentences the judge ranks highest for the question, in their
        order, within ``budget`` tokens."""
        sents = self.sentences(entry)
        chosen, used = set(), 0
        for i in ranked:
            n = self.model.count_tokens(sents[i])
            if used + n <= budget:
                chosen.add(i)
                used += n
        if not chosen:  # one sentence longer than the budget: cut it
            return self._cut(sents[ranked[0]], budget)
        return " ".join(sents[i] for i in sorted(chosen))

    def supported(self, claims: list[str], entry: Entry) -> list[bool]:
        """Whether the entry supports each claim: the claim is the source's own words,
        trimmed (rag/verify.py ``copied``), names nothing the source does not, and
        the judge finds a window of the source that supports it. The judge alone
        tells a minimal edit from its original too rarely for a careful reader
        (bench/judge_vs_proxies.py), so it vetoes and the copy check carries."""
        sents = self.sentences(entry)
        source = " ".join(sents) + " " + entry.label
        out = []
        for claim in claims:
            if invented(claim, source) or not copied(claim, sents):
                out.append(False)
                continue
            out.append(self.judge.read(CLAIM, claim, [(self._name(entry), sents)])[0].answers >= SUPPORTED)
        return out

    def relevant(self, entry: Entry, q: Query, fit: np.ndarray) -> list[int]:
        """The entry's sentences best first for the question by the judge, without
        its background and links unless the question asks for them (all of them
        when that leaves none)."""
        role, sents = self.roles(entry), self.sentences(entry)
        ranked = sorted(range(len(fit)), key=lambda i: (-fit[i], i))
        # Nor a sentence that says nothing alone: a question ("We ask, do such
        # connections hold up ...?"), a stub ("The objectives are two-fold."). One
        # that leans on the one before ("The second ensures ...") stays: the question
        # may be what it answers ("What two objectives ...?").
        alone = [i for i in ranked if not (sents[i].rstrip().endswith("?")
                                           or len(content_words(sents[i])) < 4)] or ranked
        return [i for i in alone if role[i] not in _ASIDE or role[i] in q.wants] or alone

    def quotes(self, entry: Entry, q: Query, ranked: list[int], most: int) -> list[int]:
        """Which sentences to quote, in the order a reader wants them: what the paper
        contributes, then how, then what it found. A question after the paper as a
        whole gets its approach and main result as its research-table row has them
        (a "Which papers ...?" answer its first contribution); any other gets the
        sentence the judge ranks highest and those it rates nearly as well."""
        if most <= 0:
            return []
        picked: list[int] = []
        sents, fit, role = self.sentences(entry), self.fit(q.text, entry), self.roles(entry)
        # Sentences that stand alone, in the abstract's order, and those of them that
        # say what the paper contributes, but not the question a paper sets itself
        # ("we question if self-supervised learning provides new properties to ViT").
        alone = [i for i in sorted(ranked) if not _LEANS.search(sents[i])]
        own = [i for i in alone if role[i] == "contribution" and not compare.ASKING.search(sents[i])]
        if q.overview and most > 1:
            # The research table's approach and result (rag/compare.py, by roles and
            # words): against a reader's cells on the seeds, 68% and 91% right, where
            # the first contribution and the first result with a figure were 60% and 72%.
            cells = compare.row(entry, sents).sources
            picked += [cells[c] for c in ("approach", "result") if c in cells and cells[c] in ranked]
        elif q.overview or q.survey:
            # A "Which papers ...?" answer names each paper's first contribution ("we
            # present BiLLM"): the table's approach there brought fewer of the key
            # facts (multi-paper questions, quotes only: 42.6% -> 38.1%).
            # Not one that leans on the sentences before it, since it is quoted alone
            # ("We study a family of problems interpolating the two."): then the
            # first where the authors say what they did ("We prove tight minimax
            # regret bounds for m-MAB ...").
            # Nor the question a paper sets itself ("we question if self-supervised
            # learning provides new properties to ViT"): DINO's contribution is the
            # method it then builds.
            picked += (own or [i for i in alone if role[i] != "background" and _OWN.match(sents[i])])[:1]
            if q.survey:
                # ... and the sentence that holds what the question names (a metric, a
                # dataset: "Which papers report FID results on CIFAR-10?"), wherever
                # the judge ranks it; else the one the judge reads as answering what
                # the question asks of the papers ("Which papers prove convergence?":
                # "we prove full sequence convergence ...", not only "We show that
                # adaptive proximal gradient methods ..."); in the abstract's order.
                named = {t.lower() for t in q.specifics if t not in GENERIC and not t[0].isdigit()}
                holds = {i: sum(t in sents[i].lower() for t in named) for i in alone}
                if max(holds.values(), default=0):
                    best = max(ranked, key=lambda i: holds.get(i, 0))
                else:
                    best = next((i for i in ranked if i in alone and role[i] != "background"), None)
                    best = best if best is not None and fit[best] >= ANSWERING else None
                if best is None:
                    # The judge reads none as answering: the sentence that shares most
                    # of the question's words, three or more (corpus13: Mamba's "linear
                    # scaling in sequence length" for "architectures whose compute
                    # grows only linearly with sequence length", rather than only "a
                    # key weakness of such models is ...").
                    asked = _stems(q.text)
                    shared = {i: len(_stems(sents[i]) & asked) for i in alone if role[i] != "background"}
                    top = max(shared, key=lambda i: (shared[i], -i), default=None)
                    best = top if top is not None and shared[top] >= 3 else None
                if best is not None and best not in picked:
                    return sorted(picked + [best])
        elif _WHICH_NAME.search(q.text) or _NAMED_KIND.search(q.text):
            # "Which environments ...?": the sentence that names what experiments ran
            # on answers it, wherever the judge ranks it ("analysis on Baird's
            # counterexample and a Four-room task").
            asked = q.text.lower()
            given = _new_names(entry.text, asked)
            picked += [i for i in ranked if _tested_on(sents[i], given, asked)][:1]
        # After a sentence picked above, only sentences the judge rates near the best:
        # on held-out synthetic questions a fixed three quoted 0.30 answering
        # sentences per quote and this 0.63, for recall 0.90 -> 0.84
        # (bench/judge_vs_proxies.py). With none picked above, the judge's first
        # `most` are quoted whatever their rating: on the eval sets' 302 single-paper
        # questions (quotes only) the floor there too would cut quotes per answer
        # 2.93 -> 1.83 and the answer facts quoted 0.714 -> 0.532.
        floor = QUOTE_SHARE * max((fit[i] for i in ranked), default=0.0)
        picked += [i for i in ranked if i not in picked and (not picked or fit[i] >= floor)][
            :max(0, most - len(picked))]
        if _QUANTITY.search(q.text) and not (q.overview or q.survey):
            # "How many production models ...?": the sentence with a figure for what
            # is counted ("369 production models") first, else the best with a
            # figure, wherever the judge ranks it (it put "with $k = 16$ pipeline
            # stages" first, and a sentence on evaluation metrics before "outperforms
            # GANs by up to 30%").
            figured = [i for i in ranked if _FIGURE.search(sents[i])]
            counted = _counted(q.text)
            lead = ([i for i in figured if counted and counted.search(sents[i])] or figured)[:1]
            picked = lead + [i for i in picked if i not in lead][:most - len(lead)]
        if _HOW.search(q.text) and not (q.overview or q.survey):
            # "How does FlashAttention get a real wall-clock speedup ...?" asks how it
            # works, which the contribution sentence that introduces the method says
            # ("an IO-aware exact attention algorithm that uses tiling ...", not the
            # "We argue that a missing principle is ..." before it): the judge read it
            # at 0.04 and quoted the speedups, the motivation and an analysis. Answer
            # facts quoted on single-paper questions: seed sets 0.744 -> 0.753,
            # corpus13 0.833 -> 0.875 (in place of the judge's last pick, with the
            # first contribution: 0.744 -> 0.744).
            picked, most = _first(([i for i in own if compare.INTRODUCES.search(sents[i])] or own)[:1],
                                  picked, most)
        parts = _parts(q.text)
        if not (q.overview or q.survey) and parts != [q.text]:
            # "I half-remember a paper where ... . What did it find about how much
            # training data matters?": the judge reading all of it ranks the sentences
            # that match the description first; what answers is the best for the
            # sentence that asks, and for each thing a compound question asks ("...
            # first hurt and then help test error, and that adding more training
            # examples can ... make things worse"). Those go first (_first): in place
            # of the judge's last picks they lost more answer facts than they brought
            # (seed sets 0.741 -> 0.738).
            # Not where the judge reads none as answering the part alone ("How are
            # the few labelled images used?" wants the description it follows), nor
            # where it reads them all alike ("Is there something simple?": 0.42-0.68);
            # for a part after a figure, one that gives a figure ("How many
            # structures does the Atlas contain": not "we present the Atlas").
            judge = self.reader(QUESTION, q.text)
            lead = []
            for part in parts:
                part_fit = judge.sentences(part, self._name(entry), sents)
                pool = [i for i in ranked if not _QUANTITY.search(part) or _FIGURE.search(sents[i])] or ranked
                best = max(pool, key=lambda i: part_fit[i])
                if (part_fit[best] >= max(ANSWERING, 2 * float(np.median(part_fit[ranked])))
                        and best not in lead):
                    lead.append(best)
            picked, most = _first(lead, picked, most)
        # A sentence that leans on the ones before ("The first is to align ...", "It
        # achieves ...") is quoted after them, back to one that stands alone; past the
        # first pick, not one that goes on from background without the authors
        # speaking ("As a consequence, the fine-tuning performance is suboptimal.",
        # quoted after "we propose AdaLoRA", read as AdaLoRA's own result).
        picked = [i for n, i in enumerate(picked[:most]) if not n or not (
            _LEANS.search(sents[i]) and i and role[i - 1] == "background" and not _WE.search(sents[i]))]
        return list(dict.fromkeys(j for i in picked for j in _context(sents, i) + [i]))

    def evidence(self, entry: Entry, n: int, q: Query, quotes: int,
                 on_token: Callable[[str], None] | None = None,
                 prompt: tuple[str, dict[str, str]] = ("evidence.user", {}),
                 write: bool = True) -> list[Sentence]:
        """What entry [n] says about the question: the model's statements the judge
        finds supported, then up to ``quotes`` source sentences that answer the
        question (at least one when no statement passed). ``prompt`` names the user
        template and any values it needs beyond the abstract and the question;
        ``write=False`` skips the model and quotes."""
        sents = self.sentences(entry)
        fit = self.fit(q.text, entry)
        ranked = self.relevant(entry, q, fit)
        name, extra = prompt
        values = {"question": q.text} | extra
        needed = {k: v for k, v in values.items() if "{" + k + "}" in self.prompts.templates[name]}
        abstract = self._context(entry, ranked, self._budget(name, needed))
        user = self.prompts.render(name, **needed | {"abstract": fence(abstract)})
        asked = {_fold(w) for w in content_words(q.text)}
        most = 1 if quotes <= 1 else 2  # one or two sentences per paper when several share an answer
        read: dict[str, bool] = {}  # claim -> supported, each judged once as it is finished

        def enough(text: str) -> bool:
            # The rest of the generation cannot change which claims are kept once the
            # first `most` finished ones are supported, or once clean() holds its two;
            # a claim is finished when more text follows it ("95." may go on "3%").
            done = _claims(text, asked)
            if done and text.rstrip().endswith(done[-1][-12:]):
                done = done[:-1]
            for c in done:
                if c not in read:
                    read[c] = self.supported([c], entry)[0]
            return len(done) == 2 or sum(read[c] for c in done) >= most

        parts = []
        for tok in self.model.stream(self.prompts.render("evidence.system"), user, ANSWER_TOKENS) if write else ():
            parts.append(tok)
            if on_token:
                on_token(tok)
            if tok[:1].isspace() and enough("".join(parts)):
                break  # decoding is most of an answer's time
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

        claims = _claims("".join(parts), asked)
        for c in claims:
            if c not in read:
                read[c] = self.supported([c], entry)[0]
        kept = [c for c in claims if read[c]][:most]
        picked = self.quotes(entry, q, ranked, max(quotes, 0 if kept else 1))
        if quotes > 0:
            # A statement is a trimmed copy of one source sentence (supported()). It
            # stands for the quote of that sentence when it keeps most of it (add()
            # then drops the quote); one that keeps less of a sentence quoted anyway
            # repeats a part of it (corpus13: "The authors demonstrate their attack
            # on GPT-2, ..." above the quote that goes on to what the attack
            # extracts). The judge's rating of the sentence is no test here: it put
            # BiLLM's "BiLLM first identifies ... salient weights ..." at 0.003 for
            # "How does BiLLM quantize ...?", where the model chose it.
            kept = [c for c in kept
                    if (j := self._source(entry, c)) not in picked or _overlap(sents[j], c) >= SAME_WORDS]
        if kept:  # embedded only to tell repeats apart
            for claim, vec in zip(kept, self.index.embedder.encode(kept)):
                add(claim, vec, "verified")
        if picked:
            vecs = self.index.embedder.encode([sents[i] for i in picked])
            figures = bool(_QUANTITY.search(q.text))
            for i, vec in zip(picked, vecs):
                # Verbatim, unless far longer than a sentence should be: then the
                # clauses that answer the question, "…" where some were left out.
                text = compare.excerpt(sents[i], q.text, QUOTE_WORDS, figures=figures)
                # "To address this, we propose ..." points at a sentence not shown.
                add(text if i - 1 in picked[:picked.index(i)] else without_lead_in(text), vec, "quoted")
        if not (q.overview or q.survey):
            return out  # the answer to the question first
        # About the paper as a whole: statements are the source's words, trimmed, and
        # each goes where its sentence goes in the reading order (contribution,
        # method, result).
        return sorted(out, key=lambda st: self._place(entry, st.text))

    def _source(self, entry: Entry, text: str) -> int:
        """The sentence of the entry that ``text`` (a quote or a trimmed copy) comes from."""
        sents = self.sentences(entry)
        return max(range(len(sents)), key=lambda j: _overlap(sents[j], text) * _overlap(text, sents[j]))

    def _place(self, entry: Entry, text: str) -> tuple[int, int]:
        i = self._source(entry, text)
        return _READING_ORDER.index(self.roles(entry)[i]), i




# Questions after one detail of a paper, and those after a figure.
_DETAIL = re.compile(r"\b(how (many|much|long|large|fast)|which|what (is|are) the|what \w+ (does|did|do))\b", re.I)
# A search-box query ("Mask2Former panoptic quality (PQ) on Cityscapes"): no question
# or request word, no question mark. Its names are what it asks for, as a detail
# question's are.
_KEYWORDS = re.compile(r"^(?![^?]*\?)(?!\W*(?:what|which|how|why|when|where|who|whose|does|do|did|is|are|"
                       r"was|were|can|could|should|would|will|has|have|tell|list|show|give|find|explain|"
                       r"describe|compare|summari[sz]e|any|i|please)\b)", re.I)
# "How many ...?" asks for a figure; "a cap on how many it may act on" describes.
_QUANTITY = re.compile("".join(rf"(?<!\b{p} )" for p in ("on", "of", "in", "to", "for", "about", "by", "at"))
                       + r"\bhow (many|much)\b|\b(?:what|which) (?:[\w()-]+ ){0,3}(?P<what>score|accuracy|"
                       r"error|speedup|perplexity|pass rate|rate|percentage|value|size|length|ratio|cost|budget)\b", re.I)
# A figure an abstract reports ("1.08-bit", "90%", "12 points"), not a digit inside a
# name ("LLaMA-7B", "C4").
_FIGURE = re.compile(r"(?<![\w.-])\d+(?:[.,]\d+)?(?![A-Za-z\d])")

# A sentence that points back at what the one before said.
# "such models" and "the above phenomena" too ("We identify that a key weakness of such
# models is ...").
_LEANS = re.compile(r"\b(?:the|these|those) (?:two|three|former|latter|above)\b|\bsuch (?!as\b)[a-z]+s\b"
                    r"|^(?:These|Those|They|It|Both|Such|The (?:first|second|third|former|latter)"
                    r"|As a consequence|Consequently)\b")
# A lead-in that points back at what the sentence before stated: "To address this
# gap, ", "To this end, ", "To overcome these limitations, ", "Building on this, ".
_PURPOSE = re.compile(r"(?:To (?:address|tackle|overcome|solve|fill|bridge|close|remedy|mitigate|alleviate|"
                      r"resolve|handle|fix) (?:this|these|that|those|such|the (?:above|aforementioned))\b"
                      r"[^,.;]{0,60}|To this end|In response(?: to (?:this|these)[^,.;]{0,40})?|"
                      r"(?:Motivated by|Building on|Based on|Inspired by) (?:this|these|that|those)\b[^,.;]{0,40}),"
                      r"\s+(?=[a-z])")


def without_lead_in(quote: str) -> str:
    """A quote without a lead-in that points at the sentence before ("To address this
    gap, we propose ..." -> "… we propose ..."), for a quote shown without that sentence."""
    m = _PURPOSE.match(quote)
    return "… " + quote[m.end():] if m else quote


_OWN = re.compile(r"(?:We|Our|This (?:paper|work|study))\b")
_WE = re.compile(r"\b(?:we|our)\b", re.I)


def _first(lead: list[int], picked: list[int], most: int) -> tuple[list[int], int]:
    """``lead`` before the rest of ``picked``, and how many to quote: one more where
    the judge had not picked it."""
    most += any(i not in picked for i in lead)
    return lead + [i for i in picked if i not in lead][:max(0, most - len(lead))], most


def _context(sents: list[str], i: int, most: int = 2) -> list[int]:
    """The sentences before ``sents[i]`` that a reader needs when it leans back: up to
    ``most``, through stubs ("The objectives are two-fold.") and other leaning ones."""
    if not _LEANS.search(sents[i]):
        return []
    j = i - 1
    while j > 0 and i - j < most and (_LEANS.search(sents[j]) or len(content_words(sents[j])) < 4):
        j -= 1
    return list(range(max(j, 0), i))


def _counted(question: str) -> re.Pattern | None:
    """A figure followed within two words by what "how many ...?" counts: for "How
    many production models were ...", "369 production models"."""
    m = re.search(r"\bhow many ((?:[\w-]+ ){0,2}?[\w-]+?)s?\b(?= (?:are|is|were|was|do|does|did|has|have|"
                  r"had|can|could|would|will|in|of|for|on|at)\b|[?,])", question, re.I)
    if not m:
        return None
    head = m.group(1).split()[-1]
    return re.compile(rf"(?<![\w.-])\d[\d.,]*\s+(?:[\w-]+\s+){{0,2}}{re.escape(head)}", re.I)


# "Which LLM ...", "on which hardware ...": a question word, not a relative pronoun
# ("a model which improves") nor "choosing which of several".
_WHICH_NAME = re.compile(r"(?:^|[,;:]\s*|\b(?:and|or|on|in|for|with|by|to|from|at|under)\s+)which "
                         r"(?!(?:papers?|works?|stud\w*|methods?|approach\w*|ones?|of|is|are|was|were|"
                         r"can|could|do|does|did|has|have|will|would)\b)([a-z][\w-]+)"
                         r"(?:((?:\s+[a-z][\w-]+){0,2}?)\s+(?:is|are|was|were|do|does|did|has|have|can|could|"
                         r"[a-z]+s\s+(?:the|a|an|its|their|at|on|in|to|for|with))\b)?",
                         re.I)
# "Which datasets ...", "what GPU ...": asks for things an abstract names next to
# the word when it names them ("the MUTAG and PTC datasets", "an A100 GPU"). Not
# where the kind is what a verb is asked of ("What does the VIMA benchmark consist
# of?" asks what is in it, not which benchmark).
_NAMED_KIND = re.compile(r"\b(?:which|what)\s+(?:(?:are|is|were|was)\s+the\s+)?"
                         r"(?:(?!(?:do|does|did)\b)[\w()/-]+\s+){0,4}?"
                         r"(?P<kind>datasets?|benchmarks?|GPUs?|hardware|accelerators?)\b", re.I)
# "Which specific watermarking schemes did they break?": names of a kind the question
# gives, wanted as names ("state-of-the-art schemes" is no answer).
# "Which specific explanation method does RICE use?" and "What is the name of the
# evaluation metric TIME WEAVER introduces?" ask for one, named ("a novel evaluation
# metric" is no answer).
_SPECIFIC_KIND = re.compile(r"\b(?:which|what)\s+(?:specific|particular|exact)\s+"
                            r"(?P<phrase>(?:[\w-]+\s+){0,3}?(?P<kind>[a-z]+))\s+"
                            r"(?:did|do|does|were|was|are|is|has|have)\b|"
                            r"\bname of (?:the|its|their) (?P<named>(?:[a-z][\w-]*\s+){0,2}?"
                            r"(?P<thing>metric|method|model|dataset|benchmark|algorithm|architecture|loss|"
                            r"framework|measure|score|system|tool|technique|task)s?)\b", re.I)
_LIST_CUES = frozenset({"including", "such", "e.g", "namely"})
_COMPOUND = re.compile(r"(?:,\s*|\s)and (?:(?:on|in|for|by|to|with|from) )?(?:what|how|which|when|why|"
                       r"where|who|whether|does|do|did|is|are|can)\b", re.I)
_PROPER = re.compile(r"(?<![.?!]\s)(?<!^)\b([A-Z][a-z]{2,})\b(?!-)")
_CALLED = re.compile(r"\b(?:called|named|dubbed|termed|coined)\s+([\w-]+)")
_QUESTION_WORDS = frozenset("What Which How Does Did Do Is Are Can Could When Where Why Who".split())

# Roles of sentences quoted only when the question asks for them, and the order in
# which an answer says the rest.
_ASIDE = ("background", "other")
_READING_ORDER = ("contribution", "method", "result", "background", "other")

_FILLER = frozenset("answer question abstract paper author discuss discusse highlight "
                    "provide describe mention state".split())


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _stems(text: str) -> set[str]:
    """Content words by their first five letters, so "identifies" meets "identifying"."""
    return {w[:5] for w in content_words(text)}


def _overlap(quote: str, statement: str) -> float:
    """The share of the quote's content words that the statement uses."""
    q = _stems(quote)
    return len(q & _stems(statement)) / len(q) if q else 1.0


def _with_unit(term: str, question: str) -> str:
    """A bare number with the word it counts in the question: "4 bits", not "4"."""
    if not NUMBER.fullmatch(term):
        return term
    m = re.search(rf"(?<![\w.]){re.escape(term)}\s*(%|[^\W\d_]+\b)", question)
    return m.group(0) if m and m.group(1).lower() not in STOPWORDS else term


def _reported(entries: list[Entry]) -> str:
    """What the entries report: their text and labels, without links."""
    return URL.sub(" ", " ".join(e.text + " " + e.label for e in entries))


def _new_names(text: str, asked: str) -> set[str]:
    """The names ``text`` gives that the (lower-cased) question ``asked`` does not."""
    return {n for n in names(text) if n.lower() not in asked}


def _named_absent(question: str, entries: list[Entry], detail: bool = False) -> list[str]:
    """The specific terms the question gives (numbers with their unit, acronyms,
    named datasets or models), the kinds of data it names (video, speech, images,
    robots) and, in a question after a detail ("which hardware") or when ``detail``
    says it asks for one, its capitalised names ("Dice", "Cerebras"), that none of
    the entries contains.
    A name that occurs only in a link ("github.com/CerebrasResearch/...") is not
    something an abstract reports."""
    text = _reported(entries)
    absent = [_with_unit(t, question) for t in missing_terms(question, text)]
    absent += [w for w in _unseen_kinds(question, text) if w not in absent]
    if detail or _DETAIL.search(question) or _KEYWORDS.match(question):
        names = {m.group(1) for m in _PROPER.finditer(question)} - _QUESTION_WORDS
        absent += [n for n in sorted(names) if n.lower() not in text.lower() and n not in absent]
    return _phrases(absent, question)


# A kind of data: the words that name it in a question, then other words that show
# an abstract touches it. On the ten question sets (bench/decisions.py) the check
# declines 24 more of 264 unanswerable questions (62.5% -> 71.6%) and 1 more of 433
# answerable ones, whose asker knew more than the abstract says ("that guidance
# trick from image generators" of a paper that says "generations"). "Molecules"
# names no kind here: "single-stranded nucleic acid molecules" asks for RNA.
_FAMILIES = (
    ("video videos", "frame frames"),
    ("speech audio music voice", "speaker speakers acoustic spoken sound sounds asr tts"),
    ("image images vision visual photo photos",
     "imaging pixel pixels picture pictures object objects scene scenes"),
    ("robot robots robotic robotics", "manipulation grasp grasping"),
    ("protein proteins", "amino residue residues enzyme enzymes antibody antibodies peptide peptides"),
    ("rna rnas", "ribonucleic mrna mrnas ribozyme ribozymes"),
    ("dna genome genomes genomic genomics", "gene genes chromosome chromosomes nucleotide nucleotides "
     "enhancer enhancers promoter promoters"),
    ("medical clinical", "patient patients health healthcare disease diseases hospital diagnosis"),
    ("weather climate", "atmospheric atmosphere precipitation meteorological"),
    ("language languages text textual", "word words sentence sentences token tokens document documents "
     "corpus corpora linguistic llm llms lm lms nlp translation"),
    ("code", "program programs programming software repository repositories compiler"),
)
_MODALITY = {w: set(a.split() + b.split()) for a, b in _FAMILIES for w in a.split()}
_ARTIFACT = re.compile(r"\b(?:their|its|the|our|your|this paper's|the authors')\s+code\b"
                       r"|\bcode\s+(?:is\s+|was\s+)?(?:public|publicly|available|released|release|open|link)"
                       r"|\b(?:release[sd]?|releasing|share[sd]?|publish(?:es|ed)?)\s+(?:\w+\s+)?code\b", re.I)


def _asking(question: str) -> str:
    """The sentences of ``question`` that ask (end in "?"); all of it when none does."""
    return " ".join(s for s in sentences(question) if s.endswith("?")) or question


# "How does ...?", "How can one ...?": how a method works, not how many or how well.
_HOW = re.compile(r"^\W*how (?:does|do|did|can|could|is|are|was|were)\b", re.I)
# Where a compound question asks its second thing: ", and that ...", "; and how ...".
_PART = re.compile(r"(?:,|;)\s*(?:and|but|also)\s+(?=(?:that|whether|what|how|which|why|when|where|who|"
                   r"does|do|did|is|are|can)\b)", re.I)


def _parts(question: str) -> list[str]:
    """What a question asks, one thing per part: its asking sentences (:func:`_asking`)
    cut where a compound question goes on to a second thing."""
    return [p for p in _PART.split(_asking(question)) if len(content_words(p)) >= 2] or [question]


def _listed(term: str, question: str) -> bool:
    """Whether the question gives ``term`` as an item of a list ("images, 3D shapes,
    molecular poses, or time series") or next to "or" ("speech or video"); not a word
    that qualifies the items ("road traffic speed or flow")."""
    t = rf"(?<!\w){re.escape(term)}(?!\w)"
    if re.search(rf"\bor\s+{t}|{t}\s+or\b", question):
        return True
    parts = question.rstrip("?. ").split(",")
    for i, part in enumerate(parts):
        if len(parts) > 2 and re.search(t, part):
            item = part.split()
            if i == 0:
                item = item[-3:]
            elif i == len(parts) - 1:
                item = item[:4] if item and item[0] in ("or", "and") else []
            return len(item) <= 4 and any(re.fullmatch(t, w) for w in item)
    return False


def _unseen_kinds(question: str, text: str) -> list[str]:
    """The words of the question that name a kind of data ``text`` never touches:
    "SAM for video", "guidance for text-to-speech", "1-bit text-to-image diffusion
    models" asked of papers on images, text and LLMs. None when the text touches
    another kind the question names, or the question lists the kind among others
    ("molecules, proteins and RNA": each paper answers its part; not "speech or
    other audio") or gives it as one of alternatives not all of this kind ("fluid
    flow or weather"; not "speech recognition or text-to-speech")."""
    have = {p for w in words(text) for p in w.split("-")}
    # "Is their code public?" asks for a link, not about code as data.
    question = _ARTIFACT.sub(" ", question)
    named = [(w, [k for k in w.lower().split("-") if k in _MODALITY]) for w in tokens(question)]
    named = [(w, kinds) for w, kinds in named if kinds]
    # "text-to-image" names two kinds, and a paper on text alone does not answer it.
    unseen = [w for w, kinds in named if not all(have & _MODALITY[k] for k in kinds)]
    if not unseen or len(unseen) < len(named):
        return []
    # A comma before "such as" or "e.g." opens an example, not a list.
    listed = any(re.search(rf",\s*{re.escape(w)}\b|\b{re.escape(w)}\s*,(?!\s*(?:such as|e\.g\.|i\.e\.|like|"
                           rf"including|for example|especially|in particular)\b)", question) for w in unseen)
    kind = "|".join(map(re.escape, unseen))
    alternatives = [set(tokens(m.group(1) or m.group(2))) for m in re.finditer(
        rf"([\w-]+(?:\s+[\w-]+)?)\s+or\s+(?:{kind})\b|\b(?:{kind})\s+or\s+(?!other\b)([\w-]+(?:\s+[\w-]+)?)",
        question)]
    return [] if listed or any(not a & set(unseen) for a in alternatives) else unseen


def _phrases(terms: list[str], question: str) -> list[str]:
    """The terms in the order the question gives them, those it writes next to each
    other as one name ("Revisited Oxford", not "Oxford" and "Revisited")."""
    spans = sorted((m.start(), m.end()) for t in set(terms)
                   if (m := re.search(rf"(?<!\w){re.escape(t)}(?!\w)", question)))
    if len(spans) < len(set(terms)):  # a term with a unit the question spaces otherwise
        return terms
    out: list[list[int]] = []
    for a, b in spans:
        if out and question[out[-1][1]:a].isspace():
            out[-1][1] = b
        else:
            out.append([a, b])
    return [question[a:b] for a, b in out]


def _names_kind(text: str, kind: str, question: str) -> bool:
    """Whether ``text`` names a ``kind`` ("datasets") that the question does not
    already give: a name within five words of the word, or a list after "including",
    "such as"; for datasets and benchmarks, also a name experiments are run on
    ("results on ImageNet", "SOTA on LAMBADA", "evaluated across MUTAG and PTC"),
    though the word stands elsewhere ("across a wide array of benchmarks"); not any
    name: "RNA" and "Watson-Crick" are what an abstract is about, not what it was
    tested on. For hardware ("which GPU"), a name tested on counts only where the
    text never uses the word."""
    asked = question.lower()
    given = _new_names(text, asked)
    stem, used, tested_on = kind.lower().rstrip("s"), False, False
    for sentence in sentences(text):
        toks = tokens(sentence)
        tested_on = tested_on or _tested_on(sentence, given, asked)
        for i, tok in enumerate(toks):
            if not tok.lower().startswith(stem):
                continue
            used = True
            # A capital after the sentence's first word starts a name ("on Criteo").
            if any(w in given or w.lower() in _LIST_CUES or (j and w[0].isupper() and w.lower() not in asked)
                   for j, w in enumerate(toks) if j != i and abs(j - i) <= 5):
                return True
    return tested_on and (not used or stem in ("dataset", "benchmark"))


def _tested_on(sentence: str, given: set[str], asked: str) -> bool:
    """Whether an evaluation sentence names what it was run on: a name, or a word
    capitalised past the sentence's first, within three words after "on", "across",
    "using", "over" ("analysis on Baird's counterexample and a Four-room task")."""
    if not _EVALUATED.search(sentence):
        return False
    toks = tokens(sentence)
    return any(w.lower() in _ON and any(x in given or x[0].isupper() and x.lower() not in asked
                                        for x in toks[j + 1:j + 4]) for j, w in enumerate(toks))


_EVALUATED = re.compile(r"\b(?:experiment|evaluat|benchmark|test|result|outperform|achiev|surpass|"
                        r"empirical|perplexity|accuracy)", re.I)
_ON = frozenset({"on", "across", "using", "over"})


def _lead(named: list[tuple[str, float]], weak: bool) -> str:
    """The sentence that opens a "Which papers ...?" answer. It says an entry answers
    only at SURE: below it, a careful reader found a third of the papers a lead named
    as answering did not (holdout10). It claims no count, which missed papers made
    false in 12 of 20 leads. Below SURE it says no more than "may bear on this": a
    blind reader of corpus13 took "none is a sure match" for a verdict and found it
    wrong of clear matches in 3 of 3 leads."""
    if weak:
        return f"The entries in the collection that come closest are {_join([n for n, _ in named], 'and')}."
    sure = [n for n, p in named if p >= SURE]
    rest = [n for n, p in named if p < SURE]
    if not sure:
        return f"{_join(rest, 'and')} may bear on this."
    verb = "answers" if len(sure) == 1 else "answer"
    return f"{_join(sure, 'and')} {verb} this" + (f"; {_join(rest, 'and')} may also bear on it." if rest else ".")


def _join(terms: list[str], word: str = "or") -> str:
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + f" {word} " + terms[-1]


def _figure_asked(quantity: re.Match) -> str:
    """The figure a "how many" / "what ... rate" question asks for, as a notice names it."""
    return f"the {quantity.group('what') or 'figure'} asked for"


_UNSAID = "report what the question asks for"  # _missing with nothing named or figured absent


def _gap(absent: list[str], how: str) -> str:
    """What a notice says the abstract does not do, given how the gap was found
    (``Answerer._absent_specifics``): report what the question asks for ("report
    which datasets were used"), or mention the terms it names, which is all a missing
    term shows ("mention “3D”", not "report 3D")."""
    return f"report {_join(absent)}" if how else f"mention {_join([f'“{t}”' for t in absent])}"
