"""With RECONNECT_GRACE_SECONDS: the answer waits for a lost page to come back, and stops if it does not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.support.chat_client import ChatClient
from tests.support.fake_openai import FakeState, fake_openai_server
from tests.support.servers import ChatApp, VllmServer, running

pytestmark = pytest.mark.app

TOKENS_PER_SECOND = 100.0  # a paced stream, so an answer lasts as long as a test needs
ANSWER_TOKENS = 400


@pytest.fixture(scope="module")
def paced_app() -> Iterator[tuple[ChatApp, FakeState]]:
    """The real app, with a reconnection grace period, in front of a paced fake OpenAI server."""
    with fake_openai_server() as (url, state):
        state.mode, state.window, state.tokens_per_second = "paced", 4096, TOKENS_PER_SECOND
        app = ChatApp(VllmServer("reconnect", port=urlparse(url).port or 0, api_key=""), reconnect_grace=1.0)
        with running(app):
            yield app, state


async def streaming_tab(app: ChatApp, state: FakeState) -> tuple[ChatClient, str]:
    """A greeted session whose answer has started streaming; returns it and the answer's id."""
    tab = ChatClient(app.url)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"max_tokens": ANSWER_TOKENS})
    mark = await tab.start_answer("a long answer, please", timeout=30)
    assert state.streams_open == 1
    return tab, tab.events_since(mark, "stream_start")[0]["id"]


async def test_an_answer_survives_a_dropped_connection_that_comes_back(paced_app):
    app, state = paced_app
    finished, aborted = state.streams_finished, state.streams_aborted
    tab, reply_id = await streaming_tab(app, state)
    await tab.drop()
    await asyncio.sleep(app.reconnect_grace / 2)
    back = len(tab.events)
    await tab.reconnect()
    # Chainlit's reconnect handler tells the page no task runs; the app says one does (stop button).
    await tab.wait_for(lambda: tab.events_since(back, "task_start"), 10)
    await tab.wait_for(lambda: [e for e, _ in tab.events[back:]].count("task_end") >= 2, 30)
    assert state.streams_finished == finished + 1 and state.streams_aborted == aborted
    stats = [d["props"]["text"] for e, d in tab.events[back:] if e == "element" and d.get("forId") == reply_id]
    assert stats and f"{ANSWER_TOKENS} tokens" in stats[0] and "stopped" not in stats[0]
    final = tab.messages[reply_id]["output"]
    assert final == "".join(f" t{i}" for i in range(ANSWER_TOKENS)), "the whole answer reaches the page"
    await tab.close()


async def test_a_closed_tab_stops_the_answer_after_the_grace(paced_app):
    app, state = paced_app
    aborted = state.streams_aborted
    tab, _ = await streaming_tab(app, state)
    await tab.drop()  # what closing a tab does: the websocket closes, nothing else is said
    dropped_at = time.monotonic()
    await asyncio.sleep(app.reconnect_grace / 2)
    assert state.streams_open == 1, "the answer waits for the page to come back"
    await tab.wait_for(lambda: state.streams_aborted > aborted, app.reconnect_grace + 2)
    assert state.streams_aborted == aborted + 1 and state.streams_open == 0
    assert time.monotonic() - dropped_at < app.reconnect_grace + 2


async def test_a_new_chat_stops_the_answer_at_once(paced_app):
    app, state = paced_app
    aborted = state.streams_aborted
    tab, _ = await streaming_tab(app, state)
    await tab.new_chat()
    asked_at = time.monotonic()
    await tab.wait_for(lambda: state.streams_aborted > aborted, 5)
    assert state.streams_aborted == aborted + 1
    assert time.monotonic() - asked_at < app.reconnect_grace, "not left running for the grace period"
