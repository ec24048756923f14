"""A chat's versions as the tests drive and read them: the branch shown, regenerate, switch, the prompt vLLM got."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from app.storable import storable
from tests.support.chat_client import ChatClient
from tests.support.servers import VllmServer


def branch(tab: ChatClient) -> list[dict[str, Any]]:
    """The chat's questions and answers on the page, oldest first (the greeting and notices left out)."""
    return [m for m in tab.page() if m["type"] == "user_message" or (m.get("metadata") or {}).get("turn")]


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


def as_prompt(messages: list[dict[str, Any]], system_prompt: str) -> list[dict[str, str]]:
    """Chat messages for vLLM: the system prompt, then each message as said and kept (an error's answer is empty; a
    NUL the tiny model emitted is shown, but no prompt holds it: see app/storable.py)."""
    said = [{"role": "system", "content": system_prompt}]
    for m in messages:
        role = "user" if m["type"] == "user_message" else "assistant"
        said.append({"role": role, "content": "" if m.get("isError") else storable(m["output"])})
    return said


def sent_prompt(vllm: VllmServer, before: int) -> str:
    """The one prompt vLLM received since `before` requests."""
    requests = vllm.logged_requests()[before:]
    assert len(requests) == 1, requests
    return requests[0]["prompt"]


async def regenerate(tab: ChatClient, *, wait: bool = True, timeout: float = 60) -> int:
    """Click regenerate (under the newest answer); wait for the new version unless told not to; the event mark."""
    button = next(a for m in reversed(tab.page()) for a in tab.actions(m["id"]) if a["name"] == "regenerate")
    if wait:
        mark, _ = await tab.click_and_wait(button, timeout)
        await asyncio.sleep(0.1)  # the answer's last update
        return mark
    mark = len(tab.events)
    status, _ = await tab.click(button)
    assert status == 200
    return mark


def newest_answer(tab: ChatClient, mark: int) -> dict[str, Any]:
    """The answer written since the mark."""
    written: list[dict[str, Any]] = [
        m for m in tab.events_since(mark, "new_message") if (m.get("metadata") or {}).get("turn")
    ]
    return written[-1]


async def switch(tab: ChatClient, message_id: str) -> None:
    """A version button (Versions.jsx posts this action): show that version; wait until the page has it."""
    status, response = await tab.click({"name": "show_version", "payload": {"id": message_id}})
    assert status == 200, response
    await tab.wait_for(lambda: message_id in ids(branch(tab)), 10)
    await asyncio.sleep(0.2)  # the rest of the branch and its controls


def position(tab: ChatClient, message_id: str) -> tuple[int, int] | None:
    """The "n/m" the page shows by a message (None: no other version)."""
    versions = (tab.element("AnswerStats", message_id) or {}).get("versions")
    return (versions["at"], versions["of"]) if versions else None


async def continue_in_a_new_chat(tab: ChatClient, message_id: str) -> str:
    """Click "continue in a new chat" by a message; the id of the chat its link opens."""
    mark = len(tab.events)
    status, _ = await tab.click({"name": "fork", "payload": {"id": message_id}})
    assert status == 200
    await tab.wait_for(lambda: [m for m in tab.events_since(mark, "new_message") if "/thread/" in m["output"]], 30)
    notice = next(m["output"] for m in tab.events_since(mark, "new_message") if "/thread/" in m["output"])
    found = re.search(r"\(/thread/([0-9a-f-]+)\)", notice)
    assert found is not None, notice
    return found[1]
