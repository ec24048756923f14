"""Many sessions at once through the running app and the real vLLM: no errors, no cross-talk, all of it kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import sqlalchemy as sa

from app.history.database import create_engine, database_url
from app.history.schema import steps
from tests.support.chat_client import ChatClient
from tests.support.servers import ROOT, ChatApp
from tests.support.versions import as_prompt, branch, regenerate

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


async def test_64_sessions_3_turns_with_regenerates_keep_every_version_in_its_own_chat(history_app, vllm):
    tabs = [ChatClient(history_app.url) for _ in range(SESSIONS)]
    requests_before = len(vllm.logged_requests())

    async def converse(index: int, tab: ChatClient) -> tuple[list[str], list[dict[str, Any]]]:
        await tab.connect()
        await tab.greeting()
        await tab.change_settings({"system_prompt": f"VERSIONS-{index}-ONLY", "max_tokens": 8})
        problems: list[str] = []
        for turn in range(TURNS):
            produced = await tab.ask(f"versioned {index} turn {turn}", timeout=300)
            problems += [m["output"] for m in produced if m.get("isError")]
            mark = await regenerate(tab, timeout=300)
            problems += [m["output"] for m in tab.events_since(mark, "new_message") if m.get("isError")]
        shown = branch(tab)
        await tab.close()
        return problems + await versions_problems(history_app, index, tab, shown), shown

    results = await asyncio.gather(*(converse(i, tab) for i, tab in enumerate(tabs)))
    assert [p for problems, _ in results for p in problems] == []

    # Each session's last question went to vLLM twice, each time after the newest versions of its own turns.
    last_prompts: dict[int, set[str]] = {}
    for request in vllm.logged_requests()[requests_before:]:
        if "VERSIONS-" in request["prompt"] and f"turn {TURNS - 1}\n" in request["prompt"]:
            owner = int(request["prompt"].split("VERSIONS-", 1)[1].split("-ONLY", 1)[0])
            last_prompts.setdefault(owner, set()).add(request["prompt"])
    for index, (_, shown) in enumerate(results):
        expected = vllm.render(as_prompt(shown[:-1], f"VERSIONS-{index}-ONLY"))
        assert last_prompts.get(index) == {expected}, index


async def versions_problems(app: ChatApp, index: int, tab: ChatClient, shown: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the session's chat as stored: the branch shown, and both versions of every answer."""
    asked = [f"versioned {index} turn {turn}" for turn in range(TURNS)]
    found: object = None
    deadline = time.monotonic() + 60  # under this load the history is written seconds after the answers
    while time.monotonic() < deadline:
        status, page = await tab.rest(
            "POST", "/project/threads", {"pagination": {"first": 5}, "filter": {"search": asked[0]}}
        )
        named = [t["id"] for t in page["data"] if t["name"] == asked[0]] if status == 200 else []
        if len(named) == 1:
            status, thread = await tab.rest("GET", f"/project/thread/{named[0]}")
            stored = whole_chat(app, named[0])
            questions = [s["output"] for s in stored if s["type"] == "user_message"]
            answered = [s["metadata"]["turn"]["reply_to"] for s in stored if s["metadata"].get("turn")]
            question_ids = [s["id"] for s in stored if s["type"] == "user_message"]
            found = (questions, [question_ids.index(a) if a in question_ids else a for a in answered])
            on_branch = [s["id"] for s in thread["steps"]] == [m["id"] for m in shown]
            if questions == asked and sorted(answered) == sorted(question_ids * 2) and on_branch:
                return []
        else:
            found = f"{len(named)} chats named {asked[0]!r}"
        await asyncio.sleep(0.5)
    return [f"session {index}: {found}"]


def whole_chat(app: ChatApp, thread_id: str) -> list[dict[str, Any]]:
    """Every stored message of a chat, every version, oldest first (read with the app's own engine)."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or ROOT))
    try:
        with engine.connect() as connection:
            query = sa.select(steps).where(steps.c.thread_id == thread_id).order_by(steps.c.created_at, steps.c.id)
            return [
                {"id": r.id, "type": r.type, "output": r.output, "metadata": r.metadata}
                for r in connection.execute(query)
            ]
    finally:
        engine.dispose()
