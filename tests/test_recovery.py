"""vLLM absent at chat start, killed mid-answer and restarted: the session survives (real processes)."""

from __future__ import annotations

import asyncio

import pytest

from app.config import DEFAULT_SYSTEM_PROMPT
from tests.support.chat_client import ChatClient
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import as_prompt, branch, newest_answer, position, regenerate, sent_prompt, switch

pytestmark = [pytest.mark.vllm, pytest.mark.app]


@pytest.fixture(scope="module")
def lonely_app():
    """An app whose vLLM is not started yet (the test starts, kills and restarts it)."""
    server = VllmServer("recovery", max_model_len=4096)
    app = ChatApp(server)
    with running(app, also_stopped=[server]):
        yield app, server


async def test_waits_for_vllm_then_survives_its_crash(lonely_app):
    app, server = lonely_app
    tab = ChatClient(app.url)
    await tab.connect()
    notice = await tab.greeting()
    assert "not answering yet" in notice and "make serve" in notice and server.root in notice

    # Sending before vLLM is up: a clear message, the session stays.
    produced = await tab.ask("are you there?")
    assert any("not reachable" in m["output"] for m in produced if m.get("isError"))

    await asyncio.to_thread(server.start)
    await tab.wait_for(lambda: any("is ready" in m.get("output", "") for m in tab.messages.values()), 30)
    await tab.change_settings({"max_tokens": 5})
    produced = await tab.ask("first real question")
    assert [m for m in produced if m.get("type") == "assistant_message" and not m.get("isError")]

    # Kill vLLM in the middle of a long answer.
    await tab.change_settings({"max_tokens": 4000})
    mark = await tab.start_answer("write a long answer")
    server.kill()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 30)
    await asyncio.sleep(0.2)
    failures = [m["output"] for m in tab.events_since(mark, "new_message") if m.get("isError")]
    assert failures and "lost in the middle of the answer" in failures[0]

    # Restarted, the next message works and the history kept the interrupted question.
    await asyncio.to_thread(server.start)
    await tab.change_settings({"max_tokens": 4})
    failed = branch(tab)[-1]  # its partial answer, or the error in its place
    newer = newest_answer(tab, await regenerate(tab))
    assert not newer.get("isError") and position(tab, newer["id"]) == (2, 2)
    await switch(tab, failed["id"])  # the failed version, shown again: the model sees it as shown
    before = len(server.logged_requests())
    produced = await tab.ask("after the restart")
    assert not [m for m in produced if m.get("isError")]
    prompt = sent_prompt(server, before)
    assert "User: write a long answer\nAssistant: " in prompt and prompt.endswith(
        "User: after the restart\nAssistant: "
    )
    assert prompt == server.render(as_prompt(branch(tab)[:-1], DEFAULT_SYSTEM_PROMPT))
    await tab.close()
