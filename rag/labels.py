"""Short labels for entries: the title when there is one, else the name of the method
the abstract introduces ("BiLLM"), else the phrase that names its subject
("watermark stealing", "online cascade learning"); never the opening words.

Labels are made when a file is read, without a model: from what abstracts do when
they name their subject (an emphasised term, an acronym they define and keep using,
the object of "we propose / study …", a phrase they repeat).
"""

from __future__ import annotations

import re
from collections import Counter

from .text import MODIFIER, STOPWORDS, sentences

# Acronyms of fields, not of methods: never a label, nor the name a question asks for.
GENERIC = frozenset("""
LLM LLMs MLLM MLLMs ML AI RL DRL NLP GNN GNNs CNN CNNs RNN RNNs PDE PDEs ODE ODEs SOTA
NOs NO DNN DNNs MDP MDPs POMDP GPU GPUs CPU API APIs LM LMs VLM VLMs SGD KL OOD IID
ReLU PII RNA DNA NN NNs
""".split())
_CUE = re.compile(r"\b(propose|proposes|introduce|introduces|present|presents|develop|"
                  r"develops|called|named|dubbed|termed|coined|our (?:approach|method|framework|"
                  r"model|algorithm),)(?=\s)", re.I)
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*\b")


def label(text: str, title: str = "") -> str:
    return title or method_name(text) or subject(text) or first_words(text)


def is_name(label: str) -> bool:
    """Whether a label can stand for the paper in a sentence ("BiLLM improves …"):
    a method name can, a subject phrase ("watermark stealing") or opening words cannot."""
    return not label.endswith("…") and (_is_name(label.split()[0]) or label.isupper())


def _is_name(tok: str) -> bool:
    if MODIFIER.search(tok):
        return False
    upper = sum(c.isupper() for c in tok)
    return (upper >= 2 or (upper == 1 and any(c.isdigit() for c in tok) and len(tok) > 2)
            or (upper == 1 and not tok[0].isupper())) and tok not in GENERIC and len(tok) >= 3


def method_name(text: str) -> str:
    """The name of the method an abstract introduces ("BiLLM"), or ''."""
    for cue in _CUE.finditer(text):
        tail = text[cue.end(): cue.end() + 160]
        tail = re.split(r"[.;]\s", tail)[0]
        # "Cross-Task Linearity (CTL)": the acronym in brackets is the name.
        bracket = re.search(r"\(([A-Za-z][A-Za-z0-9\-]{1,14})\)", tail[:110])
        names = [m for m in _NAME.finditer(tail) if _is_name(m.group(0))]
        # ... unless a name comes in a clause before it: "we introduce BLO-SAM,
        # which finetunes SAM based on bi-level optimization (BLO)".
        clause = re.search(r",\s", tail[:bracket.start()]) if bracket else None
        if bracket and _is_name(bracket.group(1)) and not (
                clause and any(m.end() <= clause.start() for m in names)):
            return bracket.group(1)
        if names:
            name = names[0].group(0)
            # "TIME WEAVER": an all-caps name continues over following all-caps words.
            more = re.match(r"(?:\s+[A-Z][A-Z0-9\-]+\b)+", tail[names[0].end():])
            return name + more.group(0) if name.isupper() and more else name
    return ""


def first_words(text: str, n: int = 6) -> str:
    ws = text.split()
    return " ".join(ws[:n]).rstrip(",.;:") + ("…" if len(ws) > n else "")


# The authors speaking of their own work.
_WE = re.compile(r"\b(?:we|this (?:work|paper|study))\b", re.I)
_EMPHASIS = re.compile(r"(?<![\w*])[*_]([A-Za-z][^*_]{2,60}?)[*_](?![\w*])")
_ACRONYM = re.compile(r"\(([A-Z][A-Za-z]*[A-Z]s?)\)")
# What "we study …" studies: up to a clause boundary, a verb-like word or a few words.
_OBJECT = re.compile(
    r"\b(?:we|this (?:work|paper|study))\s+(?:(?:first|further|also|then|\w+ly)\s+)*"
    r"(?:(?:take the first step|aim|seek|set out|are the first)\s+to\s+)?"
    r"(?:propose|introduce|present|study|investigate|initiate the study of|analy[sz]e|"
    r"optimi[sz]e|examine|explore|consider|address|tackle|develop|revisit|formali[sz]e|"
    r"characteri[sz]e|identify|discuss|design)\s+(?:(?:the|a|an|such|this|these|how|"
    r"whether)\s+)*(.+)", re.I)
_STOP_AT = re.compile(
    r"[,;:.()\[\]]|\s(?:which|that|where|when|while|by|to|and|as|with|using|via|is|are|"
    r"can|under|from|through|in order|because|whose|we|it|they|has|have)\s", re.I)
_LEAD_DROP = re.compile(r"^(?:(?:the|a|an|such|this|these|their|its|our|of|new|novel|problem of|task of|"
                        r"question of|impact of|role of|effect of|use of)\s+)+", re.I)
_MATH = re.compile(r"\$[^$]*\$")
# An aside in brackets ("(i.e., single epoch)", "(DNN)") would cut a phrase short.
_ASIDE = re.compile(r"\s*\([^()]*\)")
# A phrase that points elsewhere ("sources of these disparities") names nothing alone.
_POINTS = frozenset("this these those above following aforementioned".split())
_SMALL = frozenset("of for in on with the a an and to".split())
_WEAK = frozenset("""problem problems task tasks setting settings approach approaches method
methods framework model models results result analysis way ways question questions
""".split())


def subject(text: str) -> str:
    """The phrase that names an abstract's subject, or '' when none stands out."""
    text = _MATH.sub(" ", text)
    return _emphasised(text) or _defined(text) or _studied(text) or _repeated(text)


def _counts(text: str) -> Counter[str]:
    return Counter(_stem(w) for w in re.findall(r"[^\W\d_][\w\-]*", text.lower()))


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _tidy(phrase: str) -> str:
    words = phrase.replace("*", "").replace("_", " ").split()
    while words and words[-1].lower() in _SMALL:
        words.pop()
    return " ".join(words)


def _emphasised(text: str) -> str:
    """An emphasised term of several words after the authors speak: "In this work we
    dispute this claim, identifying *watermark stealing* (WS) as …" (not "prior
    works focused on *offline learning*, while we …")."""
    for s in sentences(text):
        own = _WE.search(s)
        if not own:
            continue
        for m in _EMPHASIS.finditer(s, own.end()):
            phrase = _tidy(m.group(1))
            if len(phrase.split()) >= 2 and len(phrase.split()) <= 6:
                return phrase
    return ""


def _defined(text: str) -> str:
    """The expansion of the acronym the abstract defines and then uses most:
    "Feedback Alignment (FA) … FA …" gives "Feedback Alignment"."""
    best, uses = "", 1
    for m in _ACRONYM.finditer(text):
        acr = m.group(1)
        if acr in GENERIC or acr.rstrip("s") in GENERIC:
            continue
        letters = [c for c in acr.rstrip("s") if c.isupper()]
        before = re.split(r"[,;:.()]", text[max(0, m.start() - 120): m.start()])[-1].split()
        # Walk back over as many words as the acronym has capitals (hyphenated words
        # may carry two: "Classifier-Free").
        take, caps = [], 0
        for w in reversed(before):
            take.insert(0, w)
            caps += max(1, w.count("-") + 1) if w.lower() not in _SMALL else 0
            if caps >= len(letters):
                break
        if caps < len(letters) or not take or take[0][0].lower() != letters[0].lower():
            continue
        n = len(re.findall(rf"\b{re.escape(acr.rstrip('s'))}s?\b", text)) - 1
        if n > uses:
            best, uses = _tidy(" ".join(take)), n
    return best


def _studied(text: str) -> str:
    """The object of a "we study / propose / optimise …" cut at the clause: "We
    optimize pipeline parallelism for deep neural network (DNN) inference by …" gives
    "pipeline parallelism for deep neural network". Of the first three, the one whose
    words the abstract repeats most, if it repeats them at all."""
    counts = _counts(text)
    found = []
    for s in sentences(text):
        m = _OBJECT.search(s)
        if not m:
            continue
        rest = _ASIDE.sub("", m.group(1))
        stop = _STOP_AT.search(" " + rest + " ")
        phrase = _LEAD_DROP.sub("", (" " + rest)[: stop.start()].strip() if stop else rest)
        # "testing such feasibility assumptions": "such" points back, the rest names.
        phrase = re.sub(r"\bsuch\s+", "", phrase, flags=re.I)
        words = _tidy(phrase).split()
        # Cut at six words, not inside a trailing "on 3D (protein structures)": a
        # modifier ("3D", "RNA-level") cut from its noun names nothing; "on prompts" does.
        if len(words) > 6:
            words = words[:6]
            if words[-2].lower() in _SMALL and not (words[-1].isalpha() and words[-1].islower()):
                words = words[:-2]
        phrase = _tidy(" ".join(words))
        if _POINTS & set(phrase.lower().split()):
            continue
        content = [_stem(w) for w in re.findall(r"[^\W\d_][\w\-]*", phrase.lower())
                   if w not in _SMALL and w not in _WEAK and len(w) >= 3]
        if len(content) >= 2 or (content and len(content[0]) > 6):
            found.append((sum(min(counts[w], 4) for w in content) / len(content), -len(found), phrase))
        if len(found) == 3:
            break
    best = max(found, default=None)
    return best[2] if best and best[0] >= 1.5 else ""


def _repeated(text: str) -> str:
    """The run of two or three content words the abstract repeats most, else a long
    word it keeps coming back to."""
    toks = [w.strip("*_") for w in re.findall(r"[^\W\d_][\w\-]+", text.lower())]
    counts: Counter[str] = Counter()
    for n in (3, 2):
        for i in range(len(toks) - n + 1):
            gram = toks[i: i + n]
            if any(w in STOPWORDS or w in _WEAK or len(w) < 3 for w in gram):
                continue
            counts[" ".join(gram)] += 1
    for w in toks:  # a single word only when it keeps coming back
        if len(w) >= 6 and w not in STOPWORDS and w not in _WEAK:
            counts[w] += 1
    best = [(c * len(g.split()), g) for g, c in counts.items() if c >= 2 and " " in g] or \
        [(c, g) for g, c in counts.items() if c >= 3 and " " not in g]
    if not best:
        return ""
    # As first written ("GNN explainers", not "gnn explainers").
    gram = max(best)[1]
    found = re.search(r"\b" + r"\W+".join(map(re.escape, gram.split())) + r"\b", text, re.I)
    return found.group(0) if found else gram
