"""Small fakes for fast tests."""

from __future__ import annotations


class FakeModel:
    """Says what it is told; records the prompts it was given."""

    path = "fake.gguf"
    sha256 = "0" * 64

    def __init__(self, reply: str = "", n_ctx: int = 2048):
        self.reply = reply
        self.n_ctx = n_ctx
        self.prompts: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split()) * 2

    def stream(self, system: str, user: str, max_tokens: int):
        self.prompts.append(system + "\n" + user)
        yield from self.reply.split(" ")[:1]
        for w in self.reply.split(" ")[1:]:
            yield " " + w
