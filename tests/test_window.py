"""Conversations that outgrow the model's window, on a real vLLM with a 256-token window."""

from __future__ import annotations

import pytest

from tests.support.chat_client import errors

pytestmark = pytest.mark.app


async def test_a_message_too_long_for_the_window_is_refused_and_not_stored(small_client, small_vllm):
    before = len(small_vllm.logged_requests())
    produced = await small_client.ask("long " * 40_000)  # 200 000 characters
    assert any("too long" in e and "tokens" in e for e in errors(produced))
    assert len(small_vllm.logged_requests()) == before
    await small_client.change_settings({"max_tokens": 4, "system_prompt": ""})
    await small_client.ask("short one")
    assert small_vllm.logged_requests()[-1]["prompt"] == "<|begin_of_sentence|>User: short one\nAssistant: "


async def test_a_long_conversation_keeps_going_within_the_window(small_client, small_vllm):
    await small_client.change_settings({"max_tokens": 60, "system_prompt": "S"})
    trimmed = False
    for turn in range(8):
        produced = await small_client.ask(f"turn {turn}: " + "tell me more about this " * 8)
        assert not errors(produced), errors(produced)
        logged = small_vllm.logged_requests()[-1]
        used = small_vllm.count_tokens(logged["prompt"]) + int(logged["max_tokens"])
        assert used <= small_vllm.max_model_len
        assert f"turn {turn}:" in logged["prompt"]
        trimmed = trimmed or "turn 0:" not in logged["prompt"]
    assert trimmed, "old turns were dropped to stay in the window"
    assert any(
        "earlier turn(s) left out to fit the 256-token window" in (d.get("props") or {}).get("text", "")
        for e, d in small_client.events
        if e == "element"
    )


async def test_max_tokens_is_clamped_to_what_the_window_leaves(small_client, small_vllm):
    await small_client.change_settings({"max_tokens": 240, "system_prompt": ""})
    await small_client.ask("a message of some length " * 6)
    logged = small_vllm.logged_requests()[-1]
    assert small_vllm.count_tokens(logged["prompt"]) + int(logged["max_tokens"]) == small_vllm.max_model_len
