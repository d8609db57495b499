"""What a paper is, in the columns researchers compare papers by: the problem it
addresses, its approach, its main result and its data or setting.

Each cell is the paper's own sentence that best fills the column, by the words
abstracts use for it and the judge's (rag/judge.py) reading of the column's question,
so every cell is a quote and cannot misstate the paper. A sentence fills one cell only; long ones are cut at a clause boundary and
marked "…"; a column no sentence answers says so rather than guess.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from .records import Entry

# Column -> the question its cell answers ({name}: the paper's title or method).
COLUMNS = {
    "problem": "What problem does {name} address?",
    "approach": "What method or approach does {name} propose?",
    "result": "What are the main results of {name}, with numbers?",
    "setting": "On which data, benchmarks or setting is {name} evaluated?",
}
HEADERS = {"problem": "Problem", "approach": "Approach", "result": "Main result",
           "setting": "Data / setting"}
ANSWERS = 0.3  # cue plus judge score under which no sentence answers the column
# What the sentence that fills each column says, in the words abstracts use for it:
# the judge alone reads generic column questions weakly (bench figures in README), so
# these cues lead and the judge's score breaks ties between sentences that have them.
CUES = {
    "problem": r"\b(?:we (?:study|consider|address|investigate|tackle|examine|initiate)|"
               r"(?:this|the) (?:paper|work) (?:studies|considers|addresses|investigates)|"
               r"problem of|question of|challenge|remains? (?:unclear|open|difficult)|"
               r"(?:is|are) (?:limited|costly|expensive|difficult|challenging))",
    "approach": r"\b(?:we (?:propose|introduce|present|develop|design|devise|leverage|use)|"
                r"(?:our|the proposed) (?:method|approach|framework|algorithm|model)|"
                r"(?:called|named|dubbed|termed)\b|based on|consists? of)",
    "result": r"(?:\d+(?:\.\d+)?\s*(?:%|x|×|times|points?|bits?)|\b(?:outperform|achiev|"
              r"improv|surpass|reduc|speed|state-of-the-art|we (?:show|prove|demonstrate|find)|"
              r"results? (?:show|demonstrate|indicate)|regret|bound|guarantee))",
    "setting": r"\b(?:dataset|benchmark|experiments? (?:on|with)|evaluat\w* (?:on|across)|"
               r"tasks?\b|(?:on|across) (?:[A-Z][\w-]+)|real-world|simulat)",
}
BACKGROUND = r"^(?:while|although|recent(?:ly)?|over the (?:past|last)|in recent years|" \
             r"\w+ (?:has|have) (?:become|emerged|seen|shown)|despite)\b"
MAX_WORDS = 32  # longer sentences are cut at a clause boundary
NOT_STATED = "not stated in the abstract"

_OPENER = re.compile(r"^(?:in this (?:paper|work)|here|specifically|to this end|to address this"
                     r"(?: \w+)?|moreover|furthermore|in addition|additionally|finally|"
                     r"as a result|concretely|notably)\s*,\s*", re.I)


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


def _cue_scores(column: str, sentences: list[str]) -> list[float]:
    """Cue words, less for background openers, plus where abstracts put each part:
    the problem near the start, results near the end."""
    cue = re.compile(CUES[column], re.I if column != "setting" else 0)
    n = len(sentences)
    where = {"problem": lambda i: 0.2 * (i < 2), "result": lambda i: 0.2 * (i >= n - 2) - 0.3 * (i == 0),
             "approach": lambda i: 0.1 * (0 < i < n - 1), "setting": lambda i: 0.0}[column]
    return [0.6 * bool(cue.search(s)) - 0.5 * bool(re.match(BACKGROUND, s, re.I)) + where(i)
            for i, s in enumerate(sentences)]


def row(entry: Entry, sentences: list[str], score) -> Row:
    """``score(question, entry) -> one judge score per sentence``. Columns are filled
    in order of how sure the cues and the judge are together, each taking a sentence
    no other cell took."""
    name = entry.name
    scores = {c: [cue + 0.5 * float(j) for cue, j in
                  zip(_cue_scores(c, sentences), score(q.format(name=name), entry))]
              for c, q in COLUMNS.items()}
    taken: set[int] = set()
    cells: dict[str, str] = {}
    sources: dict[str, int] = {}
    pending = list(COLUMNS)
    while pending:
        col, i, best = max(((c, i, float(s)) for c in pending for i, s in enumerate(scores[c])
                            if i not in taken), key=lambda t: t[2], default=(pending[0], -1, 0.0))
        if best < ANSWERS or i < 0:
            for c in pending:
                cells[c] = NOT_STATED
            break
        cells[col] = cut(sentences[i])
        sources[col] = i
        taken.add(i)
        pending.remove(col)
    return Row(entry, {c: cells[c] for c in COLUMNS}, sources)


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
