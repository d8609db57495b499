"""The one exception tree of the project.

Every error a user can cause or fix derives from :class:`RagError`. Its message is
one line that says what went wrong and what to do next; the CLI prints exactly that
line (no traceback) and exits with ``exit_code``.

    RagError
    ├── InputError          a corpus file is empty, binary or malformed
    ├── IndexMismatchError  the index was built with another embedder or chunker
    ├── StoreError          the vector store cannot be opened or written
    ├── ModelError          the embedding or chat model cannot be found or loaded
    ├── PromptError         a prompt template is missing or lacks a placeholder
    ├── UsageError          a command was called with arguments that cannot work
    ├── ServerError         a Chroma or LLM server cannot be reached or fails
    ├── LockedError         another process is writing to the index
    └── NotFoundError       the entry or source asked for is not in the index

Exit codes (README.md lists them): 0 done, 1 declined or not found, 2 usage,
3 input, 4 store, 5 model, 6 prompt, 7 server, 8 locked, 130 interrupted.
"""

from __future__ import annotations


class RagError(Exception):
    """Base of every error the CLI turns into a one-line message."""

    exit_code = 1


class InputError(RagError):
    """A corpus file (or a position in it) cannot be read; other files still ingest."""

    exit_code = 3


class IndexMismatchError(RagError):
    """The stored index does not match the current embedder or chunker."""

    exit_code = 4


class StoreError(RagError):
    """The vector store cannot be opened, reached or written."""

    exit_code = 4


class ModelError(RagError):
    """A model file is missing, truncated or not loadable."""

    exit_code = 5


class PromptError(RagError):
    """A prompt template is missing or lacks a required placeholder."""

    exit_code = 6


class UsageError(RagError):
    """Arguments that cannot work together or point at nothing."""

    exit_code = 2


class ServerError(RagError):
    """A Chroma or LLM server cannot be reached or answers with an error."""

    exit_code = 7


class NotFoundError(RagError):
    """The entry, key or source file asked for is not in the index."""

    exit_code = 1


class LockedError(RagError):
    """Another process holds the index's write lock."""

    exit_code = 8
