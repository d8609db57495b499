"""Synthetic records (DATA_SPEC.md) -> labelled pairs for the judge, deterministically.

Every pair is (first, second, answers, about): ``first`` is a question or claim with
its task marker, ``second`` a passage of one abstract built exactly as the pipeline
builds it (rag/judge.py), ``answers`` 1 when the passage answers the question or
supports the claim, ``about`` 1 when the question is about the passage's paper
(-1: not defined, as for claims). Labels follow from how each record was written:

- answerable question x window holding all its evidence: answers 1, about 1;
  x window holding none of it: answers 0, about 1 (a window holding part is skipped);
- near-miss question x every window: answers 0, about 1;
- near-topic question x every window: answers 0, about 0;
- any question x windows of another record of the same field, sharing the most
  words with it: answers 0, about 0 (hard negatives across papers);
- a topic phrase as a survey question ("Which papers study X?") x the window
  holding the paper's first contribution sentence: answers 1, about 1; x another
  window: about 1 only; a close non-topic x that window: answers 0, about 0; the
  narrow topic x the closest paper of the same field: answers 0, about 0;
- supported claim x window holding its evidence: answers 1; x windows holding
  none of it: 0; unsupported claim x the window its twin is checked against: 0;
- single sentences as well as windows, since the pipeline also reads sentences.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from rag.judge import CLAIM, QUESTION, first_segment, passage, windows  # noqa: E402

RAW = Path(__file__).resolve().parent / "data" / "raw"
TOPICS = RAW.parent / "topics"
QUERIES = RAW.parent / "queries"
# How researchers ask for every paper on a topic (rag/text.py is_survey knows these).
SURVEY_FORMS = ("Which papers study {}?", "What work is there on {}?", "{}", "Are there papers about {}?",
                "papers on {}", "What has been done on {}?", "Which papers address {}, and how?")
VALIDATION_SHARE = 0.12
PER_QUESTION = 3  # negative windows per question: every window would be 50k pairs, hours of CPU  # of records, by a hash of the id: never trained on
_WORD = re.compile(r"[a-z][a-z0-9-]+")


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    answers: int
    about: int
    task: str  # what the pair tests, for per-task accuracy
    record: str


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_records(raw: Path = RAW) -> list[dict]:
    """The records, each with its topic labels ("topics", "not_topics") and its search
    questions ("searches", "siblings") when written."""
    topics = {t["id"]: t for p in sorted(TOPICS.glob("*.jsonl")) for t in _lines(p)}
    queries = {t["id"]: t for p in sorted(QUERIES.glob("*.jsonl")) for t in _lines(p)}
    out = []
    for path in sorted(raw.glob("*.jsonl")):
        for rec in _lines(path):
            out.append(rec | {k: topics.get(rec["id"], {}).get(k, []) for k in ("topics", "not_topics")}
                       | {k: queries.get(rec["id"], {}).get(k, []) for k in ("searches", "siblings")})
    return out


def is_validation(record_id: str) -> bool:
    h = int(hashlib.sha256(record_id.encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < VALIDATION_SHARE


def _name(rec: dict, rng: random.Random) -> str:
    # Seed entries often have no title: the model must not depend on one.
    return rec.get("title", "") if rng.random() < 0.5 else ""


def _spans(n: int) -> list[tuple[int, int]]:
    """The pipeline's windows plus every single sentence."""
    return sorted(set(windows(n)) | {(i, i + 1) for i in range(n)})


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def record_pairs(rec: dict, others: list[dict], rng: random.Random) -> list[Pair]:
    sents, rid = rec["sentences"], rec["id"]
    out: list[Pair] = []

    def add(kind: str, text: str, span: tuple[int, int], answers: int, about: int, task: str,
            source: dict = rec) -> None:
        s = source["sentences"]
        out.append(Pair(first_segment(kind, text), passage(_name(source, rng), s[span[0]:span[1]]),
                        answers, about, task, rid))

    spans = _spans(len(sents))
    # Hard negatives come from the other abstracts of the same field.
    same = [o for o in others if o["field"] == rec["field"] and o["id"] != rid] or others

    def some(candidates: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
        return rng.sample(candidates, min(n, len(candidates)))

    for q in rec["questions"]:
        t = q["type"]
        if t in ("direct", "paraphrase"):
            ev = set(q["evidence"])
            covering = [sp for sp in spans if ev <= set(range(*sp))]
            if not covering:  # evidence further apart than a window: read it joined
                add(QUESTION, q["q"], (min(ev), max(ev) + 1), 1, 1, f"q-{t}")
            for sp in some(covering, 2):
                add(QUESTION, q["q"], sp, 1, 1, f"q-{t}")
            for sp in some([sp for sp in spans if not ev & set(range(*sp))], PER_QUESTION):
                add(QUESTION, q["q"], sp, 0, 1, "q-other-window")
        elif t == "near_miss":
            for sp in some(spans, PER_QUESTION + 1):
                add(QUESTION, q["q"], sp, 0, 1, "q-near-miss")
        elif t == "near_topic":
            for sp in some(spans, PER_QUESTION):
                add(QUESTION, q["q"], sp, 0, 0, "q-near-topic")
        # Hard negatives: the same-field abstract that shares the most words.
        qw = _words(q["q"])
        pool = sorted(same, key=lambda o: -len(qw & _words(" ".join(o["sentences"]))))[:3]
        other = rng.choice(pool)
        ospans = windows(len(other["sentences"]))
        add(QUESTION, q["q"], rng.choice(ospans), 0, 0, "q-other-paper", other)

    # Survey questions: the question is about every paper on its topic, and the
    # window that says what the paper contributes answers it; another window may or
    # may not show the topic, so there "answers" is not defined.
    roles = rec.get("roles", [])
    first = roles.index("contribution") if "contribution" in roles else 0
    shows = [sp for sp in windows(len(sents)) if sp[0] <= first < sp[1]]
    for topic in rec.get("topics", []):
        form = rng.choice(SURVEY_FORMS).format(topic)
        add(QUESTION, form, rng.choice(shows), 1, 1, "q-topic")
        add(QUESTION, form, rng.choice(spans), -1, 1, "q-topic-any")
    for topic in rec.get("not_topics", []):
        add(QUESTION, rng.choice(SURVEY_FORMS).format(topic), rng.choice(shows), 0, 0, "q-not-topic")
    # The narrow topic (the third) against the closest paper of the same field: the
    # writers never put two papers on one narrow problem, so it is not about that one.
    if len(rec.get("topics", [])) >= 3:
        narrow = rec["topics"][2]
        nw = _words(narrow + " " + " ".join(sents))
        other = max(same, key=lambda o: len(nw & _words(" ".join(o["sentences"]))))
        ospans = windows(len(other["sentences"]))
        add(QUESTION, rng.choice(SURVEY_FORMS).format(narrow), rng.choice(ospans), 0, 0,
            "q-topic-other-paper", other)

    claims = rec["claims"]
    checked_on: dict[int, tuple[int, int]] = {}
    for i, c in enumerate(claims):
        if c["label"] != "supported":
            continue
        ev = set(c["evidence"])
        covering = [sp for sp in windows(len(sents)) if ev <= set(range(*sp))]
        span = rng.choice(covering) if covering else (min(ev), max(ev) + 1)
        checked_on[i] = span
        add(CLAIM, c["claim"], span, 1, -1, f"c-{c.get('kind', 'paraphrase')}")
        if len(ev) == 1:
            add(CLAIM, c["claim"], (min(ev), min(ev) + 1), 1, -1, f"c-{c.get('kind', 'paraphrase')}")
        far = [sp for sp in windows(len(sents)) if not ev & set(range(*sp))]
        if far:
            add(CLAIM, c["claim"], rng.choice(far), 0, -1, "c-other-window")
    for c in claims:
        if c["label"] != "unsupported":
            continue
        twin = c.get("edits", -1)
        if twin in checked_on:
            span = checked_on[twin]
        else:  # edits a sentence: the window around the sentence it shares most words with
            cw = _words(c["claim"])
            best = max(range(len(sents)), key=lambda j: len(cw & _words(sents[j])))
            span = next(sp for sp in windows(len(sents)) if sp[0] <= best < sp[1])
        add(CLAIM, c["claim"], span, 0, -1, f"c-{c['kind']}")
    return out


QUERY_TASKS = ("q-search", "q-sibling")  # the tasks of query_pairs


def query_pairs(rec: dict, rng: random.Random) -> list[Pair]:
    """Pairs of a record's search questions and their siblings (QUERIES_BRIEF.md):

    - search x a window holding its evidence: answers 1, about 1; x a window holding
      none of it: about 1 only (a search asks for the paper as a whole, and another
      window may show it too). No pair with another paper: a search is broad enough
      that one of the same field may answer it.
    - sibling (one central element swapped) x the window its search is answered by,
      and x one other: answers 0, about 0 (two, not more: a sibling is one negative
      of many in the data already, and its contrast is with its search's window).
    """
    sents, rid = rec["sentences"], rec["id"]
    spans = _spans(len(sents))
    out: list[Pair] = []

    def add(text: str, span: tuple[int, int], answers: int, about: int, task: str) -> None:
        out.append(Pair(first_segment(QUESTION, text), passage(_name(rec, rng), sents[span[0]:span[1]]),
                        answers, about, task, rid))

    answered_on: dict[int, tuple[int, int]] = {}
    for i, s in enumerate(rec.get("searches", [])):
        ev = set(s["evidence"])
        covering = [sp for sp in spans if ev <= set(range(*sp))] or [(min(ev), max(ev) + 1)]
        for sp in rng.sample(covering, min(2, len(covering))):
            add(s["q"], sp, 1, 1, f"q-search-{s['style']}")
        answered_on[i] = rng.choice(covering)
        far = [sp for sp in spans if not ev & set(range(*sp))]
        if far:
            add(s["q"], rng.choice(far), -1, 1, "q-search-any")
    for s in rec.get("siblings", []):
        twin = answered_on.get(s["from"])
        rest = [sp for sp in spans if sp != twin]
        for sp in ([twin] if twin else []) + rng.sample(rest, min(1, len(rest))):
            add(s["q"], sp, 0, 0, "q-sibling")
    return out


TOPIC_TASKS = ("q-topic", "q-not-topic")  # the survey tasks: record_pairs' and topic_pairs'
# Words that name no topic by themselves: "security of machine learning" and a paper
# that says "learning" share nothing a reader files papers under.
_GENERIC = frozenset("""learning machine model models neural network networks deep data method methods
approach approaches based using large via towards toward new study studies analysis system systems
problem problems task tasks""".split())


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if len(w) > 2} - {"the", "and", "for", "with", "from"}


@lru_cache(maxsize=None)
def _record_stems(text: str) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(_stems(text)), frozenset(_words(text))


def topic_pairs(rec: dict, records: list[dict], rng: random.Random) -> list[Pair]:
    """A record's topics read against other papers (the survey membership the
    pipeline asks of every retrieved entry):

    - x a paper one of whose own topics holds every word of it ("reinforcement
      learning" x a paper filed under "offline reinforcement learning"): answers 1,
      about 1, on the window with that paper's first contribution sentence;
    - x a paper of the same field group that shares none of its telling words (not
      "learning", "models" ...) in its text, field or topics, the one sharing most of
      the record's own words (a hard negative), and x such a paper of another group:
      answers 0, about 0, on its contribution window and on one other window.
    A paper that shares some telling words without holding the topic is left out:
    a reader might file it under the topic or not.
    """
    group = rec["id"].split("-")[0]
    rw = _record_stems(" ".join(rec["sentences"]))[1]
    own = {o["id"]: [_record_stems(t)[0] for t in o.get("topics", [])] for o in records}
    out: list[Pair] = []

    def shows(o: dict) -> list[tuple[int, int]]:
        roles = o.get("roles", [])
        first = roles.index("contribution") if "contribution" in roles else 0
        return [sp for sp in windows(len(o["sentences"])) if sp[0] <= first < sp[1]]

    def add(topic: str, o: dict, span: tuple[int, int], label: int, task: str) -> None:
        out.append(Pair(first_segment(QUESTION, rng.choice(SURVEY_FORMS).format(topic)),
                        passage(_name(o, rng), o["sentences"][span[0]:span[1]]), label, label, task, rec["id"]))

    for topic in rec.get("topics", []):
        stems = _stems(topic)
        telling = stems - _GENERIC
        if not telling:
            continue
        holds, disjoint = [], []
        for o in records:
            if o["id"] == rec["id"] or not o.get("topics"):
                continue
            if any(stems <= t for t in own[o["id"]]):
                holds.append(o)
            elif not telling & _record_stems(" ".join(o["sentences"] + o["topics"] + [o["field"]]))[0]:
                disjoint.append(o)
        if holds:
            o = rng.choice(holds)
            add(topic, o, rng.choice(shows(o)), 1, "q-topic-shared")
        near = [o for o in disjoint if o["id"].split("-")[0] == group]
        far = [o for o in disjoint if o["id"].split("-")[0] != group]
        picks = ([max(near, key=lambda o: len(rw & _record_stems(" ".join(o["sentences"]))[1]))] if near else []) + \
            ([rng.choice(far)] if far else [])
        for o in picks:
            add(topic, o, rng.choice(shows(o)), 0, "q-topic-other-field" if o in far else "q-topic-unrelated")
            add(topic, o, rng.choice(windows(len(o["sentences"]))), 0,
                "q-topic-other-field" if o in far else "q-topic-unrelated")
    return out


def build(records: list[dict], seed: int = 13, queries: bool = True,
          topics: bool = False) -> tuple[list[Pair], list[Pair]]:
    """(train, validation) pairs; the split is by record, so no abstract is in both.
    The search-question pairs come after the rest from their own random stream, so
    the other pairs are the same with or without them (shuffled in another order)."""
    rng = random.Random(seed)
    train, val = [], []
    for rec in records:
        (val if is_validation(rec["id"]) else train).extend(record_pairs(rec, records, rng))
    if queries:
        qrng = random.Random(seed + 1)
        for rec in records:
            (val if is_validation(rec["id"]) else train).extend(query_pairs(rec, qrng))
    if topics:
        trng = random.Random(seed + 2)
        for rec in records:
            (val if is_validation(rec["id"]) else train).extend(topic_pairs(rec, records, trng))
    rng.shuffle(train)
    return train, val


if __name__ == "__main__":
    from collections import Counter

    tr, va = build(load_records())
    print(f"{len(tr)} train pairs, {len(va)} validation pairs")
    for name, ps in (("train", tr), ("validation", va)):
        c = Counter((p.task, p.answers) for p in ps)
        print(name, ", ".join(f"{t}:{a}={n}" for (t, a), n in sorted(c.items())))
