"""Other apps' chat exports built as their documented formats say, for the import tests: ChatGPT's `mapping` trees
(one conversations.json, or the 2026 ZIP of conversations-NNN.json files) and Open WebUI's chat list."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

# 2026-03-01 09:00:00 UTC: when the conversations below begin.
START = 1_772_355_600.0


@dataclass
class ChatGPTConversation:
    """A ChatGPT conversation built node by node: a root without a message, a hidden system node, then the turns."""

    title: str | None
    conversation_id: str = "c-1"
    default_model: str = "gpt-5"
    mapping: dict[str, dict[str, Any]] = field(default_factory=dict)
    current: str = ""
    clock: float = START

    def __post_init__(self) -> None:
        self.mapping["client-created-root"] = {
            "id": "client-created-root",
            "message": None,
            "parent": None,
            "children": [],
        }
        system = message("system", "system", {"content_type": "text", "parts": [""]}, None)
        system["metadata"]["is_visually_hidden_from_conversation"] = True
        self.add("system", "client-created-root", system)

    def add(self, key: str, parent: str, body: dict[str, Any]) -> str:
        """A node under its parent (listed last among the parent's children)."""
        self.mapping[key] = {"id": key, "message": body, "parent": parent, "children": []}
        self.mapping[parent]["children"].append(key)
        self.current = key
        return key

    def say(self, key: str, parent: str, role: str, text: str, **metadata: Any) -> str:
        """A text message of the user or the assistant (its time a minute after the previous one)."""
        self.clock += 60
        body = message(key, role, {"content_type": "text", "parts": [text]}, self.clock)
        body["metadata"] |= metadata
        if role == "assistant":
            body |= {"recipient": "all", "channel": "final", "end_turn": True}
        return self.add(key, parent, body)

    def document(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "create_time": START,
            "update_time": self.clock,
            "mapping": self.mapping,
            "moderation_results": [],
            "current_node": self.current,
            "conversation_id": self.conversation_id,
            "id": self.conversation_id,
            "default_model_slug": self.default_model,
            "is_archived": False,
        }


def message(key: str, role: str, content: dict[str, Any], at: float | None) -> dict[str, Any]:
    """A node's message as ChatGPT writes it (2026: no model_slug on most messages)."""
    return {
        "id": key,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "weight": 1.0,
        "metadata": {},
        "recipient": "all",
        "channel": None,
    }


def branched_chatgpt(title: str = "Tomatoes on a balcony") -> ChatGPTConversation:
    """A conversation whose first answer was regenerated (two versions), the first one shown, and a follow-up."""
    chat = ChatGPTConversation(title)
    chat.say("q1", "system", "user", "How often should I water tomatoes on a balcony?")
    chat.say("a1", "q1", "assistant", "Water them every morning (first version).")
    chat.say("a1b", "q1", "assistant", "Water them when the top soil is dry (second version).")
    chat.say("q2", "a1", "user", "And in a heat wave?")
    chat.say("a2", "q2", "assistant", "Twice a day, early and late.")
    return chat


def chatgpt_zip(conversations: list[dict[str, Any]], per_file: int = 1, folder: str = "") -> bytes:
    """ChatGPT's 2026 export: a ZIP of conversations-000.json, -001 ... (per_file each) beside its other files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for number, start in enumerate(range(0, len(conversations), per_file)):
            part = json.dumps(conversations[start : start + per_file])
            archive.writestr(f"{folder}conversations-{number:03d}.json", part)
        archive.writestr(f"{folder}user.json", json.dumps({"id": "user-1", "email": "ann@example.com"}))
        archive.writestr(f"{folder}chat.html", "<html><body>Your chats</body></html>")
        archive.writestr(f"{folder}file-photo1.png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    return buffer.getvalue()


def open_webui_chat(title: str, turns: list[dict[str, Any]], current: str, chat_id: str = "w-1") -> dict[str, Any]:
    """An Open WebUI chat as its export lists it: the messages by id, each with its parent and children."""
    messages: dict[str, dict[str, Any]] = {}
    for turn in turns:
        body = {"id": turn["id"], "parentId": turn.get("parent"), "childrenIds": [], "role": turn["role"]}
        body |= {"content": turn["content"], "timestamp": turn["at"]}
        if turn["role"] == "assistant":
            body |= {"model": turn.get("model", "llama3.1:8b"), "done": True}
        if "files" in turn:
            body["files"] = turn["files"]
        messages[turn["id"]] = body
        if turn.get("parent") is not None:
            messages[turn["parent"]]["childrenIds"].append(turn["id"])
    created = min(turn["at"] for turn in turns)
    return {
        "id": chat_id,
        "user_id": "u-1",
        "title": title,
        "chat": {
            "id": "",
            "title": title,
            "models": ["llama3.1:8b"],
            "history": {"messages": messages, "currentId": current},
        },
        "created_at": created,
        "updated_at": max(turn["at"] for turn in turns),
        "share_id": None,
        "archived": False,
        "pinned": False,
        "meta": {},
        "folder_id": None,
    }
