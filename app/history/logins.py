"""Failed logins and ended sessions, kept in the history database: shared by replicas, kept across restarts."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import ended_sessions, login_failures, users
from app.history.writes import Writer

# One client address may fail this many times more than one user name: colleagues behind one address.
ADDRESS_FACTOR = 4


def digest(token: str) -> str:
    """What is kept of a login token: its SHA-256 (a leaked table ends no session and opens none)."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class LoginToken:
    """A login token, and what its claims say: whose it is and when it was issued."""

    token: str
    user: str
    issued_at: float


@dataclass(frozen=True)
class Logins:
    """Login throttling (failures in a sliding window, per user name and per address) and ended sessions."""

    writer: Writer
    attempts: int
    window_s: float

    async def wait_before_trying(self, name: str, address: str) -> float:
        """Seconds until a login for this name from this address may be tried (0: now)."""
        since = time.time() - self.window_s

        def wait(connection: Connection) -> float:
            waits = [0.0]
            for column, key, allowed in (
                (login_failures.c.name, name, self.attempts),
                (login_failures.c.address, address, self.attempts * ADDRESS_FACTOR),
            ):
                recent = (
                    sa.select(login_failures.c.at)
                    .where(column == key, login_failures.c.at > since)
                    .order_by(login_failures.c.at.desc())
                    .limit(allowed)
                )
                times = list(connection.execute(recent).scalars())
                if len(times) >= allowed:  # the oldest of the last `allowed` failures must leave the window
                    waits.append(times[-1] - since)
            return max(waits)

        return await self.writer.read("check recent failed logins", wait)

    async def valid_from(self, name: str) -> float:
        """When the user's current logins began to count (a new password's next second; 0: always)."""
        query = sa.select(users.c.sessions_from).where(users.c.identifier == name)
        valid_from: float | None = await self.writer.read("read when logins count", lambda c: c.execute(query).scalar())
        return valid_from or 0.0

    async def failed(self, name: str, address: str) -> None:
        """Count a failed login; failures older than the window are let go."""
        now = time.time()

        def record(connection: Connection) -> None:
            connection.execute(sa.delete(login_failures).where(login_failures.c.at < now - self.window_s))
            connection.execute(sa.insert(login_failures).values(name=name[:255], address=address[:64], at=now))

        await self.writer.write("count a failed login", record)

    async def end(self, token: str, expires_at: float) -> None:
        """End a session: its token opens nothing from now on (expired ones are let go)."""
        now = time.time()

        def record(connection: Connection) -> None:
            connection.execute(sa.delete(ended_sessions).where(ended_sessions.c.expires_at < now))
            row = {"token_digest": digest(token), "expires_at": expires_at}
            connection.execute(sa.insert(ended_sessions).values(**row))

        await self.writer.write("end a session", record)

    async def ended(self, logins: Collection[LoginToken]) -> set[str]:
        """The tokens among these whose session is over: logged out, user removed, or a password set since issued.

        One read however many: the sweep checks every open connection at once.
        """
        if not logins:
            return set()
        by_digest = {digest(login.token): login for login in logins}
        names = {login.user for login in logins}

        def over(connection: Connection) -> set[str]:
            logged_out = ended_sessions.c.token_digest
            out = set(connection.execute(sa.select(logged_out).where(logged_out.in_(by_digest))).scalars())
            accounts = sa.select(users.c.identifier, users.c.sessions_from).where(users.c.identifier.in_(names))
            sessions_from = {name: since or 0 for name, since in connection.execute(accounts)}
            return {
                login.token
                for token_digest, login in by_digest.items()
                if token_digest in out or login.user not in sessions_from or sessions_from[login.user] > login.issued_at
            }

        return await self.writer.read("check logins", over)
