"""A person's memory for the model: their facts in one fixed rendering at the system prompt's start, within a token
cap of its own; and the fact a message asks to remember ("remember …").

The rendering depends on the facts alone (oldest first, one line each), so a long chat's prompts keep the same first
bytes turn after turn and vLLM keeps finding them in its cache. Facts past the cap are left out from the newest, so a
new fact never moves the ones before it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from app.chat.conversation import most_that_fit
from app.chat.token_bound import content_bound

# The longest fact one keeps: a short line about oneself, not a document.
FACT_MAX_CHARS = 500
TextCounter = Callable[[Sequence[str]], Awaitable[list[int]]]
# "remember …", "Remember: …", "please remember that …"; "记住…", "请记住…" (a colon or comma, full-width too, may
# follow). A question is not a fact.
SEPARATOR = r"(?:\s*[:,\uff1a\uff0c]\s*|\s+)"
ASKED = (
    re.compile(rf"^\s*(?:please\s+)?remember(?:\s+that)?{SEPARATOR}(?P<fact>\S.*)$", re.IGNORECASE | re.DOTALL),
    re.compile(r"^\s*请?记住(?:\s*[:,\uff1a\uff0c]\s*|\s*)(?P<fact>\S.*)$", re.DOTALL),
)


def one_line(text: str) -> str:
    """A fact as the model reads it: its words on one line."""
    return " ".join(text.split())


def asked_to_remember(message: str) -> str | None:
    """The fact a message asks to remember, on one line (None: it asks no such thing, or asks a question)."""
    for pattern in ASKED:
        if (found := pattern.match(message)) is not None:
            fact = one_line(found["fact"])
            return None if fact.endswith(("?", "？")) else fact
    return None


def rendered(heading: str, facts: Sequence[str]) -> str:
    """The memory as the system prompt starts with it ("" without facts)."""
    if not facts:
        return ""
    return "\n".join([heading, *(f"- {one_line(fact)}" for fact in facts)])


async def recalled(heading: str, facts: Sequence[str], cap: int, count: TextCounter) -> str:
    """The memory with as many of the oldest facts as fit `cap` tokens, counted exactly only near the cap."""

    async def fits(n: int) -> bool:
        text = rendered(heading, facts[:n])
        return content_bound(text) <= cap or (await count([text]))[0] <= cap

    if cap <= 0:
        return ""
    return rendered(heading, facts[: await most_that_fit(fits, len(facts))])
