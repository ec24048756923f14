"""One session's conversation and the token budget that fits it into the model's window."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from app.config import DEFAULT_LOW_WATER
from app.errors import ChatError, Problem

Message = dict[str, str]
TokenCounter = Callable[[list[Message]], Awaitable[int]]
TokenBound = Callable[[list[Message]], Awaitable[int | None]]

# A reply shorter than this is not worth sending a request for.
MIN_REPLY_TOKENS = 16


async def most_that_fit(fits: Callable[[int], Awaitable[bool]], most: int) -> int:
    """The largest n in [0, most] for which `fits(n)` holds, when taking more never helps (0 is taken to fit)."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if await fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


class Ending(StrEnum):
    """How an assistant answer ended."""

    COMPLETE = "complete"
    STOPPED = "stopped"
    FAILED = "failed"
    # The app stopped (killed, the machine down) while it was written: the text shown so far, kept as it streamed.
    CUT_OFF = "cut_off"


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


def answer_room(max_tokens: int, window: int) -> int:
    """The answer the documents' budgets keep room for: max_tokens, but at most half the window (a max_tokens at or
    above the window would leave a file or passages none)."""
    return min(max_tokens, window // 2) if window > 0 else max_tokens


async def plan_request(
    conversation: Conversation,
    *,
    system_prompt: str,
    user_text: str,
    max_tokens: int,
    window: int,
    count: TokenCounter,
    bound: TokenBound | None = None,
    kept_from: int = 0,
    low_water: float = DEFAULT_LOW_WATER,
) -> Plan:
    """The turns that fit prompt + max_tokens into the window, starting where the previous prompt started.

    `kept_from`: the oldest turns the previous prompt of this branch left out. The prompt starts there as long as
    it fits, so that vLLM finds all but the newest turn in its prefix cache; once it no longer fits, old turns are
    left out down to `low_water` of the room, and the next turns start there. max_tokens is clamped when even the
    message alone leaves less room. `count` is exact and costs a request; `bound`, an upper bound, spares it
    whenever the prompt surely fits (prompt_tokens is then None).
    """
    n_turns = len(conversation.turns)
    start = min(max(kept_from, 0), n_turns)
    kept = conversation.messages(system_prompt, user_text, skip=start)
    at_most = await bound(kept) if bound is not None and window > 0 else None
    if window <= 0 or (at_most is not None and at_most + max_tokens <= window):
        return Plan(messages=kept, max_tokens=max_tokens, prompt_tokens=None, dropped_turns=start)
    tokens = await count(kept)
    if tokens + max_tokens <= window:
        return Plan(messages=kept, max_tokens=max_tokens, prompt_tokens=tokens, dropped_turns=start)

    alone = conversation.messages(system_prompt, user_text, skip=n_turns) if start < n_turns else kept
    alone_tokens = await count(alone) if start < n_turns else tokens
    min_reply = min(max_tokens, MIN_REPLY_TOKENS)
    if alone_tokens + min_reply > window:
        raise ChatError(Problem.MESSAGE_TOO_LONG, tokens=alone_tokens, limit=window - min_reply)
    if alone_tokens + max_tokens > window:
        return Plan(messages=alone, max_tokens=window - alone_tokens, prompt_tokens=alone_tokens, dropped_turns=n_turns)

    # A step: the fewest more turns left out that bring the prompt down to the low-water mark (all of them if
    # even the message alone is above it). Counts shrink as more turns are left out; `best` holds `high`'s plan.
    lowest = low_water * (window - max_tokens)
    low, high, best = start + 1, n_turns, (n_turns, alone, alone_tokens)
    while low < high:
        middle = (low + high) // 2
        candidate = conversation.messages(system_prompt, user_text, skip=middle)
        candidate_tokens = await count(candidate)
        if candidate_tokens <= lowest:
            high, best = middle, (middle, candidate, candidate_tokens)
        else:
            low = middle + 1
    skip, messages, prompt_tokens = best
    return Plan(messages=messages, max_tokens=max_tokens, prompt_tokens=prompt_tokens, dropped_turns=skip)


async def plan_messages(
    messages: list[Message], *, max_tokens: int, window: int, count: TokenCounter, bound: TokenBound | None = None
) -> Plan:
    """Messages sent as a client gave them (none left out): max_tokens lowered to the room the window leaves;
    MESSAGE_TOO_LONG when not even a short reply fits."""
    at_most = await bound(messages) if bound is not None and window > 0 else None
    if window <= 0 or (at_most is not None and at_most + max_tokens <= window):
        return Plan(messages=messages, max_tokens=max_tokens, prompt_tokens=None, dropped_turns=0)
    tokens = await count(messages)
    min_reply = min(max_tokens, MIN_REPLY_TOKENS)
    if tokens + min_reply > window:
        raise ChatError(Problem.MESSAGE_TOO_LONG, tokens=tokens, limit=window - min_reply)
    return Plan(messages=messages, max_tokens=min(max_tokens, window - tokens), prompt_tokens=tokens, dropped_turns=0)
