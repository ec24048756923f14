"""Personal API keys: made (shown once), listed, revoked, and a presented key resolved to its user.

A key is 256 random bits; the database keeps only its SHA-256 (a fast hash is right for a secret that cannot be
guessed: argon2 is for passwords people choose). Every request looks its key up, so a revocation holds at once on
every replica.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import api_keys, user_row, users
from app.history.team import Change, and_logged
from app.history.writes import Writer

# What every key starts with: secret scanners (and people) can tell one in a log or a commit.
PREFIX = "ek-"
# How much of a key its owner sees again: the prefix and a few characters.
SHOWN_CHARS = 8
# The last use is written at most this often per key: a script's every call costs no write.
LAST_USE_EVERY_S = 60.0


def digest(key: str) -> str:
    """The SHA-256 of a key, as kept."""
    return hashlib.sha256(key.encode()).hexdigest()


class Made(StrEnum):
    """What asking for a new key came to."""

    MADE = "made"
    TOO_MANY = "too_many"
    NO_USER = "no_user"


@dataclass(frozen=True)
class KeyInfo:
    """A key as its owner (or an admin) sees it: never the key itself."""

    id: str
    name: str
    start: str
    created_at: float
    last_used_at: float | None
    owner: str = ""


@dataclass(frozen=True)
class Holder:
    """Whose key a request presented, and which key it was."""

    user: str
    key_id: str


@dataclass
class ApiKeys:
    """The users' keys, through the history's writer; nothing here lists or revokes another user's but an admin's."""

    writer: Writer
    # The most keys one user holds at once.
    most: int
    # When each key's last use was written by this process (a script's calls write it once a minute).
    noted: dict[str, float] = field(default_factory=dict)
    noting: set[asyncio.Task[None]] = field(default_factory=set)

    async def make(self, user: str, name: str) -> tuple[Made, str, KeyInfo | None]:
        """A new key of the user's: the key itself (shown this once) and how it is listed."""
        key = PREFIX + secrets.token_urlsafe(32)
        info = KeyInfo(str(uuid.uuid4()), name, key[:SHOWN_CHARS], time.time(), None)

        def work(connection: Connection) -> Made:
            owner = connection.execute(sa.select(user_row(user))).scalar()
            if owner is None:
                return Made.NO_USER
            held = sa.select(sa.func.count()).select_from(api_keys).where(api_keys.c.user_id == owner)
            if (connection.execute(held).scalar() or 0) >= self.most:
                return Made.TOO_MANY
            row = {"id": info.id, "user_id": owner, "name": name, "digest": digest(key), "start": info.start}
            connection.execute(sa.insert(api_keys).values(**row, created_at=info.created_at))
            return Made.MADE

        made = Made(await self.writer.write("make an API key", work))
        return (made, key, info) if made is Made.MADE else (made, "", None)

    async def listed(self, user: str | None = None) -> list[KeyInfo]:
        """The user's keys (None: everyone's, with their owners), newest first."""
        query = sa.select(api_keys, users.c.identifier).join(users, users.c.id == api_keys.c.user_id)
        if user is not None:
            query = query.where(api_keys.c.user_id == user_row(user))
        query = query.order_by(api_keys.c.created_at.desc(), api_keys.c.id)
        rows = await self.writer.read("list API keys", lambda c: c.execute(query).all())
        return [KeyInfo(r.id, r.name, r.start, r.created_at, r.last_used_at, r.identifier) for r in rows]

    async def revoke(self, user: str, key_id: str) -> bool:
        """Revoke one of the user's keys; False if they have none of that id."""
        statement = sa.delete(api_keys).where(api_keys.c.id == key_id, api_keys.c.user_id == user_row(user))
        return bool(await self.writer.write("revoke an API key", lambda c: c.execute(statement).rowcount))

    async def revoke_any(self, change: Change, key_id: str) -> bool:
        """An admin revokes anyone's key (logged with it); False if there is no such key."""
        statement = sa.delete(api_keys).where(api_keys.c.id == key_id)
        work = and_logged(change, lambda c: c.execute(statement).rowcount)
        return bool(await self.writer.write("revoke an API key", work))

    async def holder(self, key: str) -> Holder | None:
        """The user a presented key is theirs (None: no such key, revoked, or its user removed); its use noted."""
        if not key.startswith(PREFIX):
            return None
        wanted = digest(key)
        query = (
            sa.select(api_keys.c.id, api_keys.c.digest, users.c.identifier)
            .join(users, users.c.id == api_keys.c.user_id)
            .where(api_keys.c.digest == wanted)
        )
        row = await self.writer.read("check an API key", lambda c: c.execute(query).first())
        if row is None or not hmac.compare_digest(row.digest, wanted):
            return None
        self.note_use(row.id)
        return Holder(row.identifier, row.id)

    def note_use(self, key_id: str) -> None:
        """Write the key's last use, in the background and at most once a minute per key."""
        now = time.time()
        if now - self.noted.get(key_id, 0.0) < LAST_USE_EVERY_S:
            return
        self.noted[key_id] = now
        statement = sa.update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=now)
        task = asyncio.create_task(
            self.writer.write_in_background("note an API key's use", lambda c: c.execute(statement))
        )
        self.noting.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self.noting.discard)
