"""Answers being written, so that background work (the history's commits) can let them go first, and a stopping
app can stop them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any


class Answering:
    """How many answers the app is writing now; other work may wait until none is."""

    def __init__(self) -> None:
        self._count = 0
        self._none = asyncio.Event()
        self._none.set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def writing(self) -> int:
        """How many answers are being written now."""
        return self._count

    @contextlib.contextmanager
    def answer(self) -> Iterator[None]:
        """Count one answer as being written while the block runs."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._count += 1
        self._none.clear()
        try:
            yield
        finally:
            if task is not None:
                self._tasks.discard(task)
            self._count -= 1
            if not self._count:
                self._none.set()

    async def stop_all(self, at_most_s: float) -> None:
        """Stop every answer being written (the app is stopping: each keeps what it showed), and wait for them."""
        for task in self._tasks:
            task.cancel()
        await self.over(at_most_s)

    async def over(self, at_most_s: float) -> None:
        """Return once no answer is being written, or after at_most_s however many still are."""
        if self._count:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none.wait(), at_most_s)
