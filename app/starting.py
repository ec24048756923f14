"""Answers waiting for their first token, so that background work can let them start first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator


class Starting:
    """How many answers are waiting for their first token; other work may wait until none is."""

    def __init__(self) -> None:
        self.count = 0
        self._none = asyncio.Event()
        self._none.set()

    @contextlib.contextmanager
    def answer(self) -> Iterator[Callable[[], None]]:
        """Count one answer as starting until the yielded callable is called (its first token) or the block ends."""
        started = False

        def first_token() -> None:
            nonlocal started
            if not started:
                started = True
                self.count -= 1
                if not self.count:
                    self._none.set()

        self.count += 1
        self._none.clear()
        try:
            yield first_token
        finally:
            first_token()

    async def over(self, at_most_s: float) -> None:
        """Return once no answer is starting, or after at_most_s however many still are."""
        if self.count:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none.wait(), at_most_s)
