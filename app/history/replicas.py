"""The app processes serving the chat: each writes a heartbeat, so the admin page lists those seen recently."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.errors import HistoryUnavailable
from app.history.schema import replicas
from app.history.writes import Writer

HEARTBEAT_S = 30.0
# A replica not seen for this long is listed as gone; after a day its row is let go.
RECENT_S = 3 * HEARTBEAT_S
FORGOTTEN_S = 86_400.0


@dataclass
class Replicas:
    """This process's heartbeat, and the processes seen."""

    writer: Writer
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = field(default_factory=time.time)
    beating: asyncio.Task[None] | None = None

    async def beat(self) -> None:
        """Say this process serves now (and let go of the rows of long-gone ones)."""
        now = time.time()
        row = {"id": self.id, "host": socket.gethostname()[:255], "pid": os.getpid(), "started_at": self.started_at}

        def work(connection: Connection) -> None:
            connection.execute(sa.delete(replicas).where(replicas.c.seen_at < now - FORGOTTEN_S))
            if not connection.execute(sa.update(replicas).where(replicas.c.id == self.id).values(seen_at=now)).rowcount:
                connection.execute(sa.insert(replicas).values(**row, seen_at=now))

        await self.writer.write("note this replica", work)

    def start(self) -> None:
        """Beat now and every HEARTBEAT_S while the app runs."""

        async def keep_beating() -> None:
            while True:
                with contextlib.suppress(HistoryUnavailable):  # the database is away: the next beat tries again
                    await self.beat()
                await asyncio.sleep(HEARTBEAT_S)

        self.beating = asyncio.create_task(keep_beating())

    async def seen(self) -> list[dict[str, object]]:
        """The processes seen in the last day, newest first, each saying whether it beat recently."""
        rows = await self.writer.read(
            "list the replicas", lambda c: list(c.execute(sa.select(replicas).order_by(replicas.c.seen_at.desc())))
        )
        now = time.time()
        return [{**row._mapping, "recent": now - row.seen_at < RECENT_S, "this": row.id == self.id} for row in rows]
