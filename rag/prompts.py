"""Prompt templates, loaded from ``prompts/*.txt`` and checked at start.

Each template declares its placeholders here; a file that is missing or lacks one
is a :class:`PromptError` when the prompts are loaded, not a failure mid-answer.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path

from .config import PROMPTS_DIR
from .errors import PromptError

# template name -> placeholders it must contain
REQUIRED: dict[str, set[str]] = {
    "evidence.system": set(),
    "evidence.user": {"abstract", "question"},
    "review.user": {"abstract", "topic"},
}


@dataclass(frozen=True)
class Prompts:
    templates: dict[str, str]

    def render(self, name: str, **values: str) -> str:
        return self.templates[name].format(**values)


def load(directory: Path = PROMPTS_DIR) -> Prompts:
    templates = {}
    for name, needed in REQUIRED.items():
        path = directory / f"{name}.txt"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError:
            raise PromptError(f"prompt file {path} is missing; restore it from the repository") from None
        try:
            found = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        except ValueError as e:
            raise PromptError(f"{path}: {e}; write literal braces as {{{{ and }}}}") from None
        if needed - found:
            raise PromptError(f"{path} lacks the placeholder(s) "
                              f"{', '.join('{' + f + '}' for f in sorted(needed - found))}; add them")
        if found - needed:
            raise PromptError(f"{path} has unknown placeholder(s) "
                              f"{', '.join('{' + f + '}' for f in sorted(found - needed))}; "
                              f"allowed: {', '.join(sorted(needed)) or 'none'}")
        templates[name] = text
    return Prompts(templates)


# The prompts fence source text in <abstract> ... </abstract> and tell the model
# that what is inside is data (spotlighting, Hines et al. 2024).
_FENCE = re.compile(r"<\s*/?\s*abstract\s*>", re.I)


def fence(text: str) -> str:
    """Source text as it goes between the fences: any spelling of the fence tags
    removed, so the text cannot close its data block and speak after it."""
    return _FENCE.sub(" ", text)
