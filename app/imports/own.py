"""This app's own JSON export (Export JSON under an answer): a chat's name, project, time, settings, and every version
of every message with the one it follows and whether it is shown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.imports.model import ASSISTANT, COMPLETE, ImportedChat, ImportedFile, ImportedMessage, iso_time, time_of
from app.imports.tree import Node, build


def is_own(document: object) -> bool:
    """Whether a JSON document is a chat this app exported."""
    return isinstance(document, dict) and isinstance(document.get("messages"), list) and "settings" in document


def chat_of(document: Mapping[str, Any]) -> ImportedChat:
    """The exported chat (KeyError, TypeError or ValueError: it is malformed)."""
    created = iso_time(document.get("created_at")) or time_of(0)
    nodes: dict[str, Node] = {}
    current = None
    for message in document["messages"]:
        key, parent = str(message["id"]), message.get("parent")
        nodes[key] = Node(key, str(parent) if parent is not None else None, (), message_of(key, message))
        if message.get("shown") is True:
            current = key
    tree = build(nodes, current, created)
    settings = document.get("settings")
    project = document.get("project")
    return ImportedChat(
        name=document.get("name") if isinstance(document.get("name"), str) else None,
        created_at=created,
        messages=tuple(tree.messages),
        shown=tree.shown,
        settings=settings if isinstance(settings, dict) else None,
        project=project if isinstance(project, str) else None,
        missing_files=tuple(
            str(file.get("name"))
            for message in document["messages"]
            for file in message.get("files") or []
            if isinstance(file, dict) and not file.get("text")
        ),
        left_out=tree.left_out,
    )


def message_of(key: str, message: Mapping[str, Any]) -> ImportedMessage | None:
    """An exported message (None: neither a question nor an answer)."""
    role = message.get("role")
    if role not in ("user", ASSISTANT):
        return None
    files = tuple(
        ImportedFile(str(file["name"]), str(file.get("type") or ""), str(file.get("text") or ""))
        for file in message.get("files") or []
        if isinstance(file, dict) and isinstance(file.get("name"), str)
    )
    sources = tuple(source for source in message.get("sources") or [] if isinstance(source, dict))
    stats = message.get("stats")
    error = message.get("error")
    return ImportedMessage(
        key=key,
        parent=None,
        role=role,
        content=str(message.get("content") or ""),
        created_at=iso_time(message.get("created_at")) or "",
        model=str(message.get("model") or ""),
        files=files,
        ending=str(message.get("ending") or COMPLETE),
        stats=stats if isinstance(stats, dict) else None,
        sources=sources,
        error=error if isinstance(error, str) else None,
    )
