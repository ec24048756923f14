"""An uploaded export read into chats: which app wrote it, each conversation read on its own (a malformed one is
skipped, named), and what could not be read said in a sentence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.errors import ImportRefused, Problem
from app.imports import chatgpt, open_webui, own
from app.imports.model import ImportedChat
from app.imports.unpack import documents


class Source(StrEnum):
    """The app an export comes from."""

    CHATGPT = "ChatGPT"
    OPEN_WEBUI = "Open WebUI"
    OWN = "this app"


class Reason(StrEnum):
    """Why a conversation of an export was not imported."""

    MALFORMED = "malformed"
    EMPTY = "empty"


@dataclass(frozen=True)
class Skipped:
    """A conversation not imported: its title (or its place in the file), and why."""

    name: str
    reason: Reason


@dataclass(frozen=True)
class Export:
    """What an export holds: the app that wrote it, its chats, the conversations skipped."""

    source: Source
    chats: list[ImportedChat] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


# Each format: whether a document is one, how to read one conversation, the conversations of a document.
Reader = tuple[Callable[[object], bool], Callable[[Any], ImportedChat], Callable[[Any], Iterable[Any]]]
READERS: dict[Source, Reader] = {
    Source.CHATGPT: (chatgpt.is_chatgpt, chatgpt.chat_of, lambda document: document),
    Source.OPEN_WEBUI: (open_webui.is_open_webui, open_webui.chat_of, lambda document: document),
    Source.OWN: (own.is_own, own.chat_of, lambda document: [document]),
}


def read_export(path: Path, name: str, most_bytes: int) -> Export:
    """The chats of an uploaded export (blocking: run it in a thread); ImportRefused if none can be read."""
    found = documents(path, name, most_bytes)
    if all(document == [] for document in found):
        raise ImportRefused(Problem.IMPORT_EMPTY, name=name)
    source = next((source for source, (is_one, _, _) in READERS.items() if all(map(is_one, found))), None)
    if source is None:
        raise ImportRefused(Problem.IMPORT_FOREIGN, name=name)
    _, chat_of, conversations = READERS[source]
    export = Export(source)
    for document in found:
        for number, conversation in enumerate(conversations(document), start=1):
            title = conversation.get("title") or conversation.get("name") if isinstance(conversation, Mapping) else None
            label = str(title or f"#{number}")
            try:
                chat = chat_of(conversation)
            except (KeyError, TypeError, ValueError, AttributeError):
                export.skipped.append(Skipped(label, Reason.MALFORMED))
                continue
            if chat.messages:
                export.chats.append(chat)
            else:
                export.skipped.append(Skipped(label, Reason.EMPTY))
    return export
