"""An upper bound on a chat prompt's tokens, so that vLLM's /tokenize is asked only near the window.

Why it is an upper bound. vLLM renders the messages with the model's chat template into one text and
tokenizes it. Every token of that text is either a special token of the template or covers at least
one byte of the (normalized) text: a byte-level BPE token holds one or more bytes; a SentencePiece
piece holds one or more characters and a byte-fallback piece exactly one byte. SentencePiece adds at
most one dummy-prefix piece and normalizes with NFKC, which can lengthen a character: the bytes of a
message are counted after NFKC when that is longer. So

    tokens(prompt) <= bytes(template text) + special tokens + sum(bytes of each message, NFKC or not) + 1.

The template's part is measured once per model on probe conversations whose messages hold one
character each: `tokens(probe) + bytes(detokenized probe)` bounds its special tokens plus its text.
A template whose cost does not grow by the same amount per turn gets no bound (every prompt is then
counted exactly, as before).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Message = dict[str, str]
PROBE_TEXT = "x"


def content_bound(text: str) -> int:
    """At most this many tokens come from a message's text (bytes, after NFKC if longer, plus one)."""
    raw = len(text.encode())
    return max(raw, len(unicodedata.normalize("NFKC", text).encode())) + 1


def probe(*, system: bool, turns: int) -> list[Message]:
    """A conversation of one-character messages: an optional system line, earlier turns, a new question."""
    messages = [{"role": "system", "content": PROBE_TEXT}] if system else []
    for _ in range(turns):
        messages += [{"role": "user", "content": PROBE_TEXT}, {"role": "assistant", "content": PROBE_TEXT}]
    return [*messages, {"role": "user", "content": PROBE_TEXT}]


@dataclass(frozen=True, kw_only=True)
class TemplateCost:
    """What the chat template adds, as an upper bound in tokens: per prompt shape and per earlier turn."""

    with_system: int
    without_system: int
    per_turn: int

    def prompt_bound(self, messages: list[Message]) -> int:
        """At most this many tokens make up the rendered prompt of these messages."""
        has_system = bool(messages) and messages[0]["role"] == "system"
        turns = (len(messages) - has_system - 1) // 2
        base = self.with_system if has_system else self.without_system
        return base + turns * self.per_turn + sum(content_bound(m["content"]) for m in messages)


ProbeCost = Callable[[list[Message]], Awaitable[int]]


async def learn_template_cost(cost: ProbeCost) -> TemplateCost | None:
    """Measure the template on probes (cost: tokens plus detokenized bytes); None if it is not linear per turn."""
    one = await cost(probe(system=True, turns=0))
    two = await cost(probe(system=True, turns=1))
    three = await cost(probe(system=True, turns=2))
    if three - two != two - one:
        return None
    return TemplateCost(with_system=one, without_system=await cost(probe(system=False, turns=0)), per_turn=two - one)
