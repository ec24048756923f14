"""Fair shares of the model between users: answers at once, messages per minute, tokens per day.

Answers and messages are counted in this app process (per replica); tokens per day in the history database.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from app.errors import ChatError, HistoryUnavailable, Problem

MINUTE_S = 60.0


class DailyUsage(Protocol):
    """Where each user's tokens per UTC day are counted (the history's usage table)."""

    async def tokens_today(self, user: str) -> int:
        """The tokens the user used today."""

    async def add(self, user: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count an answer's tokens for the user today."""


@dataclass(frozen=True)
class Limits:
    """A user's limits (None: the default for everyone)."""

    answers_at_once: int | None = None
    messages_per_minute: int | None = None
    daily_tokens: int | None = None  # 0: no quota


@dataclass(frozen=True)
class Allowed:
    """What a user may have now: their own limits over the defaults."""

    answers_at_once: int
    messages_per_minute: int
    daily_tokens: int  # 0: no quota


class OwnLimits(Protocol):
    """Where limits set for one user are kept (the history's, shared by every replica)."""

    async def limits_of(self, user: str) -> Limits:
        """The user's own limits."""


def hours_to_midnight() -> int:
    """Whole hours (rounded up) until the UTC day, and so a daily quota, starts again."""
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, -(-int((midnight - now).total_seconds()) // 3600))


@dataclass
class Quotas:
    """What each user may ask of the model now; users in `exempt` (the local user) and anonymous chats are free."""

    answers_at_once: int
    messages_per_minute: int
    daily_tokens: int  # 0: no quota
    usage: DailyUsage | None = None
    exempt: frozenset[str] = frozenset()
    own_limits: OwnLimits | None = None
    answering_now: Counter[str] = field(default_factory=Counter)
    sent: dict[str, deque[float]] = field(default_factory=dict)
    counting: set[asyncio.Task[None]] = field(default_factory=set)

    async def reason_to_refuse(self, user: str | None) -> ChatError | None:
        """Why this user may not have another answer now (None: they may; the message is then counted)."""
        if user is None or user in self.exempt:
            return None
        limits = await self.limits_of(user)
        if self.answering_now[user] >= limits.answers_at_once:
            return ChatError(Problem.ANSWERS_AT_ONCE, limit=limits.answers_at_once)
        now = time.monotonic()
        sent = self.sent.setdefault(user, deque())
        while sent and sent[0] <= now - MINUTE_S:
            sent.popleft()
        if len(sent) >= limits.messages_per_minute:
            wait = math.ceil(sent[0] + MINUTE_S - now)
            return ChatError(Problem.TOO_MANY_MESSAGES, limit=limits.messages_per_minute, seconds=wait)
        if limits.daily_tokens and self.usage is not None:
            with contextlib.suppress(HistoryUnavailable):  # the database is down: chatting goes on
                if await self.usage.tokens_today(user) >= limits.daily_tokens:
                    return ChatError(Problem.QUOTA_USED, limit=limits.daily_tokens, hours=hours_to_midnight())
        sent.append(now)
        return None

    async def limits_of(self, user: str) -> Allowed:
        """The user's limits now: their own where an admin set one (read at each message), else the defaults."""
        own = Limits()
        if self.own_limits is not None:
            with contextlib.suppress(HistoryUnavailable):  # the database is down: the defaults hold
                own = await self.own_limits.limits_of(user)
        return Allowed(
            self.answers_at_once if own.answers_at_once is None else own.answers_at_once,
            self.messages_per_minute if own.messages_per_minute is None else own.messages_per_minute,
            self.daily_tokens if own.daily_tokens is None else own.daily_tokens,
        )

    @contextlib.contextmanager
    def answering(self, user: str | None) -> Iterator[None]:
        """Count an answer as being written for the user while the block runs."""
        if user is not None:
            self.answering_now[user] += 1
        try:
            yield
        finally:
            if user is not None:
                self.answering_now[user] -= 1
                if not self.answering_now[user]:
                    del self.answering_now[user]

    def used(self, user: str | None, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """Count an answer's tokens toward the user's day, in the background: the answer's end waits for no write."""
        if user is not None and self.usage is not None:
            counting = asyncio.create_task(self.usage.add(user, prompt_tokens or 0, completion_tokens or 0))
            self.counting.add(counting)  # the loop keeps only weak references to tasks
            counting.add_done_callback(self.counting.discard)
