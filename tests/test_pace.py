"""Many answers streaming at once space out each one's page updates (STREAM_UPDATES_PER_SECOND), and every token
still arrives: the real app, socket.io tabs, the GPU stand-in streaming 100 tokens a second per answer."""

from __future__ import annotations

import asyncio
import functools

import pytest

from app.chat.pace import Pace
from tests.support.chat_client import ChatClient, Reply
from tests.support.servers import ChatApp, GpuFakeServer, running

TOKENS = 500  # 5 s at the stand-in's 100 tokens a second: the last answer starts long before the first ends
MOST_PER_SECOND = 10


def test_the_interval_stays_until_the_answers_updates_together_pass_the_cap():
    pace = Pace(0.030, 3000)
    assert pace.interval_for(1) == pace.interval_for(90) == 0.030
    assert pace.interval_for(256) == pytest.approx(256 / 3000)
    assert Pace(0.030).interval_for(10_000) == 0.030  # no cap


def spaced(answer: Reply, interval_s: float) -> float:
    """The most updates an answer's stream can hold with this interval between them: its first and last, and one
    for the network's jitter."""
    return (answer.event_times[-1] - answer.event_times[0]) / interval_s + 3


@pytest.mark.app
async def test_an_answer_started_among_many_gets_its_updates_spaced_out_and_all_its_text():
    fake = GpuFakeServer("pace", rate=100.0)
    app = ChatApp(fake, extra_env={"STREAM_UPDATES_PER_SECOND": str(MOST_PER_SECOND)})
    with running(fake, app):
        tabs = [ChatClient(app.url) for _ in range(4)]
        for tab in tabs:
            await tab.connect()
            await tab.greeting()
            await tab.change_settings({"max_tokens": TOKENS})
        marks = [await tab.start_answer(f"question {index}") for index, tab in enumerate(tabs)]
        ended = [functools.partial(tab.events_since, mark, "task_end") for tab, mark in zip(tabs, marks, strict=True)]
        await asyncio.gather(*(tab.wait_for(done, 60) for tab, done in zip(tabs, ended, strict=True)))
        await asyncio.sleep(0.1)  # the final updates
        answers = [next(r for r in tab.replies.values() if r.token_events) for tab in tabs]  # not the greeting
        for answer in answers:
            assert answer.streamed.split() == (answer.final or "").split() == [f"t{i}" for i in range(TOKENS)]
        # Started alone: an update every 1/10 s at most; started while 4 were streaming: every 4/10 s at most.
        first, last = answers[0], answers[-1]
        assert first.token_events <= spaced(first, 1 / MOST_PER_SECOND)
        assert last.token_events <= spaced(last, 4 / MOST_PER_SECOND) < first.token_events
        for tab in tabs:
            await tab.close()
