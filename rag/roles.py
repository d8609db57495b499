"""What each sentence of an abstract does: background, contribution, method, result
or other (links, organisation).

Answers say what a paper contributes and what it found, and leave background and
code links out unless asked (issue #14); reviews and the research table put the
contribution and the result in their columns. A linear model over the sentence's
words and its place in the abstract reads this; it is trained here on the roles the
synthetic judge data carries (training/roles/train.py, model card in
rag/roles_model/MODEL_CARD.md) and runs in microseconds with numpy alone.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from .text import URL

ROLES = ("background", "contribution", "method", "result", "other")
MODEL_FILE = Path(__file__).parent / "roles_model" / "roles.json"
BACKGROUND_AT = 0.3  # probability from which a sentence counts as background (model card)

_TOKEN = re.compile(r"[a-z]+(?:-[a-z]+)*|\d+(?:\.\d+)?%?|[$×%]")
_NUMBER = re.compile(r"^\d")
_ASIDE_CUE = re.compile(r"https?://|www\.|github|\b(?:code|codes|data(?:set)?s? (?:is|are) (?:publicly )?available|"
                        r"available at|project page|website|released?|organi[sz]ed as follows)\b", re.I)
# Where the authors look beyond what they did ("We hope our contributions can
# inspire ...", "We expect that these advances will enable ...") or praise it
# ("GraphCast is a key advance in ...", "This work presents a significant step
# towards ..."): no contribution or result a question asks for; a careful reader
# found such closing sentences quoted as the last, irrelevant quote of answers.
_OUTLOOK = re.compile(r"^(?:(?:Finally|Overall|Ultimately|Altogether|In (?:summary|conclusion)),\s+)?"
                      r"(?:we|this (?:work|paper|study)|our (?:work|results|findings|contributions))\s+"
                      r"(?:\w+ly\s+)?(?:hope|expect|anticipate|envision|envisage|foresee)\b"
                      r"|\b(?:is|represents|presents|marks|constitutes) an? (?:\w+ )?(?:significant|important|"
                      r"major|key|crucial|promising|substantial) (?:step|advance|milestone)s?\b", re.I)
_WE_VERB = re.compile(r"\b(?:we|this (?:paper|work))\s+(?:\w+ly\s+|also\s+|further\s+|then\s+|first\s+)*"
                      r"(\w+?)(?:s|es|ed|d)?\b")


def features(sentence: str, i: int, n: int) -> list[str]:
    """Words, word pairs and where the sentence stands: what abstracts mark each part
    with ("we propose", "outperforms", "recent years", "github")."""
    toks = ["<num>" if _NUMBER.match(t) else t for t in _TOKEN.findall(sentence.lower())]
    out = [f"w:{t}" for t in toks] + [f"b:{a} {b}" for a, b in zip(["<s>"] + toks, toks)]
    # What the authors do ("we introduce", "we show that"), past any adverbs.
    out += [f"we:{m.group(1)}" for m in _WE_VERB.finditer(sentence.lower())]
    rel = i / max(n - 1, 1)
    out += [f"pos:{min(int(rel * 5), 4)}", f"first:{i == 0}", f"last:{i == n - 1}",
            f"url:{bool(URL.search(sentence))}"]
    return out


class Tagger:
    def __init__(self, model_file: Path = MODEL_FILE):
        data = json.loads(model_file.read_text(encoding="utf-8"))
        self.roles = tuple(data["roles"])
        self.vocab = {f: i for i, f in enumerate(data["features"])}
        self.weights = np.asarray(data["weights"], dtype=np.float32)  # (features, roles)
        self.bias = np.asarray(data["bias"], dtype=np.float32)

    def probabilities(self, sentences: list[str]) -> np.ndarray:
        """(sentences, roles) probabilities, in the order of :data:`ROLES`."""
        n = len(sentences)
        z = np.tile(self.bias, (n, 1))
        for i, s in enumerate(sentences):
            idx = [self.vocab[f] for f in set(features(s, i, n)) if f in self.vocab]
            if idx:
                z[i] += self.weights[idx].sum(axis=0)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def tag(self, sentences: list[str]) -> list[str]:
        """The most probable role of each sentence, except: "other" (left out of
        answers) only for a sentence that speaks of code, data or a link, since a
        result read as "other" would be lost, and for one that looks beyond the
        work or praises it (``_OUTLOOK``); "background" from a probability of
        :data:`BACKGROUND_AT`, which an answer leaves out as well."""
        if not sentences:
            return []
        p = self.probabilities(sentences)
        other, background = self.roles.index("other"), self.roles.index("background")
        for i, s in enumerate(sentences):
            if not _ASIDE_CUE.search(s):
                p[i, other] = 0.0
        out = [self.roles[j] if not _OUTLOOK.search(s) else "other" for j, s in zip(p.argmax(axis=1), sentences)]
        # Quoting background costs the reader more than leaving one out costs the answer.
        return ["background" if p[i, background] >= BACKGROUND_AT else r for i, r in enumerate(out)]


@lru_cache(maxsize=1)
def tagger() -> Tagger:
    return Tagger()
