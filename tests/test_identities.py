"""Sign-on identities resolved to users in the history (app/history/identities.py), as one table of cases, on
SQLite and PostgreSQL: by (provider, subject) only, never by name; linked by a verified e-mail only where allowed."""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from app import metrics
from app.history.accounts import add_password_user, hasher, new_user, set_password
from app.history.database import create_engine, upgrade
from app.history.identities import Identities, Linked, SignedOn, link, resolve
from app.history.schema import admin_log, identities, users
from app.history.team import Change, Team
from app.history.writes import Writer
from app.identity.claims import Claim, Refusal
from tests.support.postgres import PostgresServer


def proxy(subject: str, email: str | None = None, *, verified: bool = False) -> Claim:
    return Claim("proxy", subject, subject, email, verified)


def oidc(subject: str, name: str, email: str | None = None, *, verified: bool = False) -> Claim:
    return Claim("generic", subject, name, email, verified)


# Each case: what, the claim, whether sign-on is open, admin by group (None: no admin group), and who it resolves
# to (a refusal: a part of its reason). The history holds root (password, admin), alice (password, may be linked
# by e-mail), pat (signed on through the proxy before: its identity) and the local user (an e-mail an admin set).
CASES: list[tuple[str, Claim, bool, bool | None, str | Refusal]] = [
    ("the proxy's user pat: its identity", proxy("pat"), False, None, "pat"),
    ("a provider's user named root: not root", oidc("u-1", "root", "m@example.net"), True, None, "root-2"),
    ("named root, sign-on closed", oidc("u-1", "root"), False, None, Refusal("sign-on is closed")),
    ("named root, in the admin group", oidc("u-1", "root"), False, True, "root-2"),
    ("the proxy naming root", proxy("root"), True, None, "root-2"),
    (
        "root's e-mail, verified: root has a password",
        oidc("u-2", "r", "root@example.com", verified=True),
        True,
        None,
        Refusal("an admin may link"),
    ),
    (
        "alice's e-mail, verified: she allows it",
        oidc("u-3", "a", "alice@example.com", verified=True),
        False,
        None,
        "alice",
    ),
    ("pat's e-mail, verified: no password", oidc("u-4", "p", "pat@example.com", verified=True), False, None, "pat"),
    ("pat's e-mail, not verified", oidc("u-5", "patricia", "pat@example.com"), True, None, "patricia"),
    (
        "pat's e-mail, not verified, sign-on closed",
        oidc("u-5", "patricia", "pat@example.com"),
        False,
        None,
        Refusal("sign-on is closed"),
    ),
    (
        "the local user's e-mail, verified",
        oidc("u-6", "l", "local@example.com", verified=True),
        True,
        None,
        Refusal("an admin may link"),
    ),
    ("named local", oidc("u-7", "local"), True, None, "local-2"),
    ("named Local", proxy("Local"), True, None, "Local-2"),
    (
        "a new user with a verified e-mail",
        oidc("u-8", "newbie", "new@example.com", verified=True),
        True,
        None,
        "newbie",
    ),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def sign_on_history(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """A fresh, migrated history with the users of the table, on SQLite or PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        postgres: PostgresServer = request.getfixturevalue("postgres")
        url = postgres.new_database(f"identities_{secrets.token_hex(4)}")
    engine = create_engine(url)
    upgrade(engine)
    set_password(engine, "root", "root-password", admin=True)
    set_password(engine, "alice", "alice-password")
    with engine.begin() as connection:
        for name in ("pat", "local"):
            connection.execute(sa.insert(users).values(**new_user(name)))
        for name, allows in (("root", False), ("alice", True), ("pat", False), ("local", False)):
            change = {"email": f"{name}@example.com", "sign_on_may_link": allows}
            connection.execute(sa.update(users).where(users.c.identifier == name).values(**change))
        pat = connection.execute(sa.select(users.c.id).where(users.c.identifier == "pat")).scalar()
        connection.execute(sa.insert(identities).values(provider="proxy", subject="pat", user_id=pat, created_at=0))
    return engine


@pytest.fixture
async def signing(sign_on_history: Engine) -> AsyncIterator[Identities]:
    writer = Writer(sign_on_history, 15.0)
    yield Identities(writer)
    await writer.close()


@pytest.mark.parametrize(("case", "claim", "open_sign_on", "admin", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_a_sign_on_resolves_to_its_identitys_user_and_never_by_name(
    signing: Identities,
    sign_on_history: Engine,
    case: str,
    claim: Claim,
    open_sign_on: bool,
    admin: bool | None,
    expected: str | Refusal,
):
    outcome = await signing.resolve(claim, admin=admin, open_sign_on=open_sign_on)
    if isinstance(expected, Refusal):
        assert isinstance(outcome, Refusal) and expected.reason in outcome.reason, (case, outcome)
        return
    assert isinstance(outcome, SignedOn) and outcome.user == expected, (case, outcome)
    # From now on the identity is that user's, whatever the claim's name or e-mail, sign-on open or not.
    again = await signing.resolve(Claim(claim.provider, claim.subject, "someone else"), admin=None, open_sign_on=False)
    assert again == SignedOn(expected, "its linked identity"), case
    with sign_on_history.connect() as connection:
        row = connection.execute(sa.select(users).where(users.c.identifier == expected)).one()
    assert row.is_admin == (expected == "root" or bool(admin)), case
    if expected not in ("pat", "alice"):  # a new user: the e-mail kept only when verified
        assert row.email == (claim.email if claim.email_verified else None) and row.password_hash is None, case


async def test_an_admin_links_an_identity_to_one_user_only_each_change_logged_with_it(
    signing: Identities, sign_on_history: Engine
):
    by = Change("admin", "link sign-on", "root")
    assert await signing.link(by, "root", "generic", "u-1") == (Linked.DONE, "root")
    assert await signing.link(by, "root", "generic", "u-1") == (Linked.DONE, "root")  # again: nothing changes
    assert await signing.link(by, "alice", "generic", "u-1") == (Linked.TAKEN, "root")
    assert await signing.link(by, "nobody", "generic", "u-9") == (Linked.NO_USER, "")
    assert await signing.link(by, "local", "generic", "u-9") == (Linked.RESERVED, "")
    signed_on = await signing.resolve(oidc("u-1", "mallory"), admin=None, open_sign_on=False)
    assert signed_on == SignedOn("root", "its linked identity")  # root's password account, as the admin chose
    assert (await signing.linked())["root"] == [{"provider": "generic", "subject": "u-1"}]
    assert not await signing.unlink(by, "alice", "generic", "u-1")
    assert await signing.unlink(by, "root", "generic", "u-1")
    assert "root" not in await signing.linked()
    with sign_on_history.connect() as connection:  # a line for each change made, none for those refused
        assert connection.execute(sa.select(sa.func.count()).select_from(admin_log)).scalar() == 3


@contextlib.contextmanager
def another_replica_first(
    engine: Engine, its_work: Callable[[Connection], object], before_a: str = "", times: int = 1
) -> Iterator[list[bool | None]]:
    """Another replica's transaction commits its work just before this one's first write (after its reads), or its
    first statement of the kind `before_a` names (e.g. INSERT); before as many of them as `times` says."""
    done: list[bool | None] = []

    def before(connection: Any, cursor: Any, statement: str, *_: Any) -> None:
        verb = statement.lstrip().upper()
        if not verb.startswith("SELECT") and verb.startswith(before_a) and len(done) < times and done[-1:] != [None]:
            done.append(None)  # the other replica's own statements pass
            with engine.begin() as other:
                its_work(other)
            done[-1] = True

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        yield done
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)


async def test_a_name_another_replica_adds_meanwhile_is_added_once_its_password_kept(sign_on_history: Engine):
    """Another replica adds zed while this one's add is under way: this one is told the name is taken, and zed
    keeps the other's password."""
    other_hash = hasher.hash("other-password")
    writer = Writer(sign_on_history, 15.0)
    adds_zed = functools.partial(add_password_user, name="zed", hashed=other_hash, admin=False, email=None)
    try:
        with another_replica_first(sign_on_history, adds_zed) as added:
            taken = not await Team(writer).add(Change("root", "add user", "zed"), "zed", "mine", admin=True, email=None)
    finally:
        await writer.close()
    with sign_on_history.connect() as connection:
        row = connection.execute(sa.select(users).where(users.c.identifier == "zed")).one()
        logged = connection.execute(sa.select(sa.func.count()).select_from(admin_log)).scalar()
    assert added and taken and row.password_hash == other_hash and not row.is_admin and logged == 0


@pytest.mark.parametrize(
    ("there", "here", "expected", "users_after"),
    [
        (oidc("u-9", "dana"), oidc("u-9", "dana"), SignedOn("dana", "its linked identity"), 5),  # the same sign-on
        (oidc("u-8", "dana"), oidc("u-9", "dana"), SignedOn("dana-2", "a new user"), 6),  # another's, of the name
        (  # another's, of the same verified e-mail: the user it made is the e-mail's owner
            oidc("u-8", "dana", "dana@example.org", verified=True),
            oidc("u-9", "dee", "dana@example.org", verified=True),
            SignedOn("dana", "the owner of its verified e-mail, linked now"),
            5,
        ),
        (  # the same sign-on, linked to alice by her e-mail there
            oidc("u-9", "a", "alice@example.com", verified=True),
            oidc("u-9", "a", "alice@example.com", verified=True),
            SignedOn("alice", "its linked identity"),
            4,
        ),
    ],
)
async def test_a_first_sign_on_made_on_two_replicas_at_once_is_one_user_and_no_failure(
    sign_on_history: Engine,
    there: Claim,
    here: Claim,
    expected: SignedOn,
    users_after: int,
    caplog: pytest.LogCaptureFixture,
):
    """Another replica commits a first sign-on just before this one's first write: this one finds what it did."""

    def signs_on_there(connection: Connection) -> None:
        resolve(connection, claim=there, admin=None, open_sign_on=True)

    writer, failures = Writer(sign_on_history, 15.0), metrics.HISTORY_WRITE_FAILURES._value.get()
    try:
        with another_replica_first(sign_on_history, signs_on_there) as signed_on_there:
            outcome = await Identities(writer).resolve(here, admin=None, open_sign_on=True)
    finally:
        await writer.close()
    with sign_on_history.connect() as connection:
        users_now = connection.execute(sa.select(sa.func.count()).select_from(users)).scalar()
        holder = connection.execute(
            sa.select(users.c.identifier)
            .join(identities, identities.c.user_id == users.c.id)
            .where(identities.c.provider == "generic", identities.c.subject == "u-9")
        ).scalar()
    assert signed_on_there and outcome == expected and holder == expected.user and users_now == users_after
    assert [record.getMessage() for record in caplog.records if record.levelname == "ERROR"] == []
    assert metrics.HISTORY_WRITE_FAILURES._value.get() == failures


@pytest.mark.parametrize("sign_on_history", ["postgresql"], indirect=True)  # SQLite writes one at a time
async def test_a_sign_on_whose_name_other_replicas_keep_taking_is_refused_after_three_looks(sign_on_history: Engine):
    taken: list[str] = []

    def signs_dana_on_there(connection: Connection) -> None:
        outcome = resolve(connection, claim=oidc(f"u-{len(taken)}0", "dana"), admin=None, open_sign_on=True)
        assert isinstance(outcome, SignedOn)
        taken.append(outcome.user)

    writer = Writer(sign_on_history, 15.0)
    try:
        with another_replica_first(sign_on_history, signs_dana_on_there, before_a="INSERT", times=4):
            outcome = await Identities(writer).resolve(oidc("u-9", "dana"), admin=None, open_sign_on=True)
    finally:
        await writer.close()
    with sign_on_history.connect() as connection:
        linked = connection.execute(sa.select(identities.c.user_id).where(identities.c.subject == "u-9")).first()
    assert isinstance(outcome, Refusal) and "another replica" in outcome.reason
    assert taken == ["dana", "dana-2", "dana-3"] and linked is None


async def test_a_sign_on_linked_meanwhile_on_another_replica_is_said_to_be_taken_and_by_whom(sign_on_history: Engine):
    def links_it_to_pat(connection: Connection) -> None:
        link(connection, name="pat", key=("generic", "u-7"))

    writer = Writer(sign_on_history, 15.0)
    try:
        with another_replica_first(sign_on_history, links_it_to_pat) as linked_there:
            outcome = await Identities(writer).link(Change("root", "link sign-on", "alice"), "alice", "generic", "u-7")
    finally:
        await writer.close()
    with sign_on_history.connect() as connection:
        logged = connection.execute(sa.select(sa.func.count()).select_from(admin_log)).scalar()
    assert linked_there and outcome == (Linked.TAKEN, "pat") and logged == 0


@pytest.mark.parametrize("sign_on_history", ["postgresql"], indirect=True)  # SQLite writes one at a time
def test_a_password_set_while_another_replica_adds_the_name_is_the_users_password(sign_on_history: Engine):
    adds_zed = functools.partial(add_password_user, name="zed", hashed=hasher.hash("other"), admin=False, email=None)
    with another_replica_first(sign_on_history, adds_zed, before_a="INSERT") as added_there:
        added_here = set_password(sign_on_history, "zed", "mine")
    with sign_on_history.connect() as connection:
        hashed = connection.execute(sa.select(users.c.password_hash).where(users.c.identifier == "zed")).scalar_one()
    assert added_there and not added_here and hasher.verify(hashed, "mine")


def test_the_migration_keeps_proxy_users_and_ends_the_local_users_logins(tmp_path: Path):
    from alembic import command
    from alembic.config import Config

    from app.history.schema import MIGRATIONS

    engine = create_engine(f"sqlite:///{tmp_path / 'chat.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0005_team")
        for name in ("pat", "local", "alice"):
            connection.execute(sa.insert(users).values(**new_user(name)))
        connection.execute(sa.update(users).where(users.c.identifier == "alice").values(password_hash=hasher.hash("x")))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006_identities")
    with engine.connect() as connection:
        seeded = connection.execute(sa.select(identities.c.provider, identities.c.subject)).all()
        ended = connection.execute(sa.select(users.c.identifier, users.c.sessions_from)).all()
    assert seeded == [("proxy", "pat")]  # not the local user, not a password user
    assert [name for name, since in ended if since is not None] == ["local"]
