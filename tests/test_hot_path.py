"""An answer's work does not grow with its tokens: page updates per interval, history writes per checkpoint, metrics
per answer, however many tokens the model streams and however slow the page's updates are."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app import metrics
from app.chat.backend import Backend
from app.chat.branches import ROOT, Branches
from app.chat.preferences import Preferences
from app.chat.reply import Reply
from app.config import Settings
from app.page.pipeline import Checkpoints, OnPage
from tests.support.fake_openai import FakeState, fake_openai_server

INTERVAL_S = 0.030  # the page's update interval (STREAM_INTERVAL_MS)
CHECKPOINT_S = 0.050
SLOW_UPDATE_S = 0.040  # longer than the interval, as on an event loop busy with hundreds of tabs


@dataclass
class SlowMessage:
    """The answer's message on the page: each update takes longer than the interval."""

    id: str = "a"
    content: str = ""
    updates: int = 0

    async def stream_token(self, token: str) -> None:
        self.content += token
        self.updates += 1
        await asyncio.sleep(SLOW_UPDATE_S)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "output": self.content}


@dataclass
class Writes:
    """The history, counting the checkpoints written to it."""

    unfinished: list[str] = field(default_factory=list)

    def keep_unfinished(self, step: dict[str, Any]) -> None:
        self.unfinished.append(step["output"])


class Calls:
    """A metric that counts the calls made to it."""

    def __init__(self, counted: Counter[str]) -> None:
        self.counted = counted

    def labels(self, *_values: str) -> Calls:
        return self

    def inc(self, _amount: float = 1) -> None:
        self.counted["metric"] += 1

    def observe(self, _value: float) -> None:
        self.counted["metric"] += 1


@pytest.fixture
async def fast() -> AsyncIterator[tuple[Backend, FakeState]]:
    with fake_openai_server() as (url, state):
        state.mode, state.window, state.tokens_per_second = "paced", 4096, 2000.0
        backend = Backend(Settings(vllm_base_url=url, request_timeout=5.0))
        yield backend, state
        await backend.aclose()


async def answer(backend: Backend, tokens: int) -> tuple[SlowMessage, Writes, float]:
    """One answer of `tokens` tokens streamed onto a slow page with checkpoints: the page, the writes, its time."""
    branches = Branches()
    branches.add({"id": "q", "type": "user_message", "output": "tell me a story"}, ROOT)
    defaults = Preferences.defaults(Settings()).model_dump()
    reply = Reply(backend, Preferences(**{**defaults, "max_tokens": tokens}), INTERVAL_S)
    message, writes = SlowMessage(), Writes()
    page = OnPage(message, None, Checkpoints(writes, CHECKPOINT_S, {}))  # type: ignore[arg-type]
    started = time.perf_counter()
    await reply.stream(await reply.plan(branches, "q"), page)
    return message, writes, time.perf_counter() - started


async def test_a_fast_stream_on_a_slow_page_costs_per_interval_and_per_answer_not_per_token(fast, monkeypatch):
    backend, _state = fast
    counted: Counter[str] = Counter()
    for name in ("ANSWERS", "FIRST_TOKEN", "SPEED", "PROMPT_TOKENS"):
        monkeypatch.setattr(metrics, name, Calls(counted))
    await answer(backend, 20)
    per_short_answer = counted["metric"]
    message, writes, seconds = await answer(backend, 400)
    assert message.content == "".join(f" t{index}" for index in range(400))  # the same stream, whole and in order
    # The model sends ~60 tokens an interval: the page is updated with many at a time, not once per token.
    assert message.updates <= min(400 / 10, seconds / INTERVAL_S + 2), (message.updates, seconds)
    assert 0 < len(writes.unfinished) <= seconds / CHECKPOINT_S + 1
    assert counted["metric"] == 2 * per_short_answer > 0  # as many metric calls for 400 tokens as for 20
