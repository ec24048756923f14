"""Many sessions at once through the running app and the real vLLM: no errors, no cross-talk."""

from __future__ import annotations

import asyncio

import pytest
from chat_client import ChatClient

pytestmark = pytest.mark.app

SESSIONS, TURNS = 64, 3


async def test_64_sessions_3_turns_each_stay_isolated(chat_app, vllm):
    tabs = [ChatClient(chat_app.url) for _ in range(SESSIONS)]

    async def converse(index: int, tab: ChatClient) -> list[str]:
        await tab.connect()
        await tab.greeting()
        await tab.change_settings({"system_prompt": f"SESSION-{index}-ONLY", "max_tokens": 8})
        problems = []
        for turn in range(TURNS):
            produced = await tab.ask(f"session {index} turn {turn}", timeout=300)
            problems += [m["output"] for m in produced if m.get("isError")]
            if not [m for m in produced if m.get("type") == "assistant_message" and not m.get("isError")]:
                problems.append(f"session {index} turn {turn}: no answer")
        await tab.close()
        return problems

    results = await asyncio.gather(*(converse(i, tab) for i, tab in enumerate(tabs)))
    assert [p for problems in results for p in problems] == []

    seen = 0
    for request in vllm.logged_requests():
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
