"""Plain-text helpers shared by chunking, lexical search and verification:
sentence splitting, word tokens, and the 'specific terms' of a sentence."""

from __future__ import annotations

import re

# Checked at the split point, so each abbreviation includes its final dot.
_ABBREV = "".join(rf"(?<!\b{a}\.)" for a in (r"e\.g", r"i\.e", "et al", "vs", "Fig", "Eq", "cf",
                                              "resp", "approx", "No", "Sec", "Ref"))
# A sentence ends at . ! ? (optionally closed by a quote or bracket) followed by space
# and something that can start a sentence. Decimals ("1.08-bit") never match because
# no space follows the dot.
_SENT_END = re.compile(_ABBREV + r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-+.]*[A-Za-z0-9+]|[A-Za-z0-9]")

STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing for from had has
have how i if in into is it its itself may might more most of on or our ours paper
papers such than that the their them then there these they this those through to
under up was we were what when where which while who whom why will with would you
your about any also between both each few other some same so very work works study
studies propose proposed approach method methods using use used based show shows
there's is there any all across over via new novel existing researchers research
""".split())


# The frame of a survey question ("Which papers ...", "... and for what purpose?")
# names no topic; embedded, it only pulls every survey question toward each other.
_FRAME = re.compile(
    r"^\s*(?:(?:which|what|how do) (?P<inner>(?:\w+ ){0,2}?)"
    r"(?P<noun>papers|works|studies|articles|methods|approaches)(?!\s+(?:best|better|well|worse)\b)"
    r"(?: in (?:the|this) collection)?(?: are there)?"
    r"|(?:are there|is there|find|list|show me)(?: any)? (?:papers?|works?|studies)(?: (?:that|which|on|about))?"
    r"|(?:papers|works|studies) (?:that|which|on|about)"
    r"|what(?:'s| is) in (?:the|this) (?:set|collection)(?: on| about)?"
    r"|what (?:work|research) (?:is there|exists)(?: that| on| about)?"
    r"|(?:is there )?anything (?:here )?(?:on|about)"
    r"|which of (?:these|them|the papers)(?: are)?"
    r"|compare(?: the)?)\b",
    re.I)
_FRAME_TAIL = re.compile(r",?\s+and (?:for )?(?:what|how)\b[^?]*\b(?:they|them|their|purpose)\b[^?]*\??\s*$", re.I)


# Papers asked for in the plural anywhere ("reinforcement learning papers (...)", "LLMs
# as planners - which papers address this?", "Which abstracts are position pieces?"),
# or "What work uses/draws on ...", which asks for every paper that does, or a topic
# put first ("Efficiency of large models: which works ...?").
_PLURAL_ASK = re.compile(r"\b(?:papers|abstracts)\b"
                         r"|^\s*what (?:work|research)\s+(?!(?:does|did|do|is|was|has|had)\b)"
                         r"|[.?!]\s+what (?:work|research) (?:is there|exists)\b"
                         r"|:\s+(?:which|what) (?:\w+ ){0,2}?(?:works|studies|methods|approaches|articles)\b"
                         r"(?!\s+(?:best|better|well|worse)\b)"
                         # Keywords that name a plural kind of method ("kernel methods",
                         # "sequence architectures whose compute grows linearly"): every
                         # method of the kind, as "Which methods ...?" would ask.
                         r"|^(?![^?]*\?)(?!\s*(?:what|which|how|why|when|where|who|is|are|was|were|does|do|did|"
                         r"can|could|should|would|has|have|had|if|in|on|for)\b)(?:[\w/()-]+\s+){0,4}?"
                         r"(?:methods|approaches|architectures|models|techniques|algorithms|frameworks)"
                         r"(?:\s+(?:that|which|whose|trained|using|based|for)\b|\s*$)", re.I)
# ... and asked after the topic: "- which papers address this?", "Can networks stand in
# for fluid solvers? What work is there on this?".
# A tail that names a topic of its own ("Biology: which abstracts apply ML to
# molecules?") loses only its frame words.
_ASK_TAIL = re.compile(r"(?:\s*[-\u2013\u2014:,]?\s*which (?:papers|abstracts)(?:\s+[\w-]+){0,3}?\s+"
                       r"(?:this|that|these|it|them|so)\b"
                       r"|(?<=[.?!])\s+what (?:work|research) (?:is there|exists) (?:on |about |for )?"
                       r"(?:this|that|these|it|them)\b)[^?]*\??\s*$", re.I)
_ASK_MID = re.compile(r"(?<=[-\u2013\u2014:,])\s*which (?:papers|abstracts|works|studies)\b", re.I)


def is_survey(question: str) -> bool:
    """A question after every paper on a topic rather than after one paper."""
    return bool(_FRAME.match(question) or _PLURAL_ASK.search(question))


# "... is in this set?", "... in the collection": where to look, not what.
_WHERE = re.compile(r"\b(?:(?:is|are)\s+)?(?:there\s+)?in (?:the|this) (?:set|collection)\b", re.I)
_FILLER = frozenset("other recent different specific main key notable prior previous published "
                    "these those the some of".split())


def _unframe(m: re.Match) -> str:
    """The frame's own topic words ("What kernel methods ..." keeps "kernel methods")."""
    inner = [w for w in (m.group("inner") or "").split() if w.lower() not in _FILLER]
    return " " + " ".join(inner + [m.group("noun")]) + " " if inner else " "


# What the papers asked for do with the topic, right after the frame ("Which papers
# here look at ...", "... study or propose ..."): no more a topic than the frame is.
# Embedded, "look at" and "study" pull every survey question toward each other, and
# "here" and "look" lower every entry's share of the query's terms, so the security
# question of the chat set was declined with its four papers scored 0.01-0.10.
# Not verbs that say what kind of work is asked for ("prove", "evaluate").
_VERB = (r"(?:look(?:s|ing)? (?:at|into)|stud(?:y|ies|ying)|address(?:es)?|deal(?:s|ing)? with|"
         r"focus(?:es)? on|work(?:s|ing)? on|(?:are|is) about|concern|tackle|investigate|explore|examine|"
         r"discuss|consider|cover|involve|propose|present|introduce|develop|analy[sz]e|use|apply|"
         r"make use of|try to)")
_FRAME_VERB = re.compile(rf"^\s*(?:here\s+)?(?:(?:that|which)\s+)?{_VERB}(?:\s+(?:or|and|and/or)\s+{_VERB})?\s+",
                         re.I)


def focus(query: str) -> str:
    """A survey question without its frame; any other query unchanged."""
    rest, framed = _FRAME.subn(_unframe, query)
    if framed:
        rest = _FRAME_VERB.sub(" ", rest, count=1)
        rest = " ".join(_FRAME_TAIL.sub(" ", _WHERE.sub(" ", rest)).split())
        return rest if _WORD.search(rest) else query
    for ask in (_ASK_TAIL, _ASK_MID):
        rest, framed = ask.subn(" ", query)
        if framed:
            return " ".join(rest.split()) if _WORD.search(rest) else query
    return query


URL = re.compile(r"\b(?:https?://|www\.|github\.com/)\S+", re.I)


def sentences(text: str) -> list[str]:
    """Split an abstract into sentences; keeps every character but whitespace."""
    parts = [s.strip() for s in _SENT_END.split(text.strip())]
    return [p for p in parts if p]


def tokens(text: str) -> list[str]:
    """Word tokens as written (hyphenated and dotted terms kept whole)."""
    return _WORD.findall(text)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (hyphenated and dotted terms kept whole)."""
    return [w.lower().rstrip(".") for w in tokens(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1]


# Numbers ("1.08", "30%", "7B"), acronyms ("LLM", "PDEs") and CamelCase or mixed
# names ("BiLLM", "AnyTool", "GPT-4"): the things a small model invents.
_SPECIFIC = re.compile(
    r"\b\d+[x×]\d+\b"                                  # resolutions: 256x256
    r"|\b\d+(?:\.\d+)?[eE][-+−]?\d+\b"                 # scientific notation: 1e-4
    r"|\b\d+(?:[.,]\d+)*(?:%|x|×|[kKmMbB]\b)?"         # numbers, sizes
    r"|\b[A-Za-z]*[A-Z][a-z]*[A-Z][A-Za-z0-9\-]*\b"     # CamelCase and acronyms
    r"|\b[A-Z]{2,}[a-z]?s?\b"                          # acronyms with plural
    r"|\b[A-Za-z]+-?\d+[A-Za-z0-9]*\b"                # C4, L2, GPT-4, ResNet50
)


# "MIP-based", "label-free": a term and a modifier; the term is what is named.
MODIFIER = re.compile(r"-(?:based|driven|aware|free|like|style|level|wise|specific|guided|type)$", re.I)


def specific_terms(text: str) -> set[str]:
    """Numbers, acronyms and named methods occurring in ``text``."""
    return {m.group(0) for m in _SPECIFIC.finditer(text)}
