"""The running Chainlit app, driven over socket.io as the browser does, against the real vLLM."""

from __future__ import annotations

import asyncio
import math
import re
import time

import aiohttp
import pytest

from tests.support.chat_client import ChatClient, errors, start_long_answer

pytestmark = pytest.mark.app


async def assert_vllm_idle_within_a_second(vllm, since: float) -> None:
    """vLLM's own gauge of running requests drops to 0 within 1 s of `since`."""
    while vllm.metric("vllm:num_requests_running") > 0 and time.monotonic() - since < 1.0:
        await asyncio.sleep(0.02)
    assert vllm.metric("vllm:num_requests_running") == 0
    assert time.monotonic() - since < 1.0


def answers(messages):
    return [m for m in messages if m.get("type") == "assistant_message"]


async def test_greets_in_the_browser_language(chat_app):
    for language, word in (("en-US", "Hello"), ("zh-CN", "你好")):
        tab = ChatClient(chat_app.url, language=language)
        await tab.connect()
        text = await tab.greeting()
        assert word in text and "ernie-tiny" in text
        ids = [w["id"] for w in tab.settings_widgets]
        # The settings, then a name to save them under as a preset (the local user has no presets yet).
        assert ids == ["temperature", "top_p", "max_tokens", "repetition_penalty", "system_prompt", "preset_save"]
        await tab.close()


async def test_the_pages_socket_is_not_compressed_though_the_browser_asks(chat_app):
    """Chromium asks for permessage-deflate; on frames of a hundred bytes it cost up to a fifth of the CPU a token."""
    async with aiohttp.ClientSession() as session:
        url = f"{chat_app.url}/ws/socket.io/?EIO=4&transport=websocket"
        async with session.ws_connect(url, compress=15) as socket:
            assert (await socket.receive_str(timeout=10)).startswith("0")  # engine.io's open packet: it is up
            assert socket.compress == 0


async def test_answer_is_streamed_token_by_token_and_ends_with_stats(client, vllm):
    produced = await client.ask("Hello, who are you?")
    reply = answers(produced)[-1]
    streamed = client.replies[reply["id"]]
    assert streamed.token_events >= 2
    assert streamed.streamed == reply["output"] != ""
    stats = [d for e, d in client.events if e == "element" and d.get("forId") == reply["id"]]
    assert stats and stats[0]["name"] == "AnswerStats"
    line = r"first token \d+ ms · \d+ tokens · [\d.]+ tok/s · \d+ of \d+ prompt tokens from the server's cache"
    assert re.fullmatch(line, stats[0]["props"]["text"])
    # With history on (the default), the stats line carries the export buttons.
    assert stats[0]["props"]["exports"] == [
        {"name": "export_markdown", "label": "Export Markdown"},
        {"name": "export_json", "label": "Export JSON"},
    ]


async def test_settings_change_applies_to_the_next_request(client, vllm):
    await client.change_settings(
        {"temperature": 0.25, "top_p": 0.5, "max_tokens": 7, "repetition_penalty": 1.0, "system_prompt": "SYS-MARK-42"}
    )
    await client.ask("hi")
    logged = vllm.logged_requests()[-1]
    assert logged["prompt"].startswith("<|begin_of_sentence|>SYS-MARK-42\nUser: hi\n")
    assert float(logged["temperature"]) == 0.25 and float(logged["top_p"]) == 0.5
    assert int(logged["max_tokens"]) == 7


async def test_conversation_is_sent_every_turn(client, vllm):
    await client.change_settings({"max_tokens": 5, "system_prompt": ""})
    first = answers(await client.ask("alpha question"))[-1]["output"]
    await client.ask("beta question")
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert prompt == (
        f"<|begin_of_sentence|>User: alpha question\nAssistant: {first}<|end_of_sentence|>"
        "User: beta question\nAssistant: "
    )


async def test_sessions_keep_their_own_settings_and_history(chat_app, vllm):
    first, second = ChatClient(chat_app.url), ChatClient(chat_app.url)
    for tab in (first, second):
        await tab.connect()
        await tab.greeting()
    await first.change_settings({"system_prompt": "ONLY-FIRST", "max_tokens": 4})
    await first.ask("first tab secret")
    await second.ask("second tab question")
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert "ONLY-FIRST" not in prompt and "first tab secret" not in prompt
    assert prompt.startswith("<|begin_of_sentence|>You are ERNIE")
    for tab in (first, second):
        await tab.close()


async def test_stop_ends_the_answer_and_frees_vllm(client, vllm):
    await client.change_settings({"temperature": 1.0})
    mark = await start_long_answer(client, vllm, "Write a very long story")
    finished_before = vllm.metric("vllm:request_success_total")
    await client.stop()
    stopped_at = time.monotonic()
    await client.wait_for(lambda: client.events_since(mark, "task_end"), 30)
    await assert_vllm_idle_within_a_second(vllm, stopped_at)
    # Aborted requests are not counted as finished: the answer was cut, not completed.
    assert vllm.metric("vllm:request_success_total") == finished_before
    await asyncio.sleep(0.2)
    reply_id = client.events_since(mark, "stream_start")[0]["id"]
    final = client.messages[reply_id]
    assert final["output"] == client.replies[reply_id].streamed and not final.get("streaming")
    stats = [d for e, d in client.events[mark:] if e == "element" and d.get("forId") == reply_id]
    assert stats and stats[0]["props"]["text"].endswith("· stopped"), "the stopped answer is finalized"
    counted = re.fullmatch(r"first token \d+ ms · (\d+) tokens · [\d.]+ tok/s · stopped", stats[0]["props"]["text"])
    assert counted and 0 < int(counted[1]) < 4000, "a stopped answer still shows how many tokens it got"
    # The partial answer is part of the history the next turn sends.
    await client.change_settings({"max_tokens": 4})
    await client.ask("and then?")
    assert f"Assistant: {final['output']}<|end_of_sentence|>User: and then?" in vllm.logged_requests()[-1]["prompt"]


async def test_a_second_message_while_answering_is_refused(client, vllm):
    await client.change_settings({"max_tokens": 4000})
    mark = await client.start_answer("first message, long answer")
    await client.send("second message too early")
    await client.wait_for(lambda: any(m.get("isError") for m in client.events_since(mark, "new_message")), 30)
    refusal = next(m["output"] for m in client.events_since(mark, "new_message") if m.get("isError"))
    assert "Still answering" in refusal
    await client.stop()
    await asyncio.sleep(0.5)
    assert "second message too early" not in vllm.logged_requests()[-1]["prompt"]


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": float("nan")},
        {"temperature": "hot"},
        {"temperature": -1},
        {"top_p": 0},
        {"max_tokens": -5},
        {"max_tokens": 10**12},
        {"max_tokens": True},
        {"system_prompt": 5},
        {"unknown_key": 1},
        "not a mapping",
        [1, 2],
        {"temperature": math.inf},
    ],
)
async def test_hostile_settings_are_rejected_and_the_last_good_ones_kept(client, vllm, bad):
    await client.change_settings({"temperature": 0.3, "max_tokens": 6})
    mark = len(client.events)
    await client.change_settings(bad)
    await client.wait_for(lambda: any(m.get("isError") for m in client.events_since(mark, "new_message")), 10)
    await client.ask("still there?")
    logged = vllm.logged_requests()[-1]
    assert float(logged["temperature"]) == 0.3 and int(logged["max_tokens"]) == 6


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert('x')</script><b>bold</b>",
        "tab\tbell\x07 nul-free \x1b[31m red",
        "混合中文 and emoji 😀🚀",
    ],
)
async def test_odd_messages_are_answered(client, text):
    await client.change_settings({"max_tokens": 4})
    produced = await client.ask(text)
    assert answers(produced) and not errors(produced)


async def test_empty_and_whitespace_messages_get_a_clear_message(client, vllm):
    before = len(vllm.logged_requests())
    for text in ("", "   \n\t "):
        produced = await client.ask(text)
        assert any("empty" in e for e in errors(produced))
    assert len(vllm.logged_requests()) == before


async def streaming_tab(chat_app, vllm, text: str) -> ChatClient:
    """A greeted session whose long answer is being generated in vLLM."""
    tab = ChatClient(chat_app.url)
    await tab.connect()
    await tab.greeting()
    await start_long_answer(tab, vllm, text)
    return tab


async def test_closing_the_tab_cancels_the_answer_in_vllm(chat_app, vllm):
    tab = await streaming_tab(chat_app, vllm, "a long answer nobody will read")
    finished_before = vllm.metric("vllm:request_success_total")
    await tab.drop()  # what closing a tab does: the websocket closes, nothing else is said
    await assert_vllm_idle_within_a_second(vllm, time.monotonic())
    assert vllm.metric("vllm:request_success_total") == finished_before


async def test_a_new_chat_stops_the_answer_in_vllm_at_once(chat_app, vllm):
    tab = await streaming_tab(chat_app, vllm, "a long answer, then the new chat button")
    finished_before = vllm.metric("vllm:request_success_total")
    await tab.new_chat()
    await assert_vllm_idle_within_a_second(vllm, time.monotonic())
    assert vllm.metric("vllm:request_success_total") == finished_before


async def test_regenerate_replaces_the_last_answer(client, vllm):
    await client.change_settings({"max_tokens": 6, "temperature": 1.0})
    first = [m for m in await client.ask("regenerate me") if m.get("type") == "assistant_message"][-1]
    actions = [d for e, d in client.events if e == "action" and d.get("forId") == first["id"]]
    assert [a["name"] for a in actions] == ["regenerate"]
    before = len(vllm.logged_requests())
    mark, response = await client.click_and_wait(actions[0])
    assert response["success"]
    assert any(d["id"] == first["id"] for d in client.events_since(mark, "delete_message"))
    requests = vllm.logged_requests()[before:]
    assert len(requests) == 1 and requests[0]["prompt"].endswith("User: regenerate me\nAssistant: ")
    assert "regenerate me" not in requests[0]["prompt"].split("User: regenerate me")[0]
