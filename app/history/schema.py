"""The chat history's tables (the same on SQLite and PostgreSQL) and their migration at start."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).with_name("migrations")
# Any number, the same in every replica: PostgreSQL's lock that lets one replica migrate at a time.
MIGRATION_LOCK = 7_860_011

metadata = sa.MetaData()


def insert_into(table: sa.Table, dialect: str) -> postgresql.Insert | sqlite.Insert:
    """The dialect's INSERT, which knows ON CONFLICT."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


# Times are ISO 8601 strings in UTC, as Chainlit writes them: they sort as text on every database.
users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("identifier", sa.String(255), nullable=False, unique=True),
    sa.Column("metadata", sa.JSON, nullable=False),
    # Never part of metadata, which Chainlit sends to the browser.
    sa.Column("password_hash", sa.Text),
    sa.Column("created_at", sa.String(40), nullable=False),
    # Login tokens issued before this time (seconds since the epoch) are void: set by a password change.
    sa.Column("sessions_from", sa.Float),
    sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
    # What links a single sign-on identity to this user (unique; None: the identifier itself is matched).
    sa.Column("email", sa.String(255)),
    sa.Column("last_login_at", sa.Float),
    # Whether an admin made every chat of theirs temporary (never written anywhere).
    sa.Column("temporary_only", sa.Boolean, nullable=False, server_default=sa.false()),
    # Whether a sign-on with this user's verified e-mail may link to them though they have a password (an admin's
    # choice per user).
    sa.Column("sign_on_may_link", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Index("ix_users_email", "email", unique=True),
)

# Who a signed-on person is for good: a provider's name for them (OpenID Connect's sub, the proxy's user header
# value), linked to one user. A sign-on finds its user here, never by name.
identities = sa.Table(
    "identities",
    metadata,
    sa.Column("provider", sa.String(64), primary_key=True),
    sa.Column("subject", sa.String(255), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id"), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
)

threads = sa.Table(
    "threads",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("name", sa.Text),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), index=True),
    sa.Column("tags", sa.JSON),
    sa.Column("metadata", sa.JSON, nullable=False),
    # When the write that last named it or changed its metadata was said: an older one (replayed) changes nothing.
    sa.Column("changed_at", sa.Float),
    # The project it is filed in (None: none); when its user pinned it, archived it (None: not).
    sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="SET NULL"), index=True),
    sa.Column("pinned_at", sa.Float),
    sa.Column("archived_at", sa.Float),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("parent_id", sa.String(36)),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("type", sa.String(40), nullable=False),
    sa.Column("input", sa.Text, nullable=False),
    sa.Column("output", sa.Text, nullable=False),
    sa.Column("is_error", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("start", sa.String(40)),
    sa.Column("end", sa.String(40)),
    # The rest of Chainlit's step (language, tags, commands, display flags ...), as it sent it.
    sa.Column("details", sa.JSON, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    # When the write that stored this version of it was said: an older one (replayed) changes nothing.
    sa.Column("saved_at", sa.Float),
)

elements = sa.Table(
    "elements",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("for_id", sa.String(36)),
    # Chainlit's element as it sent it (type, name, display, url, props ...).
    sa.Column("details", sa.JSON, nullable=False),
)

feedbacks = sa.Table(
    "feedbacks",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("for_id", sa.String(36), sa.ForeignKey("steps.id", ondelete="CASCADE"), nullable=False, unique=True),
    sa.Column("thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("value", sa.Integer, nullable=False),
    sa.Column("comment", sa.Text),
)


# The kept writes the database made, by id (app/history/writes): one made again, from a journal, is skipped.
applied_writes = sa.Table(
    "applied_writes",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
)

# Chats that were deleted: no write of theirs said before (a journal's, another process's) brings them back.
deleted_chats = sa.Table(
    "deleted_chats",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("deleted_at", sa.Float, nullable=False),
)


# Failed logins, for throttling by user name and by client address (a sliding window of them).
login_failures = sa.Table(
    "login_failures",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, index=True),
    sa.Column("address", sa.String(64), nullable=False, index=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
)

# Login tokens ended by a logout (by their SHA-256), kept until they would have expired anyway.
ended_sessions = sa.Table(
    "ended_sessions",
    metadata,
    sa.Column("token_digest", sa.String(64), primary_key=True),
    sa.Column("expires_at", sa.Float, nullable=False, index=True),
)


# Tokens each user had vLLM read and write, per day (UTC), from vLLM's own usage figures.
usage = sa.Table(
    "usage",
    metadata,
    sa.Column("user", sa.String(255), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("answers", sa.Integer, nullable=False),
    sa.Column("prompt_tokens", sa.Integer, nullable=False),
    sa.Column("completion_tokens", sa.Integer, nullable=False),
)


# An admin's limits for one user, overriding the defaults (None: the default).
user_limits = sa.Table(
    "user_limits",
    metadata,
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("answers_at_once", sa.Integer),
    sa.Column("messages_per_minute", sa.Integer),
    sa.Column("daily_tokens", sa.Integer),
)

# Defaults the admins set for everyone (the system prompt, the built-in presets shown, open single sign-on).
team_settings = sa.Table(
    "team_settings",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.JSON, nullable=False),
)

# Who changed what on the admin page, and when.
admin_log = sa.Table(
    "admin_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("admin", sa.String(255), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("target", sa.String(255), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
)

# The app processes serving the chat, each seen at its last heartbeat (the admin page's health).
replicas = sa.Table(
    "replicas",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False, index=True),
)


# Each user's projects: chats filed together, with instructions for the model and documents every chat of it searches.
projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("instructions", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("user_id", "name", name="uq_projects_user_name"),
)

# The documents (the user's own, from their library) every chat of a project searches.
project_documents = sa.Table(
    "project_documents",
    metadata,
    sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
    sa.Column(
        "document_id", sa.String(36), sa.ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True, index=True
    ),
    sa.Column("added_at", sa.Float, nullable=False),
)

# Questions and answers as the full-text search over messages knows them: their words, segmented like passages'
# (app/history/message_index.py: SQLite's FTS5 table or PostgreSQL's stored tsvector beside it).
message_terms = sa.Table(
    "message_terms",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("step_id", sa.String(36), nullable=False, unique=True),
    sa.Column("thread_id", sa.String(36), nullable=False, index=True),
    sa.Column("terms", sa.Text, nullable=False),
)


# Each user's personal API keys for the app's OpenAI-compatible /v1 routes: only the key's SHA-256 is kept (the key
# itself is shown once), with its start so its owner can tell keys apart.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False, unique=True),
    sa.Column("start", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
)

# What each user asked the model to know about them ("About you"), oldest first: the start of every system prompt of
# theirs, except where paused.
memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", sa.Float, nullable=False),
)


# Each user's own presets: a name and the settings it sets (app/presets.py); a name is unique per user.
presets = sa.Table(
    "presets",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("preferences", sa.JSON, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    # The documents a chat started with it searches (ids of the user's own; None: none).
    sa.Column("documents", sa.JSON),
    # The project a chat started with it is in (None: none).
    sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="SET NULL")),
    sa.UniqueConstraint("user_id", "name", name="uq_presets_user_name"),
)


# Each user's documents (files too big to read whole, indexed): the library a chat's questions retrieve from.
documents = sa.Table(
    "documents",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("type", sa.String(255), nullable=False),
    # The uploaded file's size: what the library's limit per user counts.
    sa.Column("bytes", sa.Integer, nullable=False),
    sa.Column("pages", sa.Integer, nullable=False),
    # The chat it was uploaded in: deleted with that chat unless another chat uses it too.
    sa.Column("thread_id", sa.String(36), index=True),
    # The whole text of a file read whole (None: one too long, searched): the page gets its name only.
    sa.Column("text", sa.Text),
    sa.Column("created_at", sa.String(40), nullable=False),
    # False while its passages are being indexed (in chunks): not listed, not searched.
    sa.Column("complete", sa.Boolean, nullable=False, server_default=sa.true()),
    # SHA-256 of its text: the same file kept again by its user is this document (None: kept before digests).
    sa.Column("digest", sa.String(64)),
    sa.Index("ix_documents_user_digest", "user_id", "digest"),
)

# A document's passages in reading order; `terms` is the text segmented into words (Chinese included), which the
# database's own full-text search indexes (app/history/passage_index.py). SQLite's ids are AUTOINCREMENT: an id is
# never given again after a delete, so an old answer's sources never open another document's passage.
passages = sa.Table(
    "passages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "document_id", sa.String(36), sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    sa.Column("ordinal", sa.Integer, nullable=False),
    # The PDF page it is on (from 1); None for a file without pages.
    sa.Column("page", sa.Integer),
    sa.Column("heading", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("terms", sa.Text, nullable=False),
    # Its unit vector from the operator's embedding model (float32 bytes); None without one.
    sa.Column("embedding", sa.LargeBinary),
    # The tokens of its block as a prompt shows it (heading line, fenced text) by the model server's tokenizer,
    # counted once when it was kept (None: the server did not answer then; a bound stands in).
    sa.Column("tokens", sa.Integer),
    # How many words `terms` holds: BM25's passage length.
    sa.Column("length", sa.Integer, nullable=False, server_default="0"),
    sqlite_autoincrement=True,
)

# The documents a chat's questions retrieve from.
chat_documents = sa.Table(
    "chat_documents",
    metadata,
    # No foreign key: a new chat's row may still be on its way to the database when its first file is indexed.
    sa.Column("thread_id", sa.String(36), primary_key=True),
    sa.Column(
        "document_id", sa.String(36), sa.ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True, index=True
    ),
    sa.Column("added_at", sa.String(40), nullable=False),
)


# SQLite's FTS5 table of the passages' terms, its shadow tables and its vocabulary: made by their own SQL, outside
# `metadata`.
PASSAGE_TERMS = "passage_terms"
PASSAGE_TERMS_VOCABULARY = f"{PASSAGE_TERMS}_vocabulary"
# SQLite's FTS5 table of the messages' terms, and PostgreSQL's stored tsvector column and index: their own SQL too.
MESSAGE_FTS = "message_fts"
MESSAGE_VECTOR = "vector"
MESSAGE_VECTOR_INDEX = "ix_message_terms_vector"


# PostgreSQL's stored tsvector of the passages' terms and its GIN index: made by their own SQL too.
PASSAGE_TERMS_VECTOR = "terms_vector"
PASSAGE_TERMS_INDEX = "ix_passages_terms"


def in_metadata(name: str | None, kind: str, _parents: object) -> bool:
    """Whether Alembic compares this object with `metadata` (the full-text indexes' tables, columns and indexes are
    not)."""
    if kind == "table" and name is not None and name.startswith((PASSAGE_TERMS, MESSAGE_FTS)):
        return False
    if kind == "column" and name in (PASSAGE_TERMS_VECTOR, MESSAGE_VECTOR):
        return False
    return not (kind == "index" and name in (PASSAGE_TERMS_INDEX, MESSAGE_VECTOR_INDEX))


def user_row(user: str) -> sa.ScalarSelect[Any]:
    """The users row id of a user's identifier: a statement limited by it touches only that user's rows."""
    return sa.select(users.c.id).where(users.c.identifier == user).scalar_subquery()


def uploaded_only_to(thread_id: str) -> sa.Select[Any]:
    """The documents uploaded in a chat that no other chat uses: they go with the chat."""
    elsewhere = sa.select(chat_documents.c.document_id).where(chat_documents.c.thread_id != thread_id)
    return sa.select(documents.c.id).where(documents.c.thread_id == thread_id, documents.c.id.not_in(elsewhere))


def timestamp() -> str:
    """Now, as Chainlit writes times (UTC, microseconds, Z): such strings sort in time order."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def migrate(connection: Connection) -> None:
    """Bring the database to the newest schema version (Alembic revisions in app/history/migrations)."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    logging.getLogger("alembic").setLevel(logging.WARNING)  # a line per plugin at every start otherwise
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
