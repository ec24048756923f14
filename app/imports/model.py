"""A chat read out of an export, whatever app wrote it: its name, dates, settings, and every version of its messages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# Times as Chainlit writes them (UTC, microseconds, Z): such strings sort in time order.
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# What a user's question is, and what an answer is, as every format here says it.
USER, ASSISTANT = "user", "assistant"
# How an answer read from another app ended: it was complete there.
COMPLETE = "complete"


@dataclass(frozen=True)
class ImportedFile:
    """A file attached to a question: its name and type, and its text when the export carries it."""

    name: str
    type: str = ""
    text: str = ""


@dataclass(frozen=True)
class ImportedMessage:
    """One version of a message: what it follows (its parent's key; None: the chat's start), who said what, when."""

    key: str
    parent: str | None
    role: str
    content: str
    created_at: str
    model: str = ""
    files: tuple[ImportedFile, ...] = ()
    # An answer's ending, figures and sources as this app records them; an error in place of the answer.
    ending: str = COMPLETE
    stats: Mapping[str, Any] | None = None
    sources: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class ImportedChat:
    """A chat: messages each after the one it follows, and the versions shown (a parent's key: its child shown)."""

    name: str | None
    created_at: str
    messages: tuple[ImportedMessage, ...]
    shown: Mapping[str, str] = field(default_factory=dict)
    updated_at: str | None = None
    settings: Mapping[str, Any] | None = None
    project: str | None = None
    # Files named in the export whose content is not in it (images, uploads): named, never dropped silently.
    missing_files: tuple[str, ...] = ()
    # Answers that follow no question, which this app has no place for.
    left_out: int = 0

    @property
    def versions(self) -> int:
        """How many messages are a second (third ...) version of another."""
        parents = [message.parent for message in self.messages]
        return len(parents) - len(set(parents))


def said(
    key: str, role: str, text: str, *, files: tuple[ImportedFile, ...], created_at: str, model: str
) -> ImportedMessage | None:
    """A question or an answer of another app (None: nothing to show); an answer's files named in its text, as this
    app keeps no file with an answer."""
    if not text and not files:
        return None
    if role == ASSISTANT and files:
        text = "\n\n".join(part for part in (text, *(f"[{file.name}]" for file in files)) if part)
        files = ()
    model = model if role == ASSISTANT else ""
    return ImportedMessage(key, None, role, text, created_at, model=model, files=files)


def time_of(seconds: float) -> str:
    """A time given in seconds since the epoch, as Chainlit writes times."""
    return datetime.fromtimestamp(seconds, UTC).strftime(TIME_FORMAT)


def seconds_of(value: object) -> float | None:
    """Seconds since the epoch from a number in seconds, milliseconds or microseconds (None: not a time)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    seconds = float(value)
    while seconds > 1e11:  # milliseconds, microseconds or nanoseconds: no export dates from the year 5138
        seconds /= 1000
    return seconds


def moment(time: str) -> datetime:
    """An ISO 8601 time (UTC unless it says otherwise); ValueError if it is none."""
    parsed = datetime.fromisoformat(time.replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def iso_time(value: object) -> str | None:
    """A time given as a number or an ISO 8601 string: a UTC string ending in Z as given (Chainlit's own), any other
    as Chainlit writes times (None: not a time)."""
    if isinstance(value, str):
        try:
            parsed = moment(value)
        except ValueError:
            return None
        return value if value.endswith("Z") else parsed.strftime(TIME_FORMAT)
    seconds = seconds_of(value)
    return time_of(seconds) if seconds is not None else None


def after(time: str) -> str:
    """The microsecond after a time."""
    return (moment(time) + timedelta(microseconds=1)).strftime(TIME_FORMAT)
