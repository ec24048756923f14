"""The prompt-token bound that spares /tokenize: never below vLLM's exact count, and used by the app."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.chat.backend import Backend
from app.chat.token_bound import TemplateCost, content_bound, learn_template_cost, probe
from app.config import Settings
from tests.support.chat_client import ChatClient
from tests.support.servers import VllmServer

CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
EMOJI = st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF)
ANY = st.characters(codec="utf-8")  # every encodable character (no surrogates)
NFKC_LONGER = st.sampled_from(["ﷺ", "㍿", "ﬃ", "⑳", "…", "㎒", "Ǆ"])  # NFKC turns each into more bytes
texts = st.lists(st.one_of(ANY, CJK, EMOJI, NFKC_LONGER), max_size=300).map("".join)


def test_content_bound_counts_bytes_after_nfkc_when_longer():
    assert content_bound("") == 1
    assert content_bound("hello") == 6
    assert content_bound("你好") == 7 and content_bound("🙂") == 5
    assert content_bound("ﷺ") == len("صلى الله عليه وسلم".encode()) + 1


def test_the_bound_grows_with_turns_and_text():
    cost = TemplateCost(with_system=10, without_system=6, per_turn=4)
    assert cost.prompt_bound(probe(system=True, turns=0)) == 10 + 2 * 2
    assert cost.prompt_bound(probe(system=False, turns=2)) == 6 + 2 * 4 + 5 * 2


def test_a_template_that_is_not_linear_per_turn_gets_no_bound():
    async def cost(messages: list[dict[str, str]]) -> int:
        return len(messages) ** 2

    assert asyncio.run(learn_template_cost(cost)) is None


def learned_by_the_app(server: VllmServer) -> TemplateCost | None:
    """The served model's template cost, learned through the app's own backend."""

    async def learn() -> TemplateCost | None:
        backend = Backend(Settings(vllm_base_url=server.base_url, api_key=server.api_key))
        try:
            await backend.prompt_bound([])
            return backend._template
        finally:
            await backend.aclose()

    return asyncio.run(learn())


@pytest.fixture(scope="module")
def learned(vllm) -> TemplateCost:
    """The tiny model's template cost, as the app learns it."""
    cost = learned_by_the_app(vllm)
    assert cost is not None, "the tiny model's template is linear per turn: it must get a bound"
    return cost


@pytest.mark.vllm
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=st.one_of(st.none(), texts), turns=st.lists(st.tuples(texts, texts), max_size=4), new=texts)
@example(system=None, turns=[], new="🙂" * 300)  # rare bytes: a byte-level tokenizer spends a token on each
@example(system="你好" * 100, turns=[("ﷺ" * 50, "㍿" * 50)], new="…" * 100)
def test_the_bound_is_never_below_vllms_count(vllm, learned, system, turns, new):
    messages = [{"role": "system", "content": system}] if system is not None else []
    for user, assistant in turns:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": new})
    assert vllm.count_chat_tokens(messages) <= learned.prompt_bound(messages)


@pytest.mark.app
async def test_short_chats_skip_tokenize_and_long_ones_count(client: ChatClient, vllm, small_client, small_vllm):
    await client.change_settings({"max_tokens": 4})
    await client.ask("warm up: the app learns the template once")
    before = vllm.metric("http_requests_total", 'handler="/tokenize"')
    for question in ("first short question", "second short question, 你好 🙂"):
        await client.ask(question)
    assert vllm.metric("http_requests_total", 'handler="/tokenize"') == before
    # A 256-token window: a long message cannot be proven to fit, so it is counted exactly.
    await small_client.change_settings({"max_tokens": 16})
    await small_client.ask("warm up")
    before = small_vllm.metric("http_requests_total", 'handler="/tokenize"')
    await small_client.ask("word " * 40)
    assert small_vllm.metric("http_requests_total", 'handler="/tokenize"') > before
