"""Search inside a user's chats: the messages' full-text index ranked, one result per chat with a snippet around its
best hit; the name and a substring match kept for what segmentation misses; filters in:<project>, is:pinned,
is:archived."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history import message_index
from app.history.schema import projects, steps, threads
from app.terms import query_terms

FILTER = re.compile(r"^(in|is):(.+)$", re.IGNORECASE)
# Hits read from the index per search, before they are grouped into chats.
MOST_HITS = 500
# Characters shown before and after a hit.
BEFORE, AFTER = 40, 80


@dataclass(frozen=True)
class Query:
    """What a search asks: its words, and the filters around them."""

    text: str
    project: str | None = None
    pinned: bool = False
    archived: bool = False


@dataclass(frozen=True)
class Found:
    """A chat a search found: the chat's row, the message that matched best, a snippet around the hit."""

    chat: Any
    step_id: str | None
    said_at: str
    snippet: str
    words: list[str]


def parse(asked: str) -> Query:
    """A search split into its filters (in:<project>, is:pinned, is:archived; a name with spaces quoted) and words."""
    try:
        parts = shlex.split(asked)
    except ValueError:  # an unclosed quote: words as typed
        parts = asked.split()
    words, project, pinned, archived = [], None, False, False
    for part in parts:
        matched = FILTER.match(part)
        if matched and matched.group(1).lower() == "in":
            project = matched.group(2)
        elif matched and matched.group(2).lower() in ("pinned", "archived"):
            pinned |= matched.group(2).lower() == "pinned"
            archived |= matched.group(2).lower() == "archived"
        else:
            words.append(part)
    return Query(" ".join(words), project, pinned, archived)


def chats_of(user_id: str, query: Query) -> sa.Select[Any]:
    """The ids of the user's chats the filters let through (archived ones only when asked for)."""
    chats = sa.select(threads.c.id).where(threads.c.user_id == user_id)
    chats = chats.where(threads.c.archived_at.is_not(None) if query.archived else threads.c.archived_at.is_(None))
    if query.pinned:
        chats = chats.where(threads.c.pinned_at.is_not(None))
    if query.project is not None:
        named = sa.select(projects.c.id).where(projects.c.user_id == user_id, projects.c.name == query.project)
        chats = chats.where(threads.c.project_id.in_(named))
    return chats


def find(connection: Connection, user_id: str, query: Query, limit: int) -> list[Found]:
    """The user's chats matching the query, best first, each with its best message and a snippet."""
    chats = chats_of(user_id, query)
    terms = list(query_terms(query.text))
    if not query.text.strip():  # filters alone: the chats they let through, newest first
        rows = connection.execute(
            sa.select(threads).where(threads.c.id.in_(chats)).order_by(threads.c.created_at.desc())
        )
        return [Found(row, None, row.created_at, "", []) for row in rows.fetchmany(limit)]
    best: dict[str, str] = {}
    for hit in message_index.search(connection, terms, chats, MOST_HITS):
        best.setdefault(hit.thread_id, hit.step_id)
        if len(best) >= limit:
            break
    found = [found_by(connection, thread_id, step_id, terms) for thread_id, step_id in best.items()]
    if len(found) < limit:  # the words as typed, inside longer words or in the name: what segmentation misses
        found += by_substring(connection, chats, query.text, set(best), limit - len(found))
    return [item for item in found if item is not None]


def found_by(connection: Connection, thread_id: str, step_id: str, terms: list[str]) -> Found | None:
    """A chat found through one of its messages."""
    chat = connection.execute(sa.select(threads).where(threads.c.id == thread_id)).first()
    step = connection.execute(sa.select(steps.c.output, steps.c.created_at).where(steps.c.id == step_id)).first()
    if chat is None or step is None:
        return None
    return Found(chat, step_id, step.created_at, snippet(step.output, terms), terms)


def by_substring(connection: Connection, chats: sa.Select[Any], text: str, known: set[str], limit: int) -> list[Found]:
    """Chats whose name or a message holds the text as typed (case aside), newest first."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    said = (
        sa.select(steps.c.id, steps.c.thread_id, steps.c.output, steps.c.created_at)
        .where(steps.c.thread_id.in_(chats), steps.c.output.ilike(pattern, "\\"), steps.c.thread_id.not_in(known))
        .where(steps.c.type.in_(message_index.SEARCHED))
        .order_by(steps.c.created_at.desc())
    )
    found: dict[str, Found] = {}
    for row in connection.execute(said.limit(limit * 5)):
        if row.thread_id not in found:
            chat = connection.execute(sa.select(threads).where(threads.c.id == row.thread_id)).first()
            found[row.thread_id] = Found(chat, row.id, row.created_at, snippet(row.output, [text]), [text])
    named = sa.select(threads).where(
        threads.c.id.in_(chats), threads.c.name.ilike(pattern, "\\"), threads.c.id.not_in([*known, *found])
    )
    for chat in connection.execute(named.order_by(threads.c.created_at.desc()).limit(limit)):
        found[chat.id] = Found(chat, None, chat.created_at, "", [text])
    return list(found.values())[:limit]


def snippet(text: str, words: list[str]) -> str:
    """The text around the first of the words it holds (case aside), on one line, cut with an ellipsis."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    places = [place for word in words if (place := lowered.find(word.lower())) >= 0]
    at = min(places) if places else 0
    start, end = max(0, at - BEFORE), min(len(flat), at + AFTER)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
