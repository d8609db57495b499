"""What a paper is, in the columns researchers compare papers by: the problem it
addresses, its approach, its main result and its data or setting.

Each cell is the paper's own sentence that best fills the column, so every cell is
a quote and cannot misstate the paper. What a sentence does in its abstract (the
role tagger, rag/roles.py) leads; the words abstracts mark each part with and the
judge's (rag/judge.py) reading of the column's question add to it. Problem,
approach and result each take a sentence no other took, except that an abstract
opening with its method ("We propose X, a method that improves Y") states its
problem in that sentence, which fills both columns; the setting is often named
in the result's sentence, so it may share one and then shows the words around its
data. Long sentences are cut at a clause boundary and marked "…"; a column no
sentence fills says so rather than guess.

The weights and thresholds were set against a reader's cells for the 57 seed
abstracts (``eval/table.jsonl``; ``python bench/table.py``), and checked on a set
of abstracts written for the check and not looked at while setting them
(``--blind``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

import numpy as np

from . import roles
from .records import Entry
from .text import URL, content_words

# Column -> the question its cell answers ({name}: the paper's title or method).
COLUMNS = {
    "problem": "What problem does {name} address?",
    "approach": "What method or approach does {name} propose?",
    "result": "What are the main results of {name}, with numbers?",
    "setting": "On which data, benchmarks or setting is {name} evaluated?",
}
HEADERS = {"problem": "Problem", "approach": "Approach", "result": "Main result",
           "setting": "Data / setting"}
# Score under which no sentence fills the column.
FILLS = {"problem": 0.2, "approach": 0.3, "result": 0.3, "setting": 0.5}
JUDGE = 0.5  # weight of the judge's reading of the column's question
# The gap a paper takes on ("however", "remains unclear", "is costly"): a field's
# opening sentence without one is background, not the paper's problem.
GAP = re.compile(r"\b(?:however|yet|but|despite|although|remains?|challeng\w*|limitations?|limited|"
                 r"struggl\w*|fail\w*|lacks?|lacking|suffers?|costly|expensive|difficult\w*|"
                 r"bottlenecks?|unclear|unknown|little is known|open (?:question|problem)|hinders?|"
                 r"prohibitive|inefficien\w*|whether|how to)\b", re.I)
# A contribution that answers the gap named before it ("to address this challenge,
# we propose"): its gap words are not a problem statement.
RESPONSE = re.compile(r"\b(?:to (?:address|tackle|overcome|solve|resolve|fill|mitigate|remedy|bridge)|"
                      r"in response to|as a remedy)\b", re.I)
# A definition ("A conformer is called ...", "consists of") sets terms, it poses no problem.
DEFINITION = re.compile(r"\b(?:is|are) (?:called|defined as|known as|referred to as)|\brefers? to\b|"
                        r"\bconsists? of\b", re.I)
# The paper's own statement of its problem ("we study the problem of ...").
STATEMENT = re.compile(r"\b(?:problem of|question of|we (?:study|address|investigate|tackle|examine|ask|"
                       r"consider (?:the|a|an) (?:\w+ )?(?:problem|task|question|setting)))\b", re.I)
# A question the paper sets itself ("we question if self-supervised learning
# provides new properties to ViT"): its problem, not its approach.
ASKING = re.compile(r"\bwe (?:question|ask|investigate|examine|explore|study) (?:if|whether|how|why|what)\b", re.I)
# The paper's own limits, told after its results ("We examine the limitations of
# Lion", "SCD is, however, restricted to ..."): not the problem it takes on.
LIMITS = re.compile(r"\b(?:limitations? of (?:our|the proposed|this|\w+ (?:and|to))|restricted to|"
                    r"does not (?:yet )?(?:handle|address|apply)|future work)\b", re.I)
# What a finding is told with ("we show that", "outperforms", a bound).
FINDING = re.compile(r"\b(?:we (?:show|prove|find|demonstrate|establish|observe|obtain|derive)|"
                     r"(?:show|shows|showing|demonstrat\w*|reveal\w*|indicat\w*|confirm\w*|"
                     r"suggest\w*) that|outperform\w*|achiev\w*|improv\w*|surpass\w*|reduc\w*|"
                     r"speed\w*|state-of-the-art|better|faster|fewer|lower|higher|regret|bounds?|"
                     r"converge\w*|accuracy)\b", re.I)
# Words of a measured result: an abstract with none reports no experiment.
MEASURED = re.compile(r"\b(?:experiment\w*|empirical\w*|evaluat\w*|benchmarks?|datasets?|"
                      r"outperform\w*|simulations?|testbeds?)\b", re.I)
# A position paper says so ("This position paper argues that satellite data ..."),
# or its authors open by arguing and report no experiment ("We argue that
# auto-regressive LLMs cannot, by themselves, do planning ..."); a method paper that
# argues a point before its method ("We argue that modeling proteins at both residue
# and atom levels is important ...") measures what the method does.
_DECLARES_POSITION = re.compile(r"\b(?:position|perspective) (?:paper|piece|article)\b|"
                                r"\b(?:this|our) (?:paper|work|article) argues\b|"
                                r"\bwe (?:present|offer|outline) (?:a|our) (?:vision|perspective) (?:of|for|on)\b", re.I)
_OWN_VOICE = re.compile(r"\b(?:we|our|this (?:paper|work|article))\b", re.I)
_ARGUES = re.compile(r"^(?:in this \w+,\s*)?(?:we|this (?:paper|work|article))\s+(?:will\s+)?(?:also\s+)?argues?\b", re.I)


def is_position(sentences: list[str]) -> bool:
    """Whether an abstract is a position paper's, by how it describes itself."""
    text = " ".join(sentences)
    if _DECLARES_POSITION.search(text):
        return True
    own = next((s for s in sentences if _OWN_VOICE.search(s)), "")
    return bool(_ARGUES.match(own.strip())) and not MEASURED.search(text)


FIGURE = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?\s*(?:%|x|×|times|points?|bits?|dB)?(?![A-Za-z\d])")
# Data named ("datasets", "benchmark", "on ImageNet"), and words that only point at
# an evaluation ("experiments", "tasks"): theory abstracts have the latter too.
DATA = re.compile(r"\b(?:datasets?|benchmarks?|corpus|corpora|testbeds?|"
                  r"(?:experiment\w*|evaluat\w*|results|tested|applied|apply)(?: [\w-]+){0,4} (?:on|across|in|with|over|to) |"
                  r"real-world|simulat\w*|environments?|tasks?,? (?:such as|including|like|namely)|"
                  r"\b(?:[Oo]n|across|over|with) (?:the )?[A-Z][\w-]*\d*)")
# A name or figure past a sentence's first word ("on ImageNet", "14 tasks"): a
# setting that names nothing ("with numerical experiments") is not one.
NAMES = re.compile(r"(?<=\s)(?:[A-Z][\w-]*[A-Z0-9][\w-]*|[A-Z][a-z]+[\w-]*|\d[\d,.]*)\b")
NAMED_WEIGHT = 0.3  # when added, setting right: seeds 68.4 -> 73.7%, blind 63.3 -> 73.3% (13 cells fixed, 5 lost)
# A study's own data in the sciences: a count of what was gathered ("a cohort of
# 412,000 adults", "96 farms", "2,480 adults ... at 34 clinics", "23 mice").
GATHERED = re.compile(r"\b(?:we (?:\w+ly )?(?:followed|surveyed|recorded|enrolled|recruited|assigned|collected|"
                      r"sampled|interviewed|tracked|imaged|sequenced|construct(?:ed)?|compiled|gathered|"
                      r"study this \w+ with|appl(?:y|ied) \w+ to)|cohort|participants|patients|"
                      r"respondents|randomi[sz]ed|registry|households)\b", re.I)
COUNT = re.compile(r"\b\d[\d,.]*\b")
EVALUATION = re.compile(r"\b(?:data\b|experiment\w*|empirical\w*|evaluat\w*|tasks?\b|domains?)", re.I)
ANAPHORA = re.compile(r"^(?:however, )?(?:this|these|it|they|such|that)\b(?! (?:paper|work|study|article|position paper)\b)|"
                      r"\b(?:the two|both of|such (?:connections|attacks|schemes|methods|models)|"
                      r"this (?:problem|claim|challenge|gap|issue|context|setting|phenomenon|hypothesis|question)|"
                      r"these (?:schemes|methods|models|capabilities|observations|connections|challenges|issues))\b", re.I)
ANAPHORA_WEIGHT = 0.5  # seeds: 20 -> 12 such cells, cells right 79.4% -> 79.8% (blind 80.0% both)
# Where the code is: "Code and models are available on GitHub.", "Our implementation
# ... is given on GitHub" (the role tagger reads both as background).
CODE = re.compile(r"^(?:all |our |the )?(?:source )?(?:code|implementation)s?\b(?: and [\w-]+(?: [\w-]+)?)?\s+"
                  r"(?:is|are|will be|has been|have been)\b|\b(?:github|gitlab)\b", re.I)
MAX_WORDS = 32  # longer sentences are cut at a clause boundary
CONTEXT_WORDS = 24  # of the sentence before a cell's, when the cell's leans on it
SETTING_WORDS = 14  # of a sentence another cell quotes, around the data it names
NOT_STATED = "not stated in the abstract"
# A setting cell left empty says what is missing: readers count a theory paper's
# formal setting as a setting, so "not stated" there reads as false.
NO_DATA = "no data or benchmark named in the abstract"
MISSING = {c: NO_DATA if c == "setting" else NOT_STATED for c in COLUMNS}

# Openers that lean on the sentence before ("To address this challenge,"): a cell is
# read alone, so they go.
_OPENER = re.compile(r"^(?:in this (?:paper|work)|here|specifically|to this end|moreover|furthermore|"
                     r"in addition|additionally|finally|as a result|concretely|notably|as a remedy|"
                     r"(?:in response to|to (?:address|tackle|overcome|solve|resolve|fill|mitigate|"
                     r"remedy|bridge)) (?:this|these|the above|above|such|both|the two)(?: [\w-]+){0,3})"
                     r"\s*,\s*", re.I)


@dataclass(frozen=True)
class Row:
    entry: Entry
    cells: dict[str, str]  # column -> quoted (possibly cut) sentence, or NOT_STATED
    sources: dict[str, int] = field(default_factory=dict)  # column -> index of its sentence


def cut(sentence: str, most: int = MAX_WORDS) -> str:
    """The sentence without a leading discourse marker, cut after at most ``most``
    words at the last clause boundary (, ; :) before it, marked with "…"."""
    s = _OPENER.sub("", sentence.strip())
    s = s[:1].upper() + s[1:]
    ws = s.split()
    if len(ws) <= most:
        return s
    head = " ".join(ws[:most])
    at = max(head.rfind(", "), head.rfind("; "), head.rfind(": "))
    return (head[:at] if at > len(head) // 3 else head).rstrip(",;: ") + " …"


def excerpt(sentence: str, question: str, most: int = MAX_WORDS, figures: bool = False) -> str:
    """A sentence longer than ``most`` words cut to the clauses that answer the
    question: the run of clauses (cut at , ; :) holding most of the question's content
    words, then a second run where words remain and it holds more of them, and the
    sentence's opening clause where it fits (it names the subject); in source order,
    "…" where words were left out. ``cut`` where no clause holds a question word.
    With ``figures`` (the question asks "how much"), a figure counts as a word asked
    for: "How much does that help?" keeps "from 17.7% to 78.7%"."""
    ws = sentence.split()
    if len(ws) <= most:
        return sentence
    clauses = [c.split() for c in re.split(r"(?<=[,;:])\s+", sentence.strip())]

    def stems(text: str) -> set[str]:
        return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in content_words(text)}

    asked = stems(question) | ({"#figure"} if figures else set())
    found = [(stems(" ".join(c)) | ({"#figure"} if FIGURE.search(" ".join(c)) else set())) & asked
             for c in clauses]
    if not any(found):
        return cut(sentence, most)
    chosen: set[int] = set()

    def room() -> int:
        return most - sum(len(clauses[i]) for i in chosen)

    for _ in range(2):
        have = set().union(*(found[i] for i in chosen))
        best, gain = None, (0, 0)
        for a in range(len(clauses)):
            for b in range(a + 1, len(clauses) + 1):
                size = sum(len(c) for c in clauses[a:b])
                if size > room() or chosen & set(range(a, b)):
                    break
                new = (len(set().union(*found[a:b]) - have), -size)  # the shortest run of the most
                if new[0] and new > gain:
                    best, gain = range(a, b), new
        if best is None:
            break
        chosen |= set(best)
    if 0 not in chosen and len(clauses[0]) <= room():
        chosen.add(0)
    for i in range(1, len(clauses)):  # what follows a chosen clause, while words remain
        if i - 1 in chosen and i not in chosen and len(clauses[i]) <= room():
            chosen.add(i)
    out, last = [], -1
    for i in sorted(chosen):
        text = " ".join(clauses[i])
        out.append(text if i == last + 1 else "… " + text)
        last = i
    text = " ".join(out)
    if last < len(clauses) - 1:
        text = text.rstrip(",;: ") + " …"
    return text.replace(", …", " …").replace("; …", " …").replace(": …", " …")


def around(sentence: str, pattern: re.Pattern, most: int = SETTING_WORDS) -> str:
    """The ``most`` words of the sentence from just before ``pattern``'s first
    match, "…" where it was cut; the whole sentence, cut, when it has no match."""
    m = pattern.search(sentence)
    if not m:
        return cut(sentence)
    ws = sentence.split()
    at = len(sentence[:m.start()].split())
    start = max(0, at - 3)
    part = " ".join(ws[start:start + most]).rstrip(",;:")
    return ("… " if start else "") + part + (" …" if start + most < len(ws) else "")


INTRODUCES = re.compile(r"\b(?:we|this (?:paper|work))\s+(?:\w+ly\s+)?(?:propose|introduce|present|develop|"
                        r"design|devise)s?\b", re.I)  # a method of its own, not "we study"
# What a result sentence found starts after these words.
FINDS = re.compile(r"\b(?:show|demonstrate|indicate|find|reveal|confirm|prove|suggest)s?\s+that\s+", re.I)


# A lead-in that qualifies what follows ("Without any bound on their difference, we
# show that no policy can ..."): dropping it would change the claim.
QUALIFIER = re.compile(r"\b(?:without|unless|if|when|whenever|under|only|provided|given|assuming|"
                       r"in the absence|except|absent)\b", re.I)


def gist(sentence: str, pattern: re.Pattern, most: int) -> str:
    """The words after ``pattern``'s first match ("we propose [an optimal
    splitting search]"), at most ``most`` and "…" where cut; when the words before it
    qualify the claim, the sentence cut to twice ``most``; else cut to ``most``."""
    m = pattern.search(sentence)
    rest = (sentence[m.end():] if m else "").split()
    if m and QUALIFIER.search(sentence[:m.start()]):
        return cut(sentence, 2 * most)  # the claim with its condition, or no claim at all
    if len(rest) < 3:
        return cut(sentence, most)
    return _tail(rest, most)


def _tail(words: list[str], most: int) -> str:
    """Words from inside a sentence, at most ``most``, marked "…" where cut."""
    return "… " + " ".join(words[:most]).rstrip(",;:") + (" …" if len(words) > most else "")


def aim(sentence: str, most: int = MAX_WORDS) -> str:
    """What a sentence introducing a method says the method is ("We introduce BYOL,
    [a new approach to self-supervised image representation learning]"; "We propose
    FedCalib, [a federated learning method that improves the calibration of ...]"):
    the problem column of a paper whose problem is stated only there, so that it does
    not repeat the approach's cell. The sentence, cut, where it has no such words."""
    m = INTRODUCES.search(sentence)
    comma = sentence.find(", ", m.end()) if m else -1
    rest = sentence[comma + 2:].split() if comma >= 0 else []
    if len(rest) < 4 or rest[0].lower() not in ("a", "an", "the", "which", "that"):  # not an apposition
        return cut(sentence, most)
    return _tail(rest, most)


def finding(sentence: str, most: int = MAX_WORDS) -> str:
    """A result sentence as a cell: whole when short; else what it found ("… SV,
    DID … reduce the predictive error … by as much as 41%"), where it says "show
    that"; else cut."""
    if len(sentence.split()) <= most:
        return cut(sentence, most)
    return gist(sentence, FINDS, most)


def scores(sentences: list[str], judged: dict[str, list[float]], p: np.ndarray) -> dict[str, np.ndarray]:
    """How well each sentence fills each column: its role's probability, the words
    that mark the part, where abstracts put it, and the judge (``judged``: column
    -> one score per sentence), ``p`` their role probabilities (rag/roles.py). Link
    and code sentences fill nothing."""
    n = len(sentences)
    bg, contribution, method, result = (p[:, roles.ROLES.index(r)] for r in
                                        ("background", "contribution", "method", "result"))
    place = np.arange(n) / max(n - 1, 1)
    has = lambda pattern: np.array([bool(pattern.search(s)) for s in sentences], dtype=float)  # noqa: E731
    statement = np.maximum(has(STATEMENT), has(ASKING))
    gap = np.maximum(has(GAP) * (1 - has(RESPONSE)), statement)
    first = (np.arange(n) == 0).astype(float)
    out = {
        "problem": 0.6 * (bg + contribution) + 0.6 * gap + 0.3 * statement - 0.6 * first * (1 - gap)
        - 0.3 * place - 0.5 * has(DEFINITION) - 0.6 * has(LIMITS),
        "approach": contribution + 0.3 * method - 0.5 * bg - has(ASKING),
        "result": result + 0.3 * has(FIGURE) + 0.4 * has(FINDING) + 0.15 * place,
        "setting": 0.6 * np.maximum(has(DATA), has(GATHERED) * has(COUNT)) + 0.3 * has(EVALUATION) + 0.3 * (result + method) + NAMED_WEIGHT * (has(NAMES) - 1),
    }
    # A sentence that leans on the one before ("the two", "this problem", "However,
    # it ...") cannot be read alone in a cell.
    # Nor does a link or code sentence fill a cell ("Code and models are available on
    # GitHub." was an open-vocabulary detector's data / setting).
    penalty = ANAPHORA_WEIGHT * has(ANAPHORA) + 10 * np.maximum(has(URL), has(CODE))
    return {c: v + JUDGE * np.asarray(judged[c], dtype=float) - penalty for c, v in out.items()}


# "compare [1] and [3]", "Compare the approaches ... for X", "How does BiLLM differ from
# AnyTool?": answered with a table of the papers compared.
ASKS = re.compile(r"^\s*(?:compare|contrast|how (?:do|does) .* (?:differ|compare))\b", re.I)
# The two things compared: "How does X differ from Y?", "How do X and Y differ?",
# "Compare X with Y in terms of Z" (Z is what they are compared on, not a paper).
_SIDES = (
    re.compile(r"^\s*how (?:do|does|did) (?P<a>.+?) (?:differ from|compare (?:to|with|against)|"
               r"contrast with) (?P<b>.+?)\s*[?.!]*$", re.I),
    re.compile(r"^\s*how (?:do|does|did) (?P<a>.+?) and (?P<b>.+?) (?:differ|compare)\b", re.I),
    re.compile(r"^\s*(?:compare|contrast) (?P<a>.+?) (?:and|with|to|against|versus|vs\.?) (?P<b>.+?)"
               r"(?:,?\s+(?:in terms of|regarding|with respect to|when it comes to)\s+.*)?\s*[?.!]*$", re.I),
)


# A side that is a group of papers ("the approaches to making LLM inference
# cheaper", "models that jointly handle pictures and ..."): the comparison is a survey.
_GROUP = re.compile(r"^(?:the |these |all )?(?:[\w-]+ ){0,3}(?:papers|works|studies|approaches|methods|models|"
                    r"ways|techniques|strategies|algorithms|frameworks|systems|optimizers)\b", re.I)


def sides(question: str) -> list[str]:
    """The two things a comparison sets side by side ("BiLLM", "the online cascade
    learning paper"); none when it names no two ("Compare the approaches to X")."""
    for pattern in _SIDES:
        m = pattern.match(question)
        if m:
            both = [m.group("a").strip(), m.group("b").strip()]
            return [] if any(_GROUP.match(side) for side in both) else both
    return []


def row(entry: Entry, sentences: list[str], score=None) -> Row:
    """``score(question, entry) -> one judge score per sentence``; without it the
    roles and words alone choose (answers, where four more judge reads per paper
    would cost 0.26 s: approach right 68% rather than 91% on the seeds, result 91%
    either way). Problem, approach and result are filled in order of how sure the
    scores are, each taking a sentence no other took (a method introduced with its
    problem fills both); the setting takes its best sentence, shared or not."""
    name = entry.name
    p = roles.tagger().probabilities(sentences)
    s = scores(sentences, {c: list(score(q.format(name=name), entry)) if score else [0.0] * len(sentences)
                           for c, q in COLUMNS.items()}, p)
    taken: set[int] = set()
    sources: dict[str, int] = {}
    pending = ["problem", "approach", "result"]
    while pending and len(taken) < len(sentences):
        col, i = max(((c, i) for c in pending for i in range(len(sentences)) if i not in taken),
                     key=lambda t: s[t[0]][t[1]])
        pending.remove(col)
        if s[col][i] >= FILLS[col]:
            sources[col] = i
            taken.add(i)
    # "We introduce Performers, ... but using only linear ... complexity" is the
    # approach, whatever gap words it has: it fills both columns, not the problem alone.
    pick, own = sources.get("problem"), sources.get("approach")
    if (pick is not None and own is not None and INTRODUCES.search(sentences[pick])
            and s["approach"][pick] >= s["approach"][own]):
        sources["approach"] = pick
        taken.discard(own)
    # An abstract that opens with its contribution ("We propose X, a method that
    # improves Y") states its problem there: a later sentence the scores put in the
    # problem column without a gap or a problem statement of its own is the method's
    # detail ("Unlike self-consistency, SCD resamples only ..."), and none is not stated.
    pick = sources.get("problem")
    if (sources.get("approach") == 0 and pick != 0 and roles.ROLES[int(np.argmax(p[0]))] == "contribution"
            and (pick is None or not GAP.search(sentences[pick]) and not STATEMENT.search(sentences[pick]))):
        sources["problem"] = 0
        taken.discard(pick)
    cells = {c: cut(sentences[sources[c]]) if c in sources else MISSING[c] for c in COLUMNS}
    if "problem" in sources and sources["problem"] == sources.get("approach"):
        cells["problem"] = aim(sentences[sources["problem"]])
    if "result" in sources:  # a long result keeps what was found, not its lead-in
        cells["result"] = finding(sentences[sources["result"]])
    for col in ("problem", "approach", "result"):
        # "We study a family of problems interpolating the two." says nothing without
        # the sentence it leans on, which no other cell quotes; "To bridge this gap, we
        # propose X" leans no more once cut() has dropped its opener.
        i = sources.get(col, 0)
        if i and ANAPHORA.search(cells[col]) and i - 1 not in taken:
            cells[col] = f"{cut(sentences[i - 1], CONTEXT_WORDS)} {cells[col]}"
    # The setting: the best sentence for it, whole, or where another cell quotes it
    # (the same sentence twice says nothing new) the words around the data it names;
    # "… presence of offline data." names none, nor does a result without a cue, and
    # then the next best (a trial's "at 34 clinics ... 2,480 adults" beside its result).
    for k, i in enumerate(np.argsort(-s["setting"], kind="stable")):
        if s["setting"][i] < FILLS["setting"]:
            break
        cued = [c for c in (DATA, GATHERED, EVALUATION) if c.search(sentences[i])]
        # A later candidate must name some data: Sophia's "The update is the moving
        # average of the gradients ..." came after its result's sentence.
        if i not in taken and (k == 0 or cued):
            sources["setting"], cells["setting"] = int(i), cut(sentences[i])
            break
        if i in taken:
            shared = sentences[i]
            cue = next((c for c in (DATA, GATHERED) if c in cued), EVALUATION)
            m = cue.search(shared)
            if m and len(shared[m.end():].split()) >= 3:
                sources["setting"], cells["setting"] = int(i), around(shared, cue)
                break
    return Row(entry, cells, {c: sources[c] for c in COLUMNS if c in sources})


def markdown(rows: list[Row], mark) -> list[str]:
    """A Markdown pipe table: paper (with its citation mark), then the columns."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| Paper | " + " | ".join(HEADERS[c] for c in COLUMNS) + " |",
             "|---" * (len(COLUMNS) + 1) + "|"]
    for r in rows:
        lines.append(f"| {cell(r.entry.label)} {mark(r.entry)} | "
                     + " | ".join(cell(r.cells[c]) for c in COLUMNS) + " |")
    return lines


def to_csv(rows: list[Row], keys: dict[str, str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["paper", "authors", "year", "doi", "key", *[HEADERS[c] for c in COLUMNS]])
    for r in rows:
        e = r.entry
        w.writerow([e.title or e.label, "; ".join(e.author_list), e.year_or_venue_year, e.doi,
                    keys[e.id], *[r.cells[c] for c in COLUMNS]])
    return buf.getvalue()
