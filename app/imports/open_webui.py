"""Open WebUI's export: a list of chats `{id, title, created_at, updated_at, chat: {history: {messages, currentId}}}`,
each message `{parentId, childrenIds, role, content, timestamp, model, files}`; its reasoning and tool calls, kept in
`<details>` blocks of an answer, are left out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.imports.model import ASSISTANT, USER, ImportedChat, ImportedFile, ImportedMessage, iso_time, said, time_of
from app.imports.tree import Node, build

# What Open WebUI writes into an answer beside its text: its reasoning, tool calls, code run.
DETAILS = re.compile(r"<details\s+type=\"(?:reasoning|tool_calls|code_interpreter)\"[^>]*>.*?</details>\s*", re.DOTALL)


def is_open_webui(document: object) -> bool:
    """Whether a JSON document is a list of Open WebUI chats."""
    return isinstance(document, list) and any(
        isinstance(item, dict) and isinstance(item.get("chat"), dict) and "history" in item["chat"] for item in document
    )


def chat_of(item: Mapping[str, Any]) -> ImportedChat:
    """One chat (KeyError, TypeError or ValueError: it is malformed)."""
    chat = item["chat"]
    history = chat["history"]
    messages = history["messages"]
    if not isinstance(messages, dict):
        raise TypeError("history.messages is not an object")
    created = iso_time(item.get("created_at")) or iso_time(chat.get("timestamp")) or time_of(0)
    nodes: dict[str, Node] = {}
    missing: list[str] = []
    for key, message in messages.items():
        kept = message_of(str(key), message, missing)
        parent = message.get("parentId")
        children = [str(child) for child in message.get("childrenIds") or []]
        nodes[str(key)] = Node(str(key), str(parent) if parent is not None else None, children, kept)
    current = history.get("currentId")
    tree = build(nodes, str(current) if current is not None else None, created)
    return ImportedChat(
        name=item.get("title") or chat.get("title") or None,
        created_at=created,
        messages=tuple(tree.messages),
        shown=tree.shown,
        updated_at=iso_time(item.get("updated_at")),
        missing_files=tuple(missing),
        left_out=tree.left_out,
    )


def message_of(key: str, message: Mapping[str, Any], missing: list[str]) -> ImportedMessage | None:
    """A message as this app shows it (None: a system message, or nothing to show)."""
    role = message.get("role")
    if role not in (USER, ASSISTANT):
        return None
    content = message.get("content")
    text = DETAILS.sub("", content).strip() if isinstance(content, str) else ""
    files = tuple(file_of(file) for file in message.get("files") or [] if isinstance(file, dict))
    missing.extend(file.name for file in files)
    created_at = iso_time(message.get("timestamp")) or ""
    return said(key, role, text, files=files, created_at=created_at, model=str(message.get("model") or ""))


def file_of(file: Mapping[str, Any]) -> ImportedFile:
    """A file a message names: its own name, its upload's, or the last part of its address."""
    upload = file["file"] if isinstance(file.get("file"), dict) else {}
    meta = upload["meta"] if isinstance(upload.get("meta"), dict) else {}
    url = str(file.get("url") or "")
    last = "" if url.startswith("data:") else url.rsplit("/", 1)[-1][:100]  # an image inlined has no name
    name = file.get("name") or upload.get("filename") or meta.get("name") or last or str(file.get("type") or "file")
    kind = meta.get("content_type") or file.get("type") or ""
    return ImportedFile(str(name), str(kind))
