"""A question analysed once into the record every stage shares.

Retrieval, the judge, the near-miss wording and verification all used to re-read
the raw string with their own regular expressions; now each reads the fields it
needs from one :class:`Query`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError
from .text import content_words, is_survey, specific_terms

# What a question asks beyond what a paper does and found: its motivation or the
# problem it addresses, or its code and links. Answers leave those parts out
# otherwise (rag/roles.py tells them apart).
_WANTS = {
    # "problem", "gap", "context" in a question are mostly its topic ("hard discrete
    # problems", "whether the problem is feasible", "in-context"): asked for only as
    # "what problem ...", "the challenge it addresses".
    "background": re.compile(r"\b(?:why|motivat\w*|background|limitations?|prior work|previous work|"
                             r"existing (?:methods|work|approaches)|shortcomings?|"
                             r"(?:what|which) (?:\w+ )?(?:problems?|challenges?|gaps?|issues?|difficult\w*)|"
                             r"(?:problems?|challenges?|gaps?|issues?) (?:\w+ ){0,4}?(?:address|solve|tackle|"
                             r"overcome|fill|close)\w*)\b", re.I),
    # ... or what the authors hope or expect of it (rag/roles.py: outlook is "other");
    # not "expected reward" nor "future frames", a question's topic.
    "other": re.compile(r"\b(?:code|github|repository|repo|url|link|website|project page|"
                        r"released?|available|open[- ]source\w*|download\w*|hope[sd]?|hoping|"
                        r"expects?|expecting|future (?:work|directions?|research)|outlook)\b", re.I),
}
# "What is BiLLM?", "What does RICE do?", "Tell me about AnyTool": the paper as a
# whole, answered by what it contributes and then what it found.
_OVERVIEW = re.compile(r"^\s*(?:what(?:'s| is| are| was)\s+(?!the (?:[\w-]+ ){1,3}(?:of|on|for|in|between)\b)[^?,]{1,60}\??$|"
                       r"what (?:does|did|do) .{1,60} (?:do|propose|introduce|present|contribute|show|"
                       r"find|achieve|offer)\b|tell me (?:more )?about|summari[sz]e|describe|explain|"
                       r"give (?:me )?an overview|what(?:'s| is| are) (?:the )?(?:main |key )?"
                       r"(?:idea|contribution|point|finding|result|takeaway)s?\b|how (?:does|do) .{1,60} work\b)",
                       re.I)

# "Is there a paper on ...?", "Has anyone ...?", "Does the collection have ...?": whether
# the collection holds such a paper at all, so a paper near the topic is no answer.
_EXISTS = re.compile(r"^\W*(?:(?:so|and|but|also|ok|okay),?\s+)?(?:is there|are there|has (?:anyone|someone|any(?:body|one)?)|"
                     r"have (?:any|anyone)|does (?:anyone|anybody|any)|do (?:any|you have)|"
                     r"does (?:the|this|your) (?:collection|set|corpus|library)|any (?:papers?|work|research|studies|methods)\b)",
                     re.I)

# "Which abstracts are position papers?", "Any opinion or perspective pieces?": papers
# of a kind, told by how an abstract describes itself (compare.is_position), which
# neither retrieval nor the judge reads from the question's words. "Vision" only
# after another of the words: "vision papers" alone are computer vision's.
_POSITION = re.compile(r"\b(?:position|opinion|perspective|argument)(?:\s*(?:/|,|or|and)\s*"
                       r"(?:position|opinion|perspective|vision|argument))*\s+(?:papers?|pieces?|articles?)\b", re.I)
# Words that tell what a position paper is rather than what it is about: a question
# with any other content word asks for a topic too ("a position paper arguing that
# medical imaging is a modality of its own"), answered as any other question is.
_POSITION_FRAME = frozenset("""position positions opinion opinions perspective perspectives vision
argument arguments argue argues arguing viewpoint viewpoints stance agenda research rather new
method methods algorithm algorithms experiment experiments theorem theorems results result
presenting present presents introducing introduce proposing propose explicitly describe
describes themselves call calls abstracts abstract submissions submission pieces piece articles
article works work set collection any each one ones among here list""".split())

# What a question calls a paper ("the RICE paper", "the one on ...").
NOUN = r"(?:paper|method|work|approach|model|study|algorithm|framework|one)"

# A paper described rather than pointed at: "the paper on LLM planning", "the one
# giving a theoretical explanation of …", "the RICE paper", "the satellite one".
_DESCRIBED = re.compile(rf"\b(?:the|a|that) {NOUN}s? (?:on|about|that|which|for|proposing|introducing|"
                       rf"studying|using|with|where|\w+ing)\s+(.+)", re.I)
_NAMED_BEFORE = re.compile(rf"\bthe ((?:[\w-]+ ){{1,4}}?){NOUN}\b", re.I)
NOT_A_DESCRIPTION = frozenset("""first second third fourth fifth last other same previous above
former latter next new this that these those proposed main whole original cited mentioned said
underlying their its your our""".split())


def description(question: str) -> str | None:
    """What a question says to pick out a paper ("on LLM planning", "RICE"), if it
    describes one."""
    found = _DESCRIBED.search(question)
    if found:
        return found.group(1)
    for m in _NAMED_BEFORE.finditer(question):
        words = m.group(1).split()
        if not NOT_A_DESCRIPTION.intersection(w.lower() for w in words):
            return m.group(1).strip()
    return None


@dataclass(frozen=True)
class Query:
    text: str  # as asked (the judge reads this)
    search: str  # what retrieval searches for: a chat turn rewritten to stand alone
    survey: bool  # after every paper on a topic, not after one paper
    specifics: frozenset[str]  # numbers, acronyms and names it gives
    wants: frozenset[str] = frozenset()  # "background", "other": parts asked for
    overview: bool = False  # after a paper as a whole ("What is BiLLM?")
    exists: bool = False  # whether the collection has such a paper ("Is there work on ...?")
    position: bool = False  # after position papers as such, whatever their topic

    @classmethod
    def analyse(cls, text: str, search: str | None = None) -> "Query":
        # No vector here: retrieval embeds ``search`` (without a survey frame) and
        # caches it, and no other stage reads one.
        text = " ".join(text.split())
        return cls(text=text, search=search or text, survey=is_survey(text),
                   specifics=frozenset(specific_terms(text)),
                   wants=frozenset(role for role, cue in _WANTS.items() if cue.search(text)),
                   overview=bool(_OVERVIEW.search(text)), exists=bool(_EXISTS.search(text)),
                   position=bool(_POSITION.search(text))
                   and all(p in _POSITION_FRAME for w in content_words(text) for p in w.split("-")))


# A question or a review topic longer than this is a pasted document, not a
# question: it would go whole into every per-entry prompt (issue 17 measured a
# 20,000-character question running for minutes inside llama.cpp).
MAX_CHARS = 1_000


def check_length(text: str, what: str = "question",
                 hint: str = "ask about one thing, in a sentence or two") -> None:
    """Raise :class:`UsageError` for a question (or topic) over :data:`MAX_CHARS`
    characters, whitespace runs counted as one."""
    n = len(" ".join(text.split()))
    if n > MAX_CHARS:
        raise UsageError(f"the {what} is {n:,} characters long and the limit is {MAX_CHARS:,}; {hint}")
