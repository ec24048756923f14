"""ChatGPT's export (conversations.json, or conversations-NNN.json in its ZIP): each conversation's `mapping` tree of
nodes (`parent`, `children`, `message.author.role`, `content.content_type` and `parts`, `create_time` in seconds),
`current_node` the one shown; hidden, system and tool nodes passed over; attachments named."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from app.imports.model import ASSISTANT, USER, ImportedChat, ImportedFile, ImportedMessage, iso_time, said, time_of
from app.imports.tree import Node, build

# Content ChatGPT keeps beside a conversation without showing it: custom instructions, memory, reasoning.
UNSHOWN_CONTENT = frozenset(
    {"user_editable_context", "model_editable_context", "thoughts", "reasoning_recap", "system_error"}
)
# An image part's pointer: file-service://file-ID or sediment://file_ID.
POINTER = re.compile(r"^[a-z-]+://(?P<id>.+)$")


def is_chatgpt(document: object) -> bool:
    """Whether a JSON document is a list of ChatGPT conversations."""
    return isinstance(document, list) and any(isinstance(item, dict) and "mapping" in item for item in document)


def chat_of(conversation: Mapping[str, Any]) -> ImportedChat:
    """One conversation as a chat (KeyError, TypeError or ValueError: it is malformed)."""
    mapping = conversation["mapping"]
    if not isinstance(mapping, dict):
        raise TypeError("mapping is not an object")
    created = iso_time(conversation.get("create_time")) or time_of(0)
    default_model = str(conversation.get("default_model_slug") or "")
    nodes: dict[str, Node] = {}
    missing: list[str] = []
    for key, node in mapping.items():
        message = message_of(node.get("message"), str(key), missing)
        children = [str(child) for child in node.get("children") or []]
        parent = node.get("parent")
        nodes[str(key)] = Node(str(key), str(parent) if parent is not None else None, children, message)
    current = conversation.get("current_node")
    tree = build(nodes, str(current) if current is not None else None, created)
    # Since 2026 most messages name no model: the conversation's default one wrote them.
    messages = [m if m.role == USER or m.model else dataclasses.replace(m, model=default_model) for m in tree.messages]
    return ImportedChat(
        name=conversation.get("title") or None,
        created_at=created,
        messages=tuple(messages),
        shown=tree.shown,
        updated_at=iso_time(conversation.get("update_time")),
        missing_files=tuple(missing),
        left_out=tree.left_out,
    )


def message_of(message: Any, key: str, missing: list[str]) -> ImportedMessage | None:
    """A node's message as this app shows it (None: nothing shown); the files it names but does not hold added to
    `missing`."""
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    metadata = message.get("metadata") or {}
    content = message.get("content") or {}
    kind = content.get("content_type")
    if role not in (USER, ASSISTANT) or kind in UNSHOWN_CONTENT or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == ASSISTANT and message.get("recipient", "all") != "all":  # a call to a tool, not an answer
        return None
    text, images = text_of(content)
    files = files_of(metadata.get("attachments"), images)
    missing.extend(file.name for file in files)
    created_at = iso_time(message.get("create_time")) or ""
    return said(key, role, text, files=files, created_at=created_at, model=str(metadata.get("model_slug") or ""))


def text_of(content: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A message's text, and the ids of the images among its parts."""
    if content.get("content_type") == "code":
        return f"```{content.get('language') or ''}\n{content.get('text') or ''}\n```", []
    texts: list[str] = []
    images: list[str] = []
    if isinstance(content.get("text"), str):
        texts.append(content["text"])
    for part in content.get("parts") or []:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):  # a voice message's transcript
            texts.append(part["text"])
        elif isinstance(part, dict) and isinstance(pointer := part.get("asset_pointer"), str):
            found = POINTER.match(pointer)
            images.append(found.group("id") if found else pointer)
    return "\n\n".join(text for text in texts if text.strip()), images


def files_of(attachments: Any, images: list[str]) -> tuple[ImportedFile, ...]:
    """The files a message names: its attachments, and the images among its parts that no attachment names."""
    files: list[ImportedFile] = []
    named: set[str] = set()
    for attachment in attachments if isinstance(attachments, list) else []:
        if isinstance(attachment, dict) and (name := attachment.get("name") or attachment.get("id")):
            files.append(ImportedFile(str(name), str(attachment.get("mime_type") or "")))
            named.add(str(attachment.get("id") or ""))
    files += [ImportedFile(f"image {image}", "image") for image in images if image not in named]
    return tuple(files)
