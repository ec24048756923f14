"""Sign-on identities in the history: a (provider, subject) resolved to its user, linked by a verified e-mail or
an admin, or a new user; each in one transaction of the history's writer."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from app.errors import HistoryRefused
from app.history.accounts import inserted, new_user
from app.history.schema import identities, insert_into, users
from app.history.team import Change, and_logged
from app.history.writes import Writer
from app.identity.claims import LONGEST, Claim, Refusal, reserved

# Looks within one transaction at what it changes: another replica may change it since the first look, once (the
# next look finds what it did); more means replicas keep changing it, and this change is refused.
LOOKS = 3
Outcome = TypeVar("Outcome")


@dataclass(frozen=True)
class SignedOn:
    """The user a sign-on resolved to, and how (for the log)."""

    user: str
    how: str


class Linked(StrEnum):
    """What an admin's link of an identity to a user came to."""

    DONE = "done"
    NO_USER = "no user"
    RESERVED = "reserved"
    TAKEN = "taken"


@dataclass(frozen=True)
class Identities:
    """Sign-on identities, read and changed through the history's writer."""

    writer: Writer

    async def resolve(self, claim: Claim, *, admin: bool | None, open_sign_on: bool) -> SignedOn | Refusal:
        """The user this claim is: its identity's, else the owner of its verified e-mail, else a new user.

        `admin` from the provider's groups sets the user's admin flag (None: as the admins set it); a member of the
        admin group is let in while sign-on is closed.
        """
        work = functools.partial(resolve, claim=claim, admin=admin, open_sign_on=open_sign_on)
        outcome: SignedOn | Refusal = await self.writer.write("sign a user on", work)
        return outcome

    async def linked(self) -> dict[str, list[dict[str, str]]]:
        """Each user's sign-on identities (provider, subject), by user."""
        query = (
            sa.select(users.c.identifier, identities.c.provider, identities.c.subject)
            .join(users, users.c.id == identities.c.user_id)
            .order_by(identities.c.provider, identities.c.subject)
        )
        rows = await self.writer.read("list the sign-ons", lambda c: list(c.execute(query)))
        by_user: dict[str, list[dict[str, str]]] = {}
        for row in rows:
            by_user.setdefault(row.identifier, []).append({"provider": row.provider, "subject": row.subject})
        return by_user

    async def link(self, change: Change, name: str, provider: str, subject: str) -> tuple[Linked, str]:
        """Link the identity to the user (and the user it is linked to already, if another)."""
        work = functools.partial(link, name=name, key=(provider, subject))
        done = and_logged(change, work, lambda outcome: outcome[0] is Linked.DONE)
        outcome: tuple[Linked, str] = await self.writer.write("link a sign-on", done)
        return outcome

    async def unlink(self, change: Change, name: str, provider: str, subject: str) -> bool:
        """Unlink the identity from the user; False if it was not theirs."""
        mine = sa.and_(
            identities.c.provider == provider,
            identities.c.subject == subject,
            identities.c.user_id == sa.select(users.c.id).where(users.c.identifier == name).scalar_subquery(),
        )
        statement = sa.delete(identities).where(mine)
        work = and_logged(change, lambda c: c.execute(statement).rowcount)
        return bool(await self.writer.write("unlink a sign-on", work))


def resolve(connection: Connection, *, claim: Claim, admin: bool | None, open_sign_on: bool) -> SignedOn | Refusal:
    """Resolve a claim to a user in this transaction (see Identities.resolve)."""
    outcome = settled(lambda: resolve_once(connection, claim, admin, open_sign_on))
    if outcome is None:
        return Refusal(f"its user was changed on another replica at each of {LOOKS} looks: signing on again will do")
    return outcome


def settled(look: Callable[[], Outcome]) -> Outcome:
    """The first look's outcome that is not None (None: another replica changed what it read); None after LOOKS."""
    for _ in range(LOOKS):
        if (outcome := look()) is not None:
            break
    return outcome


def resolve_once(
    connection: Connection, claim: Claim, admin: bool | None, open_sign_on: bool
) -> SignedOn | Refusal | None:
    """Resolve a claim to a user; None when another replica signed it on, or took its name, since it looked."""
    now = time.time()
    key = (identities.c.provider == claim.provider) & (identities.c.subject == claim.subject)
    found = connection.execute(
        sa.select(users.c.id, users.c.identifier).join(identities, identities.c.user_id == users.c.id).where(key)
    ).first()
    if found is not None:
        connection.execute(sa.update(identities).where(key).values(last_used_at=now))
        return signed_in(connection, found.id, found.identifier, admin, "its linked identity")
    owner = email_owner(connection, claim)
    if owner is not None:
        if reserved(owner.identifier) or (owner.password_hash is not None and not owner.sign_on_may_link):
            return Refusal(
                f"its verified e-mail {claim.email} is {owner.identifier}'s, who has a password: an admin may link "
                f"this sign-on to {owner.identifier} on the admin page (Link sign-on: {claim.provider}, "
                f"{claim.subject}), or let sign-on link to that account by e-mail"
            )
        if not add_identity(connection, (claim.provider, claim.subject), owner.id, now):
            return None
        return signed_in(connection, owner.id, owner.identifier, admin, "the owner of its verified e-mail, linked now")
    if not (open_sign_on or admin):
        return Refusal("not a user here, and sign-on is closed (an admin may open it, or link this sign-on)")
    user = new_user(free_name(connection, claim.name), claim.email if claim.email_verified else None)
    if not inserted(connection, user):  # its name or e-mail taken meanwhile: the next look finds whose
        return None
    if not add_identity(connection, (claim.provider, claim.subject), str(user["id"]), now):
        connection.execute(sa.delete(users).where(users.c.id == user["id"]))  # nobody saw it: this transaction's
        return None
    return signed_in(connection, str(user["id"]), str(user["identifier"]), admin, "a new user")


def email_owner(connection: Connection, claim: Claim) -> Row[Any, Any, Any, Any] | None:
    """The user whose e-mail the claim verifiably has (None: no verified e-mail, or nobody's)."""
    if not (claim.email and claim.email_verified):
        return None
    query = sa.select(users.c.id, users.c.identifier, users.c.password_hash, users.c.sign_on_may_link)
    return connection.execute(query.where(users.c.email == claim.email)).first()


def add_identity(connection: Connection, key: tuple[str, str], user_id: str, used_at: float | None) -> bool:
    """Link the identity (provider, subject) to the user (used_at: signed on with it now; None: not yet); False when
    it is linked already, by then on any replica."""
    row = {
        "provider": key[0],
        "subject": key[1],
        "user_id": user_id,
        "created_at": time.time(),
        "last_used_at": used_at,
    }
    insert = insert_into(identities, connection.dialect.name).on_conflict_do_nothing(
        index_elements=["provider", "subject"]
    )
    return bool(connection.execute(insert.values(**row)).rowcount)


def signed_in(connection: Connection, user_id: str, name: str, admin: bool | None, how: str) -> SignedOn:
    """Note the user's login (and their admin flag from the provider's groups)."""
    values: dict[str, Any] = {"last_login_at": time.time()}
    if admin is not None:
        values["is_admin"] = admin
    connection.execute(sa.update(users).where(users.c.id == user_id).values(**values))
    return SignedOn(name, how)


def free_name(connection: Connection, wanted: str) -> str:
    """The wanted name, else with -2, -3 ...: never an existing user's, nor a reserved one."""
    for number in itertools.count(1):
        suffix = f"-{number}" if number > 1 else ""
        name = wanted.strip()[: LONGEST - len(suffix)] + suffix
        taken = connection.execute(sa.select(users.c.id).where(users.c.identifier == name)).first()
        if not (taken or reserved(name)):
            break
    return name


def link(connection: Connection, *, name: str, key: tuple[str, str]) -> tuple[Linked, str]:
    """Link the identity `key` to the user `name` in this transaction (see Identities.link)."""
    outcome = settled(lambda: link_once(connection, name, key))
    if outcome is None:
        raise HistoryRefused("link a sign-on")
    return outcome


def link_once(connection: Connection, name: str, key: tuple[str, str]) -> tuple[Linked, str] | None:
    """Link the identity to the user; None when another replica linked it since it looked."""
    user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == name)).scalar()
    if user_id is None:
        return Linked.NO_USER, ""
    if reserved(name):
        return Linked.RESERVED, ""
    match = (identities.c.provider == key[0]) & (identities.c.subject == key[1])
    holder = connection.execute(
        sa.select(users.c.id, users.c.identifier).join(identities, identities.c.user_id == users.c.id).where(match)
    ).first()
    if holder is not None:
        return (Linked.DONE, name) if holder.id == user_id else (Linked.TAKEN, str(holder.identifier))
    if not add_identity(connection, key, user_id, None):  # the next look reads to whom
        return None
    return Linked.DONE, name
