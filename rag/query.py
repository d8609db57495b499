"""A question analysed once into the record every stage shares.

Retrieval, the judge, the near-miss wording and verification all used to re-read
the raw string with their own regular expressions; now each reads the fields it
needs from one :class:`Query`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError
from .text import is_survey, specific_terms


@dataclass(frozen=True)
class Query:
    text: str  # as asked (the judge reads this)
    search: str  # what retrieval searches for: a chat turn rewritten to stand alone
    survey: bool  # after every paper on a topic, not after one paper
    specifics: frozenset[str]  # numbers, acronyms and names it gives

    @classmethod
    def analyse(cls, text: str, search: str | None = None) -> "Query":
        # No vector here: retrieval embeds ``search`` (without a survey frame) and
        # caches it, and no other stage reads one.
        text = " ".join(text.split())
        return cls(text=text, search=search or text, survey=is_survey(text),
                   specifics=frozenset(specific_terms(text)))


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
