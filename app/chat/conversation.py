"""One session's conversation and the token budget that fits it into the model's window."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from app.errors import ChatError, Problem

Message = dict[str, str]
TokenCounter = Callable[[list[Message]], Awaitable[int]]
TokenBound = Callable[[list[Message]], Awaitable[int | None]]

# A reply shorter than this is not worth sending a request for.
MIN_REPLY_TOKENS = 16


class Ending(StrEnum):
    """How an assistant answer ended."""

    COMPLETE = "complete"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass
class Turn:
    """A user message and the answer it got (possibly partial)."""

    user: str
    assistant: str = ""
    ending: Ending = Ending.COMPLETE
    message_id: str = ""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What to send: the messages that fit, the reply budget, and what was left out."""

    messages: list[Message]
    max_tokens: int
    prompt_tokens: int | None
    dropped_turns: int


@dataclass
class Conversation:
    """The turns of one branch of a chat, oldest first."""

    turns: list[Turn] = field(default_factory=list)

    def messages(self, system_prompt: str, user_text: str, skip: int = 0) -> list[Message]:
        """Chat messages for a new user message, leaving out the `skip` oldest turns."""
        messages: list[Message] = []
        if system_prompt.strip():
            messages.append({"role": "system", "content": system_prompt})
        for turn in self.turns[skip:]:
            messages.append({"role": "user", "content": turn.user})
            messages.append({"role": "assistant", "content": turn.assistant})
        messages.append({"role": "user", "content": user_text})
        return messages


async def plan_request(
    conversation: Conversation,
    *,
    system_prompt: str,
    user_text: str,
    max_tokens: int,
    window: int,
    count: TokenCounter,
    bound: TokenBound | None = None,
) -> Plan:
    """Drop the oldest turns until prompt + max_tokens fits the window; clamp max_tokens if needed.

    `count` is exact and costs a request; `bound`, an upper bound, spares it whenever the whole
    conversation surely fits (prompt_tokens is then None).
    """
    full = conversation.messages(system_prompt, user_text)
    at_most = await bound(full) if bound is not None and window > 0 else None
    if window <= 0 or (at_most is not None and at_most + max_tokens <= window):
        return Plan(messages=full, max_tokens=max_tokens, prompt_tokens=None, dropped_turns=0)
    tokens = await count(full)
    if tokens + max_tokens <= window:
        return Plan(messages=full, max_tokens=max_tokens, prompt_tokens=tokens, dropped_turns=0)

    n_turns = len(conversation.turns)
    alone = conversation.messages(system_prompt, user_text, skip=n_turns) if n_turns else full
    alone_tokens = await count(alone) if n_turns else tokens
    min_reply = min(max_tokens, MIN_REPLY_TOKENS)
    if alone_tokens + min_reply > window:
        raise ChatError(Problem.MESSAGE_TOO_LONG, tokens=alone_tokens, limit=window - min_reply)
    if alone_tokens + max_tokens > window:
        return Plan(messages=alone, max_tokens=window - alone_tokens, prompt_tokens=alone_tokens, dropped_turns=n_turns)

    # Counts shrink as more turns are skipped: find the fewest skipped turns that fit.
    # `best` always holds the plan for `high`, which is known to fit.
    low, high, best = 1, n_turns, (n_turns, alone, alone_tokens)
    while low < high:
        middle = (low + high) // 2
        candidate = conversation.messages(system_prompt, user_text, skip=middle)
        candidate_tokens = await count(candidate)
        if candidate_tokens + max_tokens <= window:
            high, best = middle, (middle, candidate, candidate_tokens)
        else:
            low = middle + 1
    skip, messages, prompt_tokens = best
    return Plan(messages=messages, max_tokens=max_tokens, prompt_tokens=prompt_tokens, dropped_turns=skip)
