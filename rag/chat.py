"""A conversation with the collection: follow-ups, references to earlier citations,
and citation numbers that stay the same for the whole conversation.

Follow-ups are resolved by the code, not the model (a 135M model rewrites queries
badly): explicit references ("[2]", "paper 2", "the second paper") and anaphora
("it", "that paper", "their method") name entries cited earlier, and the answer
comes from exactly those entries; "the paper on X" is a new search unless X names a
paper cited earlier; "only the RL papers" narrows the previous turn's
results; a short fragment ("and for bandits?") extends the previous query;
"compare [1] and [3]" answers from exactly those papers, with the table of their
problems, approaches, results and settings every comparison gets (rag/answer.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import compare
from .answer import SURVEY, Answer, Answerer
from .errors import UsageError
from .query import NOT_A_DESCRIPTION, NOUN, check_length, description
from .text import is_survey
from .records import Entry

_BRACKET = re.compile(r"\[(\d+)\]|\b(?:paper|entry|reference|ref|source)\s+#?(\d+)\b", re.I)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_ORDINAL = re.compile(r"\bthe (first|second|third|fourth|fifth|last) (?:paper|one|entry|work|result)\b", re.I)
# "Why does that matter for scaling laws?": "that" as a subject, the last answer's point.
_SINGULAR = re.compile(rf"\b(it|its|it's|(?:this|that|the) {NOUN}|the authors|"
                       rf"(?:does|did|is|was|would|could|can|will) (?:that|this)(?= (?!{NOUN}s?\b)[a-z]))\b", re.I)
_PLURAL = re.compile(rf"\b(they|them|their|(?:these|those|both|the) {NOUN}s|both)\b", re.I)
_PLURAL_NOUN = re.compile(rf"\b{NOUN}s\b", re.I)
_FRAGMENT = re.compile(r"^\s*(and|or|also|what about|how about|and for|and in|same for)\b", re.I)
_APPROACH = re.compile(r"^\s*(?:and|or|also|what about|how about)\s+the\s+(?:[\w-]+\s+){1,4}?"
                       r"(?:approach|method|model|algorithm|framework)s?\s*\??\s*$", re.I)
_WH = re.compile(r"^\s*(what|which|who|how|why|when|where|is|are|does|do|can|could|tell|list|show|explain)\b", re.I)
# "only the protein ones", "just the theoretical ones", "narrow that to the value-based
# ones": the previous results on a sub-topic; "leave out the image one": without it.
_NARROW = re.compile(r"^\s*(?:only|just|narrow (?:it|that|this|them|these)?\s*(?:down )?to)\b(.*)$", re.I)
_EXCLUDE = re.compile(r"^\s*(?:leave out|exclude|drop|remove|ignore|skip|not|without|except(?: for)?)\b(.*)$", re.I)
# What is left of "only the ones about best-arm identification" once the frame goes.
_SUBTOPIC_FRAME = re.compile(rf"^(?:\s*(?:the|ones?|{NOUN}s?|that|which|are|is|about|on|dealing with|"
                             rf"deal with|related to|concerning|with|using|for|in|of)\b)+", re.I)


def _subtopic(text: str) -> str:
    core = _SUBTOPIC_FRAME.sub("", text.strip(" .?!"))
    return re.sub(rf"\s+(?:{NOUN}s?)$", "", core.strip(" .?!"), flags=re.I).strip()


def _names(description: str, entry: Entry) -> bool:
    """Whether a description names the entry: its label among the description's
    words, or every word of the description in the label ("the satellite one")."""
    if entry.label.endswith("…"):
        return False
    label, said = entry.label.lower(), description.lower()
    if re.search(rf"(?<!\w){re.escape(label)}(?!\w)", said):
        return True
    words = [w for w in re.findall(r"[\w-]+", said) if w not in NOT_A_DESCRIPTION and len(w) > 2]
    return bool(words) and len(words) <= 3 and all(re.search(rf"\b{re.escape(w)}", label) for w in words)


@dataclass
class Turn:
    n: int
    question: str
    query: str  # what retrieval searched for, after rewriting
    answer: Answer
    searched: bool = True  # False when the turn named its entries ("[2]", "it")


@dataclass
class Conversation:
    answerer: Answerer
    k: int | None = None
    turns: list[Turn] = field(default_factory=list)
    entries: dict[int, Entry] = field(default_factory=dict)  # citation number -> entry
    _numbers: dict[str, int] = field(default_factory=dict)
    _asked: str | None = None  # what the pipeline is asked, when a fragment becomes a question
    _found: bool = False  # the turn's paper was found by a search for the label it named

    def number(self, entry: Entry) -> int:
        """The entry's citation number in this conversation (assigned once)."""
        if entry.id not in self._numbers:
            n = len(self._numbers) + 1
            self._numbers[entry.id] = n
            self.entries[n] = entry
        return self._numbers[entry.id]

    def clear(self) -> None:
        self.turns.clear()
        self.entries.clear()
        self._numbers.clear()

    def entry(self, n: int) -> Entry:
        if n not in self.entries:
            known = ", ".join(f"[{i}]" for i in sorted(self.entries)) or "none yet"
            raise UsageError(f"no entry [{n}] in this conversation (cited so far: {known})")
        return self.entries[n]

    def resolve(self, question: str) -> tuple[str, list[Entry] | None]:
        """The standalone retrieval query for ``question`` and, when it refers to
        earlier entries, exactly those entries."""
        last = self.turns[-1] if self.turns else None
        refs = [int(a or b) for a, b in _BRACKET.findall(question)]
        if refs:
            only = [self.entry(n) for n in dict.fromkeys(refs)]
            return _with_labels(question, only), only
        if compare.ASKS.match(question) and compare.sides(question):
            # A comparison finds the papers its sides name or describe (rag/answer.py):
            # "the watermark paper" is not bound to one paper here, and "it" or "that
            # paper" is the last answer's paper, named in its place.
            pointed = _SINGULAR.search(question) if last and last.answer.cited else None
            if pointed and re.fullmatch(rf"it|(?:this|that) {NOUN}", pointed.group(1), re.I):
                first = last.answer.cited[min(last.answer.cited)]
                self._asked = f"{question[:pointed.start(1)]}{first.label}{question[pointed.end(1):]}"
            return self._asked or question, None
        described = description(question)
        if last is None:
            named = self._labelled(question, described)
            return (_with_labels(question, named), named) if named else (question, None)
        cited = [last.answer.cited[n] for n in sorted(last.answer.cited)]
        ordinal = _ORDINAL.search(question)
        if ordinal and cited:
            # After a list ("Which papers ...?", a comparison), "the second paper" is
            # its second; after questions about one paper each, it is the paper the
            # second of them was about.
            listed = is_survey(last.question) or bool(last.answer.table)
            pool = cited if listed else self._discussed()
            i = _ORDINALS[ordinal.group(1).lower()]
            if i > len(pool):
                where = "the last answer lists" if listed else "this conversation has been about"
                raise UsageError(f"{where} {len(pool)} paper{'s' * (len(pool) != 1)}; use [n] to name "
                                 f"one of {', '.join(f'[{self.number(e)}]' for e in pool)}")
            only = [pool[i - 1 if i > 0 else -1]]
            return _with_labels(question, only), only
        searched = next((t for t in reversed(self.turns) if t.searched), None)
        narrow, exclude = _NARROW.match(question), _EXCLUDE.match(question)
        if (narrow or exclude) and searched and searched.answer.retrieved:
            sub = _subtopic((narrow or exclude).group(1))
            if narrow:
                pool = [h.entry for h in searched.answer.retrieved]
                only = self.answerer.on_topic(sub, pool) if sub else []
                return f"{sub} {searched.query}", only or None
            drop_all = self.answerer.on_topic(sub, cited) if sub and cited else []
            # "Leave out the image one" drops one paper, the likeliest, though the
            # judge finds time series on "image" too.
            if not _PLURAL_NOUN.search(exclude.group(1)):
                drop_all = drop_all[:1]
            drop = {e.id for e in drop_all}
            only = [e for e in cited if e.id not in drop]
            return searched.query, only or None
        if described:
            # A described paper is one cited in this conversation only if the
            # description names it; else it is a new search, never the last answer,
            # and answered from one paper when one is described ("the X paper").
            named = [e for e in self.entries.values() if _names(described, e)] or self._labelled(question, described)
            if named:
                return _with_labels(question, named), named
            # "And the graph neural network approach?" after papers on simulating
            # fluids names no paper: that kind of approach to the topic the user is
            # on. "And the paper on X?" and "and what does the X paper do?" search anew.
            if not _APPROACH.match(question):
                return question, None
        plural = _PLURAL.search(question)
        # "both" is a reference when there were two or more ("do both use RL?"), not
        # in "models with both residue and atom structure" after one paper.
        if cited and plural and (plural.group(1).lower() != "both" or len(cited) > 1):
            return _with_labels(question, cited), cited
        if cited and _SINGULAR.search(question):
            return _with_labels(question, cited[:1]), cited[:1]
        if _FRAGMENT.match(question) or (len(question.split()) <= 3 and not _WH.match(question)):
            # "and for bandits?" extends the topic the user is on: the last search,
            # not a narrowing of it.
            base = searched or last
            query = f"{base.query} {question}"
            sub = _subtopic(_FRAGMENT.sub("", question))
            if is_survey(base.question) and sub:
                # After "Which papers use RL?", "and for bandits?" asks for the papers
                # on both; on the new topic alone when none is on both.
                pool = [h.entry for h in self.answerer.index.search(query, SURVEY.read)]
                on_sub = self.answerer.on_topic(sub, pool)
                both = self.answerer.on_topic(base.question, on_sub) if on_sub else []
                self._asked = f"Which papers study {sub}?"
                return query, (both or on_sub) or None
            return query, None
        return question, None

    def _labelled(self, question: str, described: str | None) -> list[Entry]:
        """"The restless bandits paper": the one entry retrieved for the question
        whose label the description names, though the judge may rank another first."""
        if not described or _PLURAL_NOUN.search(question):
            return []
        named = [h.entry for h in self.answerer.index.search(question, SURVEY.read) if _names(described, h.entry)]
        self._found = len(named) == 1  # a search that found its paper, as a searched turn
        return named if self._found else []

    def _discussed(self) -> list[Entry]:
        """The paper each turn was about (the one its answer cites first), in order."""
        out: dict[str, Entry] = {}
        for t in self.turns:
            first = next((n for s in t.answer.sentences for n in s.cites), None)
            if first in t.answer.cited:
                out.setdefault(t.answer.cited[first].id, t.answer.cited[first])
        return list(out.values())

    def ask(self, question: str, **callbacks) -> Turn:
        check_length(question)  # before resolving: "only ..." embeds the question
        self._asked, self._found = None, False
        query, only = self.resolve(question)
        # "compare [1] and [3]" reaches the model as "compare BiLLM and AnyTool".
        spelled = self._asked or _BRACKET.sub(lambda m: self.entry(int(m.group(1) or m.group(2))).label,
                                              question)
        answer = self.answerer.ask(spelled, self.k, query=query, only=only,
                                   number=self.number, **callbacks)
        answer.question = question
        turn = Turn(len(self.turns) + 1, question, query, answer, searched=only is None or self._found)
        self.turns.append(turn)
        return turn

    def references(self, only_cited: bool = True) -> str:
        cited = {n for t in self.turns for n in t.answer.cited} if only_cited else set(self.entries)
        return "\n".join(e.reference(n) for n, e in sorted(self.entries.items()) if n in cited)

    def transcript(self) -> str:
        """The conversation as Markdown with one reference list at the end."""
        parts = ["# Conversation with the collection", ""]
        for t in self.turns:
            parts += [f"## {t.n}. {t.question}", "", t.answer.text or "_(no answer)_", ""]
            if t.answer.refused and not t.answer.cited and t.answer.retrieved:
                # "... the closest entries are listed below": as the terminal lists them.
                parts += ["Closest entries:", ""] + [f"- {h.entry.citation()}" for h in t.answer.retrieved[:3]] + [""]
        parts += ["## References", ""]
        parts += [f"- {line}" for line in self.references().splitlines()]
        return "\n".join(parts) + "\n"

    def save(self, path: Path) -> None:
        try:
            path.write_text(self.transcript(), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror}; pick another path") from None


def _with_labels(question: str, entries: list[Entry]) -> str:
    """Name the referenced papers in the query so keyword search finds them too."""
    cleaned = " ".join(_BRACKET.sub("", question).split())
    return f"{cleaned} ({'; '.join(e.label for e in entries)})"
