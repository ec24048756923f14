"""Many sessions at once through the running app and the real vLLM: no errors, no cross-talk, all of it kept."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.chat_client import ChatClient

pytestmark = pytest.mark.app

SESSIONS, TURNS = 64, 3


async def test_64_sessions_3_turns_each_stay_isolated_and_stored(history_app, vllm):
    tabs = [ChatClient(history_app.url) for _ in range(SESSIONS)]
    requests_before = len(vllm.logged_requests())

    async def converse(index: int, tab: ChatClient) -> list[str]:
        await tab.connect()
        await tab.greeting()
        await tab.change_settings({"system_prompt": f"SESSION-{index}-ONLY", "max_tokens": 8})
        problems: list[str] = []
        for turn in range(TURNS):
            produced = await tab.ask(f"session {index} turn {turn}", timeout=300)
            problems += [m["output"] for m in produced if m.get("isError")]
            if not [m for m in produced if m.get("type") == "assistant_message" and not m.get("isError")]:
                problems.append(f"session {index} turn {turn}: no answer")
        await tab.close()
        return problems + await stored_problems(index, tab)

    results = await asyncio.gather(*(converse(i, tab) for i, tab in enumerate(tabs)))
    assert [p for problems in results for p in problems] == []

    seen = 0
    for request in vllm.logged_requests()[requests_before:]:
        prompt = request["prompt"]
        if "SESSION-" not in prompt:
            continue
        owner = prompt.split("SESSION-", 1)[1].split("-ONLY", 1)[0]
        assert prompt.count("SESSION-") == 1
        turns = [line for line in prompt.split("User: ")[1:]]
        assert all(t.startswith(f"session {owner} turn ") for t in turns), prompt
        assert len(turns) == int(turns[-1].split("turn ")[1].split("\n")[0]) + 1, "history complete and in order"
        seen += 1
    assert seen >= SESSIONS * TURNS


async def stored_problems(index: int, tab: ChatClient) -> list[str]:
    """What is wrong with the session's chat as the history holds it (every turn, in its own chat)."""
    expected = [f"session {index} turn {turn}" for turn in range(TURNS)]
    found: object = None
    # Under this load the history is written seconds after the answers were shown (the tab may be
    # closed before the chat's id reached it): look the chat up by its name, and wait a while.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, page = await tab.rest(
            "POST", "/project/threads", {"pagination": {"first": 5}, "filter": {"search": expected[0]}}
        )
        named = [t["id"] for t in page["data"] if t["name"] == expected[0]] if status == 200 else []
        if len(named) == 1:
            status, thread = await tab.rest("GET", f"/project/thread/{named[0]}")
            asked = [s["output"] for s in thread["steps"] if s["type"] == "user_message"]
            user_ids = [s["id"] for s in thread["steps"] if s["type"] == "user_message"]
            answered = [s["metadata"]["turn"]["reply_to"] for s in thread["steps"] if s["metadata"].get("turn")]
            found = (asked, [user_ids.index(a) if a in user_ids else a for a in answered])
            if asked == expected and answered == user_ids:
                return []
        else:
            found = f"{len(named)} chats named {expected[0]!r}"
        await asyncio.sleep(0.5)
    return [f"session {index}: {found}"]
