"""A question analysed once into the record every stage shares.

Retrieval, the judge, the near-miss wording and verification all used to re-read
the raw string with their own regular expressions; now each reads the fields it
needs from one :class:`Query`.
"""

from __future__ import annotations

from dataclasses import dataclass

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
