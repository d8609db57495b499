"""Cited summaries for a literature review: `rag review "TOPIC"`.

Retrieve broadly, keep the entries the judge (rag/judge.py) reads as being on the
topic (as it reads "Which papers study TOPIC?"), group them
into themes by their embeddings (average-linkage merging of the entries' mean chunk
vectors, cut where each paper is closest to its own group from six papers on;
each theme named by the phrase its members share that is closest to them in
meaning; in shorter reviews single papers go under "Other papers"), and say of
each paper what it contributes and what it found: the model's statements that pass
the same check as `rag ask`'s, else the approach its research-table row quotes
(rag/compare.py), then its main result quoted. A sentence that addresses a reader or
a model is never written into a review.
References and BibTeX come from stored metadata only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import compare
from .answer import QUOTE_WORDS, REFUSE_BELOW, SAME_WORDS, Answerer, Sentence, _overlap, without_lead_in
from .judge import QUESTION
from .bibtex import citation_keys, to_bibtex
from .lexical import terms
from .query import check_length
from .records import Entry, Hit
from .safety import strip_control
from .text import URL, words

REVIEW_POOL = 30  # entries retrieved, then read by the judge
# A review keeps the papers the judge is sure are on the topic (fused probability,
# rag/answer.py), or the likely ones when it is sure of none. A review reads three
# times the entries a "Which papers ...?" answer reads, so the answer's threshold
# (0.2) let in 26-51% papers off the topic per topic set; these two were picked on
# the tuning topics (eval/topics.jsonl, topics-holdout, topics-holdout2) with recall
# - 2 x the off-topic share as the aim (bench/review.py --membership; README, "Reviews").
REVIEW_SURE = 0.85
REVIEW_LIKELY = 0.5
THEME_SIMILARITY = 0.45  # average cosine above which two groups form one theme
MIN_THEMED = 6  # papers from which a review is always split into themes
MAX_THEMES = 4
# Papers whose statements the model writes before a review stops asking it when none
# passed: SmolLM2-135M's passed for 0 of 36 papers on eval/topics.jsonl, where the
# model was 70% of a review's time (bench/review.py).
WRITE_TRIES = 3


@dataclass
class Relation:
    """A sentence that relates a theme's papers: a frame the code owns around what
    each paper says in its own words, every paper cited where it is named."""

    frame: str  # "{papers} all address …", or the lead before a list of quotes
    papers: list[tuple[Entry, str]]  # each paper with its quoted words ("" when none)
    others: list[Entry] = field(default_factory=list)  # named by "{others}"
    verbs: list[str] = field(default_factory=list)  # "proposes", before each paper's quote

    def render(self, mark: Callable[[Entry], str]) -> str:
        def named(e: Entry) -> str:
            return f"{strip_control(e.label)[0]} {mark(e)}"

        def listed(es: list[Entry]) -> str:
            names = [named(e) for e in es]
            return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]

        if "{papers}" in self.frame:
            return self.frame.format(papers=listed([e for e, _ in self.papers]),
                                     others=listed(self.others) if self.others else "")
        verbs = self.verbs or [":"] * len(self.papers)
        return self.frame + " " + "; ".join(f"{named(e)}{'' if v == ':' else ' '}{v} “{q}”"
                                            for (e, q), v in zip(self.papers, verbs)) + "."


@dataclass
class Theme:
    name: str
    entries: list[Entry]
    relations: list[Relation] = field(default_factory=list)


@dataclass
class Review:
    topic: str
    refused: bool = False
    themes: list[Theme] = field(default_factory=list)
    statements: dict[str, list[Sentence]] = field(default_factory=dict)  # entry id -> sentences
    numbers: dict[str, int] = field(default_factory=dict)  # entry id -> [n]
    closest: list[Hit] = field(default_factory=list)
    # Sentences of the entries read that address a reader or a model, never used.
    withheld: list[tuple[Entry, str]] = field(default_factory=list)
    table: list[compare.Row] = field(default_factory=list)  # the research table, by [n]

    @property
    def cited(self) -> list[Entry]:
        """Every reviewed entry, in citation-number order (each is cited once)."""
        return sorted((e for t in self.themes for e in t.entries if e.id in self.numbers),
                      key=lambda e: self.numbers[e.id])

    def keys(self) -> dict[str, str]:
        return citation_keys(self.cited)

    def markdown(self, cite_style: str = "numeric", table: bool = True) -> str:
        # Labels and titles are stored text: no control character reaches a terminal
        # or a file from here.
        return strip_control(self._markdown(cite_style, table))[0]

    def csv(self) -> str:
        return compare.to_csv(self.table, self.keys())

    def _markdown(self, cite_style: str, table: bool) -> str:
        keys = self.keys()

        def mark(entry: Entry) -> str:
            return f"[@{keys[entry.id]}]" if cite_style == "pandoc" else f"[{self.numbers[entry.id]}]"

        lines = [f"# {self.topic}: a review of the collection", ""]
        if self.refused:
            lines += ["The collection does not cover this topic. The closest entries are:", ""]
            lines += [f"- {h.entry.label} — {h.entry.source.path} #{h.entry.source.ordinal} "
                      f"(relevance {h.score:.2f})" for h in self.closest]
            return "\n".join(lines) + "\n"
        n = len(self.cited)
        names = "; ".join(f"{t.name} ({len(t.entries)})" for t in self.themes)
        # "Found", not "holds": the search finds 52-77% of a topic's papers on the
        # topic sets (bench/review.py --membership), so a count is no census.
        lines += [f"Found {n} paper{'s' if n != 1 else ''} in the collection on this topic"
                  f"{', in ' + str(len(self.themes)) + ' themes: ' + names if len(self.themes) > 1 else ''}.", ""]
        for t in self.themes:
            lines += [f"## {t.name}", ""]
            if t.relations:
                lines += [" ".join(r.render(mark) for r in t.relations), ""]
            for e in t.entries:
                body = " ".join(s.render(mark(e)) for s in self.statements[e.id])
                lines += [f"- **{e.label}** — {body}"]
            lines.append("")
        if table and self.table:
            lines += ["## Research table", "", "Each cell quotes the paper's abstract.", ""]
            lines += compare.markdown(self.table, mark) + [""]
        lines += ["## References", ""]
        if cite_style != "pandoc":  # pandoc --citeproc writes the list itself
            lines += [f"- {e.reference(self.numbers[e.id])}" for e in self.cited]
        return "\n".join(lines) + "\n"

    def bibtex(self) -> str:
        return to_bibtex(self.cited, self.keys())

    def to_json(self, cite_style: str = "numeric") -> dict:
        return {
            "topic": self.topic,
            "themes": [{"name": t.name, "entries": [e.id for e in t.entries],
                        "synthesis": [r.render(lambda e: f"[{self.numbers[e.id]}]") for r in t.relations]}
                       for t in self.themes],
            "markdown": self.markdown(cite_style),
            "citations": [{"n": self.numbers[e.id], **e.to_json()} for e in self.cited],
            "refused": self.refused,
            "suspicious": len(self.withheld),
            "table": [{"id": r.entry.id, **r.cells} for r in self.table],
        }


def _merges(sims: np.ndarray) -> list[tuple[list[list[int]], float]]:
    """Average-linkage agglomerative grouping by cosine similarity (tiny n): every
    partition from singletons to one group, each with the similarity of the merge
    that ends it."""
    clusters = [[i] for i in range(len(sims))]
    out = []
    while len(clusters) > 1:
        best, pair = -2.0, (0, 1)
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                s = float(sims[np.ix_(clusters[a], clusters[b])].mean())
                if s > best:
                    best, pair = s, (a, b)
        out.append(([list(c) for c in clusters], best))
        a, b = pair
        clusters[a] = clusters[a] + clusters.pop(b)
    return out + [(clusters, -2.0)]


def _attach(clusters: list[list[int]], sims: np.ndarray) -> list[list[int]]:
    """Each single paper joins the group of two or more it is closest to on average."""
    groups = [list(c) for c in clusters if len(c) > 1]
    for c in clusters:
        if len(c) == 1:
            max(groups, key=lambda g: float(sims[c[0], g].mean())).append(c[0])
    return groups


def _silhouette(clusters: list[list[int]], sims: np.ndarray) -> float:
    dist, of = 1.0 - sims, {i: k for k, c in enumerate(clusters) for i in c}
    total = 0.0
    for i, k in of.items():
        if len(clusters[k]) > 1:
            a = float(dist[i, [j for j in clusters[k] if j != i]].mean())
            b = min(float(dist[i, c].mean()) for m, c in enumerate(clusters) if m != k)
            total += (b - a) / max(a, b, 1e-9)
    return total / len(of)


def group(entries: list[Entry], vectors: np.ndarray, threshold: float = THEME_SIMILARITY) -> list[list[int]]:
    """Papers grouped by their vectors. Under MIN_THEMED papers, groups merge while
    their average similarity is above ``threshold`` (a paper alike no other stays
    alone). From MIN_THEMED on, a reader expects themes whatever the threshold says:
    the cut into 2 to MAX_THEMES groups of two or more whose papers are closest to
    their own group against the others (silhouette), every paper in a group."""
    sims = vectors @ vectors.T
    merges = _merges(sims)
    if len(entries) < MIN_THEMED:
        clusters = next(c for c, s in merges if s < threshold)
    else:
        cuts = [_attach(c, sims) for c, _ in merges
                if sum(len(g) > 1 for g in c) >= 2]
        cuts = [c for c in cuts if len(c) <= MAX_THEMES] or [merges[-1][0]]
        clusters = max(cuts, key=lambda c: (_silhouette(c, sims), -len(c)))
    return sorted(clusters, key=lambda c: (-len(c), min(c)))


def themes(entries: list[Entry], vectors: np.ndarray, clusters: list[list[int]], topic: str,
           idf: Callable[[str], float], embed: Callable[[list[str]], np.ndarray]) -> list[Theme]:
    """Groups of two or more papers become named themes and single papers go under
    "Other papers"; with fewer than two such groups the review is one group headed
    by the topic (a theme of one paper names nothing but that paper)."""
    groups = [c for c in clusters if len(c) > 1]
    if len(groups) < 2:
        return [Theme(topic[:1].upper() + topic[1:], entries)]
    rest = [entries[i] for c in clusters if len(c) == 1 for i in c]
    named = [Theme(theme_name([entries[i] for i in c], vectors[c], vectors, topic, idf, embed),
                   [entries[i] for i in c]) for c in groups]
    return named + ([Theme(OTHERS, rest)] if rest else [])


# A word in more than a quarter of the abstracts ("learning", "results") names no
# theme: its idf is under log(1 + 3).
GENERIC_IDF = math.log(4)
# A name is a noun phrase: it does not end on an adjective ("graph neural",
# "generative adversarial", "molecular"), told by its suffix, nor consist of words
# that praise or hedge rather than name ("state-of-the-art", "novel").
_ADJECTIVE = re.compile(r"(?:al|ic|ive|ous|ary|ar|able|ible|less|ful|ant|ent|istic|[^e]ed)$")
_NOT_NAMES = frozenset("""state-of-the-art novel existing various different new large small high low
deep stochastic efficient effective recent previous prior current significant strong weak
robust simple general specific key main multiple several many based propose proposed
outperform achieve improve show demonstrate provide enable establish made unique
one two three four five six seven eight nine ten first second third""".split())
# Words that name a theme only inside a phrase ("language models", not "models").
_VAGUE = frozenset("""impact prediction output example position standard online addition rule
setting problem method approach framework task model result paper work study probability
information data performance training processing""".split())
# One word names a theme only when it is rare in the collection (a tenth of the
# abstracts at most) and half the theme's papers use it: "weight" or "addition"
# alone name nothing.
RARE_IDF = math.log(10)


def _nameable(phrase: tuple[str, ...]) -> bool:
    last = phrase[-1]
    return not (_ADJECTIVE.search(last) or last in _NOT_NAMES or phrase[0] in _NOT_NAMES
                or len(phrase) == 1 and last in _VAGUE)


def theme_name(members: list[Entry], vectors: np.ndarray, everyone: np.ndarray, topic: str,
               idf: Callable[[str], float], embed: Callable[[list[str]], np.ndarray]) -> str:
    """The noun phrase of one to three words, shared by at least a third of the
    members (two at least), that is closest in meaning to the members and least to
    the other reviewed papers, favouring one more members share; the topic's own
    words and words common in the collection are left out."""
    skip = set(terms(topic))
    need = max(2, math.ceil(len(members) / 3))
    surface: dict[tuple[str, ...], str] = {}
    holders: dict[tuple[str, ...], set[int]] = {}
    for m, e in enumerate(members):
        toks: list[str | None] = []
        raw = words(URL.sub(" ", e.text))  # "https github.com" names no theme
        for w in raw:
            t = terms(w)[:1]
            ok = bool(t) and len(t[0]) > 3 and not t[0].isdigit() and not t[0].endswith("ly")
            toks.append(t[0] if ok else None)
        for n in (1, 2, 3):
            for i in range(len(toks) - n + 1):
                p = tuple(toks[i:i + n])
                if all(p) and _nameable(p):
                    holders.setdefault(p, set()).add(m)
                    surface.setdefault(p, " ".join(raw[i:i + n]))
    phrases = [p for p, who in holders.items()
               if len(who) >= need and any(t not in skip and idf(t) >= GENERIC_IDF for t in p)
               and (len(p) > 1 or idf(p[0]) >= RARE_IDF and 2 * len(who) >= len(members))]
    if not phrases:  # named by its papers when they are few, so that two such themes differ
        labels = [strip_control(e.label)[0] for e in members]
        if len(labels) > 3:
            return "Related papers"
        name = ", ".join(labels[:-1]) + " and " + labels[-1]
        return name[:1].upper() + name[1:]
    centre, rest = vectors.mean(0), everyone.mean(0)
    fit = embed([surface[p] for p in phrases]) @ np.stack(
        [centre / np.linalg.norm(centre), rest / np.linalg.norm(rest)]).T
    share = np.array([len(holders[p]) / len(members) for p in phrases])
    name = surface[phrases[int(np.argmax(fit[:, 0] - 0.5 * fit[:, 1] + 0.2 * share))]]
    return name[:1].upper() + name[1:]


def read_topic(answerer: Answerer, topic: str, k: int | None = None) -> tuple[list[tuple[Hit, float]], list[Hit], list]:
    """The entries retrieved for ``topic`` with the probability that each is on it
    (the judge's reading of "Which papers study TOPIC?" fused with retrieval), best
    first; all that retrieval found; and the sentences withheld from them."""
    found = answerer.index.search(topic, max(k or REVIEW_POOL, 1))
    hits, withheld = answerer.readable([h for h in found if h.score >= REFUSE_BELOW])
    q = answerer.analyse(f"Which papers study {topic}?")
    readings = answerer.read(QUESTION, q.text, [h.entry for h in hits])
    return answerer.rank(q, hits, readings), found, withheld


def members(scored: list[tuple[Hit, float]], sure: float = REVIEW_SURE, likely: float = REVIEW_LIKELY) -> list[Hit]:
    return [h for h, p in scored if p >= sure] or [h for h, p in scored if p >= likely]


def review(answerer: Answerer, topic: str, k: int | None = None,
           progress: Callable[[int | None, str], None] | None = None) -> Review:
    """``progress(total, label)`` announces the number of papers, then each paper."""
    check_length(topic, "topic", 'give a few words, e.g. rag review "bandit algorithms"')
    index = answerer.index
    rv = Review(topic=topic)
    scored, found, rv.withheld = read_topic(answerer, topic, k)
    kept = members(scored)
    if not kept:
        rv.refused, rv.closest = True, found[:5]
        return rv
    entries = [h.entry for h in kept]
    vectors = index.store.entry_vectors([e.id for e in entries])
    rv.themes = themes(entries, vectors, group(entries, vectors), topic, index.lexical().idf,
                       index.embedder.encode)
    question = answerer.analyse(f"What does this paper propose or show about {topic}?")
    if progress:
        progress(len(entries), "")
    rows = {e.id: compare.row(e, answerer.sentences(e), answerer.fit) for e in entries}
    tried = written = 0
    for theme in rv.themes:
        for e in theme.entries:
            if progress:
                progress(None, e.label)
            n = rv.numbers.setdefault(e.id, len(rv.numbers) + 1)
            # The model's statement is most of a paper's time, and a model whose first
            # WRITE_TRIES all fail the check is not tried on the rest: they are quoted.
            write = tried < WRITE_TRIES or written > 0
            said = answerer.evidence(e, n, question, quotes=0, write=write,
                                     prompt=("review.user", {"topic": topic})) if write else []
            tried += write
            written += any(s.status == "verified" for s in said)
            rv.statements[e.id] = statements(said, rows[e.id], answerer.sentences(e), n) or answerer.evidence(
                e, n, question, quotes=0, write=False)
    rv.table = [rows[e.id] for e in rv.cited]
    for theme in rv.themes:
        if len(theme.entries) > 1 and theme.name != OTHERS:
            theme.relations = relate(theme, [rows[e.id] for e in theme.entries], answerer)
    return rv


def statements(said: list[Sentence], row: compare.Row, sentences: list[str], n: int) -> list[Sentence]:
    """What a review says of paper [n]: the model's verified statements, else the
    sentence its table row quotes as its approach; then the one it quotes as its main
    result, unless a statement already gives it. Whole, as answers quote, where a
    table cell is cut shorter."""
    out = [s for s in said if s.status == "verified"]
    parts = ("result",) if out else ("approach", "result")
    for col in parts:
        if col not in row.sources:
            continue
        text = without_lead_in(compare.cut(sentences[row.sources[col]], QUOTE_WORDS))
        if not any(_overlap(text, s.text) >= SAME_WORDS for s in out):
            out.append(Sentence(text, [n], "quoted"))
    return out


OTHERS = "Other papers"
# What kind of results a paper reports, from its whole abstract: proved (and not
# measured), or measured (and not proved); a paper that does both is in neither.
# Digits do not tell them apart: "$\varepsilon>0$" is no measurement, and "raise the
# lower bound from 0.4598 to 0.9452" is no proof.
_THEORY = re.compile(r"\\mathcal\{O\}|\b(?:we (?:prove|derive|establish)|prove[sn]?\b|provabl\w*|proofs?\b|"
                     r"theorems?\b|minimax|regret bounds?|convergence rates?|"
                     r"theoretical(?:ly)? (?:guarantee|analysis|result)s?)", re.I)


def _phrase_in(phrase: tuple[str, ...], sentences: list[str]) -> bool:
    n = len(phrase)
    for s in sentences:
        t = terms(s)
        if any(tuple(t[i:i + n]) == phrase for i in range(len(t) - n + 1)):
            return True
    return False


def _role(row: compare.Row, column: str, answerer: Answerer) -> str:
    """The role (rag/roles.py) of the sentence a table cell quotes; "" for none."""
    i = row.sources.get(column)
    return "" if i is None else answerer.roles(row.entry)[i]


# Where the phrase a paper proposes ends: at a clause or an aside ("we propose
# [an online policy MIN-UCB], which outperforms UCB ...").
_CLAUSE = re.compile(r"[,:;]|\s(?:which|that|where|whose|while|whereas)\s")
PROPOSAL_WORDS = 14
_LEANS = re.compile(r"\s(?:to|for|with|that|in order to)\s(?=(?:\S+\s){0,5}?(?:them|it|they|their|its|these|those)\b)", re.I)
_VERB = re.compile(r"(propose|introduce|present|develop|design|devise)s?\b", re.I)


def proposal(sentence: str) -> tuple[str, str] | None:
    """The verb and the noun phrase of what a contribution sentence proposes ("we
    develop [a novel reinforcement learning algorithm with two key contributors]: …"
    gives "develops" and the bracketed words); None when the sentence does not
    introduce a method of its own ("we propose …", not "we study …"), or qualifies
    it, or the phrase is a single word."""
    m = compare.INTRODUCES.search(sentence)
    if not m or compare.QUALIFIER.search(sentence[:m.start()]):
        return None
    rest = sentence[m.end():].lstrip()
    # A relative clause ends the phrase only once it names something ("a framework
    # that …" says nothing before "that").
    end = next((b for b in _CLAUSE.finditer(rest)
                if b.group(0) in ",:;" or len(rest[:b.start()].split()) >= 3), None)
    phrase = rest[:end.start()] if end else rest
    # A bare name ("we propose *online cascade learning*, the first approach to ...")
    # says what it is in the apposition after it.
    if end and rest[end.start():end.start() + 2] == ", " and len(phrase.split()) <= 4:
        after = rest[end.end():].lstrip()
        if re.match(r"(?:a|an|the)\s", after, re.I):
            more = _CLAUSE.search(after)
            phrase = f"{phrase}, {after[:more.start()] if more else after}"
    # "… a splitting search to group and binarize them": the pronoun's referent is
    # in another sentence, so the phrase stops before the words that lean on it.
    lean = _LEANS.search(phrase)
    if lean:
        phrase = phrase[:lean.start()]
    ws = phrase.rstrip(" .").split()
    if len(ws) < 2 or ws[0].lower() == "to":  # "we propose to understand CLIP ..." names no method
        return None
    verb = _VERB.search(m.group(0)).group(1).lower() + "s"
    return verb, " ".join(ws[:PROPOSAL_WORDS]) + (" …" if len(ws) > PROPOSAL_WORDS else "")


def _named_once(label: str, verb: str, phrase: str) -> tuple[str, str]:
    """What a paper proposes, without its own name again: "GiLOT [1] proposes
    “GiLOT that leverages Optimal Transport …”" becomes "GiLOT [1] leverages
    “Optimal Transport …”", and "AnyTool [5] introduces “AnyTool, a large language
    model agent …”" becomes "AnyTool [5] is “a large language model agent …”"."""
    m = re.match(rf"([*_]?){re.escape(label)}\1(?:,\s+(?=(?:a|an|the)\s)|\s+(?:that|which)\s+(\w+s)\s+)", phrase)
    return ((m.group(2) or "is"), phrase[m.end():]) if m and len(phrase[m.end():].split()) >= 2 else (verb, phrase)


def relate(theme: Theme, rows: list[compare.Row], answerer: Answerer) -> list[Relation]:
    """Two or three sentences that relate a theme's papers, all from their own words:
    what they share (the theme's name, where each paper states it outside its
    background), how their approaches differ (what each proposes, quoted), and what
    kind of result each reports (proved against measured)."""
    out: list[Relation] = []
    phrase = tuple(t for w in theme.name.split() for t in terms(w)[:1])
    sharing = [e for e in theme.entries if phrase and _phrase_in(
        phrase, [s for s, r in zip(answerer.sentences(e), answerer.roles(e)) if r != "background"])]
    # One word shared is too often a word and not a subject ("Diversity Control"
    # and motor control are not one theme).
    if len(sharing) >= 2 and len(phrase) > 1:
        everyone = "all " if len(sharing) == len(theme.entries) else ""
        out.append(Relation(f"{{papers}} {everyone}address {theme.name.lower()}.",
                            [(e, "") for e in sharing]))
    # A cell is quoted here only when its sentence plays the column's part in the
    # abstract (the tagger's role), since a frame that says "approach" vouches for it.
    def source(r: compare.Row, column: str) -> str:
        return answerer.sentences(r.entry)[r.sources[column]]

    # What each proposes, as the short phrase after its verb: the bullets below
    # quote the whole sentence, and a synthesis that quoted it too only repeated them.
    approaches = [(r.entry, *_named_once(strip_control(r.entry.label)[0], *found)) for r in rows
                  if _role(r, "approach", answerer) in ("contribution", "method")
                  and (found := proposal(source(r, "approach")))]
    if len(approaches) >= 2:
        out.append(Relation("They differ in approach:", [(e, phrase) for e, _, phrase in approaches],
                            verbs=[verb for _, verb, _ in approaches]))
    # (proves, measures) per paper, read once from its whole abstract; the results
    # themselves are the bullets'.
    kind = {r.entry.id: (bool(_THEORY.search(t)), bool(compare.MEASURED.search(t)))
            for r in rows for t in [" ".join(answerer.sentences(r.entry))]}
    proved = [r.entry for r in rows if kind[r.entry.id] == (True, False)]
    measured = [r.entry for r in rows if kind[r.entry.id] == (False, True)]
    if proved and measured:
        out.append(Relation(f"{{papers}} {'prove' if len(proved) > 1 else 'proves'} {'their' if len(proved) > 1 else 'its'} "
                            f"results, while {{others}} {'measure' if len(measured) > 1 else 'measures'} "
                            f"{'theirs' if len(measured) > 1 else 'its'}.",
                            [(e, "") for e in proved], measured))
    elif len(proved) >= 2:
        out.append(Relation("{papers} prove their results rather than measure them.", [(e, "") for e in proved]))
    return out
