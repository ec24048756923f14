"""Join streamed deltas into fewer UI updates without delaying the first one."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable


class Coalescer:
    """Sends a delta at once if `interval` seconds passed since the last send ended, else holds it for the next."""

    def __init__(
        self, send: Callable[[str], Awaitable[object]], interval: float, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._pending: list[str] = []
        self._last_sent = float("-inf")
        self.sends = 0

    async def add(self, delta: str) -> None:
        """Queue a delta; send everything queued if the interval has passed."""
        self._pending.append(delta)
        if self._clock() - self._last_sent >= self._interval:
            await self.flush()

    async def flush(self) -> None:
        """Send whatever is queued."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self.sends += 1
        await self._send(text)
        # From the send's end: a page update slower than the interval (a busy event loop) is not followed by one per
        # delta, which would make it busier; the deltas read meanwhile go in the next one.
        self._last_sent = self._clock()
