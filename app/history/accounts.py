"""Who may chat: the passwordless local user, or users with argon2-hashed passwords; the login secret."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import secrets
import time
import uuid
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.engine import Connection, Engine

from app.config import Settings, openid_configured
from app.errors import HistoryUnreachable, LoginRequired
from app.history import message_index, passage_index
from app.history.database import create_engine, database_url, describe, upgrade
from app.history.schema import (
    api_keys,
    chat_documents,
    deleted_chats,
    documents,
    elements,
    feedbacks,
    identities,
    insert_into,
    memories,
    presets,
    project_documents,
    projects,
    steps,
    threads,
    timestamp,
    user_limits,
    users,
)

MIN_PASSWORD_CHARS = 8
SECRET_FILE = "auth-secret"
hasher = PasswordHasher()
# Checked against when the user does not exist, so that an unknown name takes as long as a known one.
UNKNOWN_USER_HASH = hasher.hash("no such user")


class Login(StrEnum):
    """How the chat knows who is who."""

    NONE = "none"  # history off: anonymous, as before there was history
    LOCAL = "local"  # loopback only and no users added: one passwordless local user
    PASSWORD = "password"  # users added with `make user-add` or the admin page, or signed on (proxy, OpenID)


def loopback_only(host: str) -> bool:
    """True when the address accepts connections from this machine only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def login_mode(*, history: bool, chat_host: str, password_users: int, sign_on: bool = False) -> Login:
    """The login the chat needs; refused when it would be open to the network."""
    if not history:
        return Login.NONE
    if password_users or sign_on:
        return Login.PASSWORD
    if loopback_only(chat_host):
        return Login.LOCAL
    raise LoginRequired(
        f"CHAT_HOST={chat_host} lets other machines in, so the chat needs password login and has no user yet: "
        "add one with `make user-add NAME=alice` (or listen on 127.0.0.1)"
    )


def auth_secret(data_dir: Path) -> str:
    """CHAINLIT_AUTH_SECRET from the environment, else one generated once into the data folder."""
    if secret := os.environ.get("CHAINLIT_AUTH_SECRET", "").strip():
        return secret
    path = data_dir / SECRET_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        # Written in full under a temporary name, then linked: a replica starting at the same moment
        # either wins the link or reads the winner's whole secret.
        partial = path.with_name(f"{SECRET_FILE}.{os.getpid()}")
        partial.write_text(secrets.token_urlsafe(48))
        partial.chmod(0o600)
        with contextlib.suppress(FileExistsError):
            os.link(partial, path)
        partial.unlink()
    return path.read_text().strip()


def password_users(engine: Engine) -> int:
    """How many users can log in with a password."""
    with engine.connect() as connection:
        query = sa.select(sa.func.count()).select_from(users).where(users.c.password_hash.is_not(None))
        return int(connection.execute(query).scalar() or 0)


def list_users(engine: Engine) -> list[str]:
    """The identifiers of the users with a password."""
    with engine.connect() as connection:
        query = sa.select(users.c.identifier).where(users.c.password_hash.is_not(None)).order_by(users.c.identifier)
        return list(connection.execute(query).scalars())


def set_password(engine: Engine, name: str, password: str, *, admin: bool = False) -> bool:
    """Add the user, or give an existing one a new password (made an admin if asked); True if the user is new."""
    with engine.begin() as connection:
        return save_password(connection, name, hasher.hash(password), admin=admin)


def save_password(connection: Connection, name: str, hashed: str, *, admin: bool = False) -> bool:
    """Add the user with this password hash, or set it as their new one; True if the user is new."""
    # A new password ends every login made before it.
    changed: dict[str, object] = {"password_hash": hashed, "sessions_from": next_second()}
    if admin:
        changed["is_admin"] = True
    update = sa.update(users).where(users.c.identifier == name).values(**changed)
    if connection.execute(update).rowcount:
        return False
    if inserted(connection, {**new_user(name), **changed}, "identifier"):
        return True
    connection.execute(update)  # added meanwhile on another replica: this password is the newer one
    return False


def add_password_user(connection: Connection, name: str, hashed: str, *, admin: bool, email: str | None) -> bool:
    """Add a new user with this password hash; False if the name is taken, by then on any replica (the database
    decides: two adding one name at once add it once, and neither changes the other's password)."""
    row = {**new_user(name, email), "password_hash": hashed, "sessions_from": next_second(), "is_admin": admin}
    return inserted(connection, row, "identifier")


def inserted(connection: Connection, row: Mapping[str, object], *keys: str) -> bool:
    """Insert the users row unless a user has the same `keys` (none named: any of its unique keys), by then on any
    replica: the database decides; whether it did."""
    insert = insert_into(users, connection.dialect.name).on_conflict_do_nothing(index_elements=list(keys) or None)
    return bool(connection.execute(insert.values(**row)).rowcount)


def next_second() -> int:
    """When logins count from after a change that ends them: login tokens carry whole seconds, so the logins of
    this second end too (a login in it waits for the next second: app/web/login_sessions.py)."""
    return math.floor(time.time()) + 1


def new_user(name: str, email: str | None = None) -> dict[str, object]:
    """A users row for a new user (without a password: single sign-on's)."""
    return {"id": str(uuid.uuid4()), "identifier": name, "metadata": {}, "created_at": timestamp(), "email": email}


def remove_user(engine: Engine, name: str) -> bool:
    """Remove the user and every chat of theirs, in one transaction; False if there was none."""
    with engine.begin() as connection:
        return delete_user(connection, name)


def delete_user(connection: Connection, name: str) -> bool:
    """Delete the user's rows and every chat, document and preset of theirs; False if there was none."""
    user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == name)).scalar()
    if user_id is None:
        return False
    theirs = sa.select(threads.c.id).where(threads.c.user_id == user_id).scalar_subquery()
    # Deleted for good: a write of theirs still waiting in a journal brings none back.
    deleted_at = sa.literal(time.time(), sa.Float)
    gone = sa.select(threads.c.id, deleted_at).where(threads.c.user_id == user_id)
    connection.execute(sa.insert(deleted_chats).from_select(["id", "deleted_at"], gone))
    message_index.unindex_chats(connection, theirs)
    for table in (feedbacks, elements, steps):
        connection.execute(sa.delete(table).where(table.c.thread_id.in_(theirs)))
    connection.execute(sa.delete(chat_documents).where(chat_documents.c.thread_id.in_(theirs)))
    connection.execute(sa.delete(threads).where(threads.c.user_id == user_id))
    passage_index.remove(connection, sa.select(documents.c.id).where(documents.c.user_id == user_id))
    connection.execute(sa.delete(presets).where(presets.c.user_id == user_id))
    owned = sa.select(projects.c.id).where(projects.c.user_id == user_id)
    connection.execute(sa.delete(project_documents).where(project_documents.c.project_id.in_(owned)))
    connection.execute(sa.delete(projects).where(projects.c.user_id == user_id))
    connection.execute(sa.delete(user_limits).where(user_limits.c.user_id == user_id))
    connection.execute(sa.delete(identities).where(identities.c.user_id == user_id))
    for table in (api_keys, memories):  # a removed user's keys answer no request
        connection.execute(sa.delete(table).where(table.c.user_id == user_id))
    connection.execute(sa.delete(users).where(users.c.id == user_id))
    return True


def verify_password(engine: Engine, name: str, password: str) -> bool:
    """True if the user exists and the password is theirs."""
    with engine.connect() as connection:
        hashed = connection.execute(sa.select(users.c.password_hash).where(users.c.identifier == name)).scalar()
    try:
        return hasher.verify(hashed or UNKNOWN_USER_HASH, password) and bool(hashed)
    except (VerificationError, InvalidHashError):
        return False


def prepare(url: str) -> int:
    """Create or migrate the schema; the number of users with a password."""
    engine = create_engine(url)
    try:
        upgrade(engine)
        return password_users(engine)
    finally:
        engine.dispose()


def startup_login(settings: Settings) -> Login:
    """Migrate and decide the login; raises with a sentence for the user when the app cannot start."""
    if not settings.history:
        return Login.NONE
    try:
        url = database_url(settings.database_url, settings.data_dir)
    except ValueError as error:
        raise HistoryUnreachable(f"DATABASE_URL={settings.database_url}: {error}") from error
    try:
        users = prepare(url)
    except Exception as error:  # any driver's refusal (unreachable, bad password, no such database ...)
        raise HistoryUnreachable(f"the history database {describe(url)} cannot be opened: {error}") from error
    sign_on = bool(settings.proxy_networks) or openid_configured()
    return login_mode(history=True, chat_host=settings.chat_host, password_users=users, sign_on=sign_on)
