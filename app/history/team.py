"""The team as the admin page runs it: users and admins, limits per user, defaults for everyone, the admin log."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.chat.quotas import Limits
from app.history.accounts import add_password_user, delete_user, hasher, next_second
from app.history.schema import admin_log, projects, team_settings, threads, usage, user_limits, users
from app.history.transcript import SHARING_KEYS
from app.history.writes import Writer

# The defaults an admin sets for everyone, and their values until one does.
DEFAULTS: dict[str, Any] = {
    "system_prompt": None,
    "hidden_presets": [],
    "open_sign_on": False,
    "temporary_chats": False,
    # Personal API keys for /v1: made on the account page, answered by the API.
    "api_keys": True,
}
LOG_SHOWN = 50
Result = TypeVar("Result")


class EmailLinked(StrEnum):
    """What linking an e-mail to a user came to."""

    DONE = "done"
    NO_USER = "no user"
    TAKEN = "taken"


@dataclass(frozen=True)
class Member:
    """A user as the admin page lists them."""

    name: str
    admin: bool
    email: str | None
    password: bool
    last_login_at: float | None
    limits: Limits
    # Whether a sign-on with their verified e-mail may link to them though they have a password.
    sign_on_may_link: bool
    # Whether every chat of theirs is temporary (an admin's choice), and their projects' names.
    temporary_only: bool = False
    projects: tuple[str, ...] = ()


@dataclass(frozen=True)
class Change:
    """An admin's change as the admin log keeps it: who made it, what, to whom, how."""

    admin: str
    action: str
    target: str
    detail: str = ""


def logged(connection: Connection, change: Change) -> None:
    """The change's line in the admin log, in the change's own transaction."""
    row = {"at": time.time(), "admin": change.admin[:255], "action": change.action[:64], "target": change.target[:255]}
    connection.execute(sa.insert(admin_log).values(**row, detail=change.detail))


Work = Callable[[Connection], Result]


def and_logged(change: Change, work: Work[Result], done: Callable[[Result], bool] = bool) -> Work[Result]:
    """The work, and the change's line in the admin log if it was done: one transaction, so neither goes alone."""

    def together(connection: Connection) -> Result:
        outcome = work(connection)
        if done(outcome):
            logged(connection, change)
        return outcome

    return together


def since_day(days: int) -> str:
    """The first UTC day of the last `days` days."""
    return (datetime.now(UTC) - timedelta(days=days - 1)).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Team:
    """Reads and writes of the team's rows, through the history's writer (one transaction each)."""

    writer: Writer

    async def is_admin(self, name: str) -> bool:
        """Whether this user is an admin now (read at each request: unmaking one takes effect at once)."""
        query = sa.select(users.c.is_admin).where(users.c.identifier == name)
        return bool(await self.writer.read("check an admin", lambda c: c.execute(query).scalar()))

    async def members(self) -> list[Member]:
        """Every user, with their limits, by name."""
        query = (
            sa.select(
                users, user_limits.c.answers_at_once, user_limits.c.messages_per_minute, user_limits.c.daily_tokens
            )
            .outerjoin(user_limits, user_limits.c.user_id == users.c.id)
            .order_by(users.c.identifier)
        )
        named = sa.select(projects.c.user_id, projects.c.name).order_by(projects.c.name)

        def work(connection: Connection) -> tuple[list[Any], list[Any]]:
            return list(connection.execute(query)), list(connection.execute(named))

        rows, project_rows = await self.writer.read("list the users", work)
        theirs: dict[str, list[str]] = {}
        for project in project_rows:
            theirs.setdefault(project.user_id, []).append(project.name)
        return [
            Member(
                r.identifier,
                bool(r.is_admin),
                r.email,
                r.password_hash is not None,
                r.last_login_at,
                Limits(r.answers_at_once, r.messages_per_minute, r.daily_tokens),
                bool(r.sign_on_may_link),
                bool(r.temporary_only),
                tuple(theirs.get(r.id, [])),
            )
            for r in rows
        ]

    async def add(self, change: Change, name: str, password: str, *, admin: bool, email: str | None) -> bool:
        """Add a user with a password (False: the name is taken, nothing changed)."""
        hashed = await self.writer.run("hash a password", hasher.hash, password)

        def work(connection: Connection) -> bool:
            return add_password_user(connection, name, hashed, admin=admin, email=email or None)

        return bool(await self.writer.write("add a user", and_logged(change, work)))

    async def set_password(self, change: Change, name: str, password: str) -> bool:
        """A new password for an existing user (ending their logins); False if there is no such user."""
        hashed = await self.writer.run("hash a password", hasher.hash, password)
        return await self._change(change, name, password_hash=hashed, sessions_from=next_second())

    async def set_admin(self, change: Change, name: str, admin: bool) -> bool:
        """Make or unmake an admin; False if there is no such user."""
        return await self._change(change, name, is_admin=admin)

    async def set_email(self, change: Change, name: str, email: str | None) -> tuple[EmailLinked, str]:
        """The e-mail that links single sign-on to this user (None: none), and who has it if another does."""

        def work(connection: Connection) -> tuple[EmailLinked, str]:
            owner = connection.execute(sa.select(users.c.identifier).where(users.c.email == email)).scalar()
            if email is not None and owner not in (None, name):
                return EmailLinked.TAKEN, str(owner)
            statement = sa.update(users).where(users.c.identifier == name).values(email=email)
            return (EmailLinked.DONE if connection.execute(statement).rowcount else EmailLinked.NO_USER), name

        done = and_logged(change, work, lambda outcome: outcome[0] is EmailLinked.DONE)
        outcome: tuple[EmailLinked, str] = await self.writer.write("link an e-mail", done)
        return outcome

    async def set_sign_on_may_link(self, change: Change, name: str, allowed: bool) -> bool:
        """Whether a sign-on with this user's verified e-mail may link to them; False if there is no such user."""
        return await self._change(change, name, sign_on_may_link=allowed)

    async def end_sessions(self, change: Change, name: str) -> bool:
        """End every login of the user now (their open tabs close at the next sweep); False if no such user."""
        return await self._change(change, name, sessions_from=next_second())

    async def remove(self, change: Change, name: str) -> bool:
        """Remove the user and all their chats; False if there was none."""
        return bool(await self.writer.write("remove a user", and_logged(change, lambda c: delete_user(c, name))))

    async def _change(self, change: Change, name: str, **values: Any) -> bool:
        statement = sa.update(users).where(users.c.identifier == name).values(**values)
        return bool(await self.writer.write(change.action, and_logged(change, lambda c: c.execute(statement).rowcount)))

    async def temporary_only(self, name: str) -> bool:
        """Whether every chat of the user is temporary: an admin said so for them, or for everyone."""
        query = sa.select(users.c.temporary_only).where(users.c.identifier == name)
        if await self.writer.read("read whether chats are kept", lambda c: c.execute(query).scalar()):
            return True
        return bool((await self.defaults())["temporary_chats"])

    async def set_temporary_only(self, change: Change, name: str, on: bool) -> bool:
        """Make every chat of the user temporary (or not); False if there is no such user."""
        return await self._change(change, name, temporary_only=on)

    async def limits_of(self, name: str) -> Limits:
        """The user's own limits (all None: the defaults)."""
        query = (
            sa.select(user_limits.c.answers_at_once, user_limits.c.messages_per_minute, user_limits.c.daily_tokens)
            .join(users, users.c.id == user_limits.c.user_id)
            .where(users.c.identifier == name)
        )
        row = await self.writer.read("read a user's limits", lambda c: c.execute(query).first())
        return Limits(*row) if row else Limits()

    async def set_limits(self, change: Change, name: str, limits: Limits) -> bool:
        """Set the user's limits (None fields: the default); False if there is no such user."""

        def work(connection: Connection) -> bool:
            user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == name)).scalar()
            if user_id is None:
                return False
            connection.execute(sa.delete(user_limits).where(user_limits.c.user_id == user_id))
            connection.execute(sa.insert(user_limits).values(user_id=user_id, **asdict(limits)))
            return True

        return bool(await self.writer.write("set a user's limits", and_logged(change, work)))

    async def defaults(self) -> dict[str, Any]:
        """The defaults for everyone, as admins set them."""
        rows = await self.writer.read("read the team's defaults", lambda c: list(c.execute(sa.select(team_settings))))
        return DEFAULTS | {row.key: row.value for row in rows if row.key in DEFAULTS}

    async def set_defaults(self, change: Change, values: dict[str, Any]) -> None:
        """Set the defaults for everyone, together."""

        def work(connection: Connection) -> bool:
            for key, value in values.items():
                connection.execute(sa.delete(team_settings).where(team_settings.c.key == key))
                connection.execute(sa.insert(team_settings).values(key=key, value=value))
            return True

        await self.writer.write("set the defaults", and_logged(change, work))

    async def recent_changes(self) -> list[dict[str, Any]]:
        """The admin log's newest lines."""
        query = sa.select(admin_log).order_by(admin_log.c.id.desc()).limit(LOG_SHOWN)
        rows = await self.writer.read("read the admin log", lambda c: list(c.execute(query)))
        return [dict(row._mapping) for row in rows]

    async def usage(self, days: int) -> list[dict[str, Any]]:
        """Tokens per user and day over the last `days` days, newest first (what `make usage` prints)."""
        query = sa.select(usage).where(usage.c.day >= since_day(days)).order_by(usage.c.day.desc(), usage.c.user)
        rows = await self.writer.read("read the usage", lambda c: list(c.execute(query)))
        return [dict(row._mapping) for row in rows]

    async def shared_chats(self) -> list[dict[str, Any]]:
        """Every chat shared now: its name, its owner, since when."""
        shared = threads.c.metadata[SHARING_KEYS[0]].as_boolean()
        query = (
            sa.select(threads.c.id, threads.c.name, threads.c.metadata, users.c.identifier)
            .join(users, users.c.id == threads.c.user_id)
            .where(shared.is_(True))
            .order_by(threads.c.created_at.desc())
        )
        rows = await self.writer.read("list the shared chats", lambda c: list(c.execute(query)))
        return [
            {"id": r.id, "name": r.name, "owner": r.identifier, "since": (r.metadata or {}).get(SHARING_KEYS[1])}
            for r in rows
        ]

    async def unshare(self, change: Change, thread_id: str) -> bool:
        """Stop sharing a chat (its link shows nothing from now on); False if there is no such chat."""

        def work(connection: Connection) -> bool:
            metadata = connection.execute(sa.select(threads.c.metadata).where(threads.c.id == thread_id)).scalar()
            if metadata is None:
                return False
            unshared = {**metadata, SHARING_KEYS[0]: False}
            connection.execute(sa.update(threads).where(threads.c.id == thread_id).values(metadata=unshared))
            return True

        return bool(await self.writer.write("unshare a chat", and_logged(change, work)))

    async def signed_in(self, name: str) -> None:
        """Note the user's login (the admin page's last login)."""
        statement = sa.update(users).where(users.c.identifier == name).values(last_login_at=time.time())
        await self.writer.write_in_background("note a login", lambda c: c.execute(statement))
