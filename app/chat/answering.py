"""Answers being written, so that background work (the history's commits) can let them go first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


class Answering:
    """How many answers the app is writing now; other work may wait until none is."""

    def __init__(self) -> None:
        self._count = 0
        self._none = asyncio.Event()
        self._none.set()

    @contextlib.contextmanager
    def answer(self) -> Iterator[None]:
        """Count one answer as being written while the block runs."""
        self._count += 1
        self._none.clear()
        try:
            yield
        finally:
            self._count -= 1
            if not self._count:
                self._none.set()

    async def over(self, at_most_s: float) -> None:
        """Return once no answer is being written, or after at_most_s however many still are."""
        if self._count:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none.wait(), at_most_s)
