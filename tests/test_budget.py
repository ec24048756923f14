"""Context budgeting: properties over random conversations, with an exact fake token counted."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.chat.conversation import MIN_REPLY_TOKENS, Conversation, Turn, plan_request
from app.config import DEFAULT_LOW_WATER
from app.errors import ChatError, Problem
from tests.support.fake_openai import count_tokens, counted


def words(n: int) -> str:
    return " ".join(["w"] * n)


conversations = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    turns=conversations,
    system=st.integers(0, 30),
    new=st.integers(0, 80),
    max_tokens=st.integers(1, 300),
    window=st.integers(16, 400),
    kept_from=st.integers(0, 14),
)
def test_plan_fits_keeps_the_start_it_can_and_steps_down_to_the_low_water_mark(
    turns, system, new, max_tokens, window, kept_from
):
    conversation = Conversation([Turn(words(u), words(a)) for u, a in turns])
    system_prompt, user_text = words(system), words(new) + " newest"
    try:
        plan = asyncio.run(
            plan_request(
                conversation,
                system_prompt=system_prompt,
                user_text=user_text,
                max_tokens=max_tokens,
                window=window,
                count=counted,
                kept_from=kept_from,
            )
        )
    except ChatError as error:
        assert error.problem is Problem.MESSAGE_TOO_LONG
        alone = count_tokens(conversation.messages(system_prompt, user_text, skip=len(turns)))
        assert alone + min(max_tokens, MIN_REPLY_TOKENS) > window
        assert error.details == {"tokens": alone, "limit": window - min(max_tokens, MIN_REPLY_TOKENS)}
        return
    assert plan.prompt_tokens == count_tokens(plan.messages)
    assert plan.prompt_tokens + plan.max_tokens <= window
    assert 1 <= plan.max_tokens <= max_tokens
    assert plan.messages == conversation.messages(system_prompt, user_text, skip=plan.dropped_turns)
    if system:
        assert plan.messages[0] == {"role": "system", "content": system_prompt}
    assert plan.messages[-1] == {"role": "user", "content": user_text}
    start = min(kept_from, len(turns))
    assert plan.dropped_turns >= start, "the prompt never starts earlier than the previous one"
    if plan.dropped_turns > start:
        kept = conversation.messages(system_prompt, user_text, skip=start)
        assert count_tokens(kept) + max_tokens > window, "the previous start was left though it fit"
        fewer = conversation.messages(system_prompt, user_text, skip=plan.dropped_turns - 1)
        assert count_tokens(fewer) > DEFAULT_LOW_WATER * (window - max_tokens), "dropped more turns than the step needs"
    if plan.max_tokens < max_tokens:
        assert plan.dropped_turns == len(turns), "max_tokens clamped only once all history is gone"
        assert plan.prompt_tokens + plan.max_tokens == window, "the clamped request fills the window exactly"


def test_unknown_window_sends_everything_without_counting():
    async def never(_):
        raise AssertionError("no counting without a window")

    conversation = Conversation([Turn("a", "b")])
    plan = asyncio.run(
        plan_request(conversation, system_prompt="sys", user_text="new", max_tokens=100, window=0, count=never)
    )
    assert plan.dropped_turns == 0 and plan.max_tokens == 100 and len(plan.messages) == 4


def test_empty_system_prompt_sends_no_system_message():
    assert Conversation().messages("  ", "hi") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("window", "max_tokens", "expected"), [(100, 10, 10), (30, 50, None)])
def test_single_message_budget(window, max_tokens, expected):
    plan = asyncio.run(
        plan_request(
            Conversation(), system_prompt="", user_text=words(5), max_tokens=max_tokens, window=window, count=counted
        )
    )
    prompt = count_tokens([{"role": "user", "content": words(5)}])
    assert plan.max_tokens == (expected or window - prompt)


@settings(max_examples=200, deadline=None)
@given(
    turns=conversations,
    new=st.integers(0, 80),
    max_tokens=st.integers(1, 300),
    window=st.integers(16, 400),
    slack=st.integers(0, 50),
)
def test_a_bound_that_proves_the_fit_spares_the_count_and_changes_nothing(turns, new, max_tokens, window, slack):
    conversation = Conversation([Turn(words(u), words(a)) for u, a in turns])
    counted: list[int] = []

    async def counting(messages):
        counted.append(1)
        return count_tokens(messages)

    async def upper_bound(messages):
        return count_tokens(messages) + slack

    def plan(bound):
        return asyncio.run(
            plan_request(
                conversation,
                system_prompt="sys",
                user_text=words(new),
                max_tokens=max_tokens,
                window=window,
                count=counting,
                bound=bound,
            )
        )

    try:
        exact = plan(None)
    except ChatError:
        with pytest.raises(ChatError):
            plan(upper_bound)
        return
    counted.clear()
    bounded = plan(upper_bound)
    assert (bounded.messages, bounded.max_tokens, bounded.dropped_turns) == (
        exact.messages,
        exact.max_tokens,
        exact.dropped_turns,
    )
    full = conversation.messages("sys", words(new))
    proven = count_tokens(full) + slack + max_tokens <= window
    assert (counted == []) == proven and (bounded.prompt_tokens is None) == proven


def test_a_long_chat_moves_its_prompts_start_only_in_steps():
    window, max_tokens, turns = 400, 20, list[Turn]()
    starts: list[int] = []
    for index in range(40):
        plan = asyncio.run(
            plan_request(
                Conversation(list(turns)),
                system_prompt="sys",
                user_text=words(20),
                max_tokens=max_tokens,
                window=window,
                count=counted,
                kept_from=starts[-1] if starts else 0,
            )
        )
        starts.append(plan.dropped_turns)
        turns.append(Turn(words(20), words(10), message_id=str(index)))
    full_from = next(i for i, start in enumerate(starts) if start)  # the first turn past the window
    moves = sum(
        1 for before, after in zip(starts[full_from:], starts[full_from + 1 :], strict=False) if after != before
    )
    assert full_from > 5 and moves <= (len(starts) - full_from) // 4, starts
