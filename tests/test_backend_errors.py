"""Error conversion of the vLLM client, against a local fake OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from app.chat.backend import Backend, ChatStream, Sampling, ServerCount, server_count
from app.config import Settings
from app.errors import ChatError, Problem
from app.i18n import error_text
from tests.support.fake_openai import fake_openai_server
from tests.support.servers import free_port

SAMPLING = Sampling(temperature=0.5, top_p=0.9, max_tokens=8)


@pytest.fixture
async def fake():
    with fake_openai_server() as (url, state):
        backend = Backend(Settings(vllm_base_url=url, request_timeout=1.0))
        yield backend, state
        await backend.aclose()


async def stream_text(backend: Backend) -> str:
    async with backend.stream_chat([{"role": "user", "content": "hi"}], SAMPLING) as stream:
        return "".join([piece async for piece in stream])


async def test_streams_text_and_usage(fake):
    backend, state = fake
    async with backend.stream_chat([{"role": "user", "content": "hi"}], SAMPLING) as stream:
        text = "".join([piece async for piece in stream])
    assert text == "Hello, world!"
    assert stream.completion_tokens == 4 and stream.finish_reason == "stop"
    sent = state.requests[-1]
    assert sent["stream"] is True and sent["max_tokens"] == 8 and sent["temperature"] == 0.5
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def test_unreachable_server():
    backend = Backend(Settings(vllm_base_url=f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(ChatError) as caught:
        await stream_text(backend)
    assert caught.value.problem is Problem.UNREACHABLE
    assert "make serve" in error_text("en", caught.value)


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        (401, Problem.UNAUTHORIZED),
        (403, Problem.UNAUTHORIZED),
        (404, Problem.MODEL_MISSING),
        (400, Problem.REJECTED),
        (500, Problem.SERVER_ERROR),
        (503, Problem.SERVER_ERROR),
    ],
)
async def test_http_errors_map_to_causes(fake, status, problem):
    backend, state = fake
    await backend.model()
    state.mode, state.status = "status", status
    with pytest.raises(ChatError) as caught:
        await stream_text(backend)
    assert caught.value.problem is problem
    assert error_text("en", caught.value) and error_text("zh", caught.value)


async def test_rejection_carries_the_servers_reason(fake):
    backend, state = fake
    await backend.model()
    state.mode, state.status = "status", 400
    with pytest.raises(ChatError) as caught:
        await stream_text(backend)
    assert caught.value.details["reason"] == "fake failure 400"


@pytest.mark.parametrize(
    ("mode", "problem", "details"),
    [
        ("drop", Problem.INTERRUPTED, {}),  # the connection closes mid-answer
        ("error_event", Problem.SERVER_ERROR, {"status": "engine failed"}),  # vLLM's error event
    ],
)
async def test_failure_mid_stream_keeps_what_arrived(fake, mode, problem, details):
    backend, state = fake
    state.mode = mode
    received, failure = await streamed_until_it_fails(backend)
    assert failure.problem is problem
    assert details.items() <= failure.details.items()
    assert "".join(received) == "Hello, "  # in as many pieces as the network delivered


async def streamed_until_it_fails(backend: Backend) -> tuple[list[str], ChatError]:
    """The pieces of an answer that fails, and its failure."""
    received: list[str] = []
    with pytest.raises(ChatError) as caught:
        async with backend.stream_chat([{"role": "user", "content": "hi"}], SAMPLING) as stream:
            async for piece in stream:
                received.append(piece)
    return received, caught.value


async def test_timeout(fake):
    backend, state = fake
    state.mode = "slow"
    with pytest.raises(ChatError) as caught:
        await stream_text(backend)
    assert caught.value.problem is Problem.TIMEOUT


async def test_token_count_uses_the_tokenize_endpoint(fake):
    backend, state = fake
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}]
    assert await backend.count_prompt_tokens(messages) == 1 + (2 + 2) + (2 + 3)
    assert state.requests[-1]["path"] == "/tokenize" and state.requests[-1]["add_generation_prompt"] is True


async def test_model_is_rediscovered_after_the_server_went_away(fake):
    backend, state = fake
    assert (await backend.model()).max_model_len == 64
    state.mode = "drop"
    with pytest.raises(ChatError):
        await stream_text(backend)
    state.window, state.mode = 128, "ok"
    assert (await backend.model()).max_model_len == 128


async def test_a_template_without_a_system_role_is_remembered_though_the_server_has_no_detokenize(fake):
    backend, state = fake
    state.refuse_system = True
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    async with backend.stream_chat(messages, SAMPLING) as stream:
        assert "".join([piece async for piece in stream]) == "Hello, world!"
    assert state.requests[-1]["messages"] == [{"role": "user", "content": "Be brief.\n\nhi"}]
    assert await backend.count_prompt_tokens(messages) == 1 + 2 + 3  # counted as sent: one message of 3 words


async def test_a_detokenize_answering_no_object_leaves_every_prompt_counted_and_answers_streaming(fake):
    backend, state = fake
    state.refuse_system, state.odd_answers = True, {"/detokenize": ["not", "an", "object"]}
    messages = [{"role": "user", "content": "hi"}]
    async with backend.stream_chat(messages, SAMPLING) as stream:
        assert "".join([piece async for piece in stream]) == "Hello, world!"
    assert await backend.prompt_bound(messages) is None
    assert await backend.count_prompt_tokens(messages) == 1 + 2 + 1


@pytest.mark.parametrize("odd", [[1, 2], "fine", {}, {"count": "many"}, b"<html>Bad gateway</html>"])
async def test_a_tokenize_answering_what_the_app_cannot_read_fails_a_count_by_its_cause(fake, odd):
    backend, state = fake
    state.odd_answers = {"/tokenize": odd}
    messages = [{"role": "user", "content": "hi"}]
    async with backend.stream_chat(messages, SAMPLING) as stream:  # the template left unknown: answers go on
        assert "".join([piece async for piece in stream]) == "Hello, world!"
    with pytest.raises(ChatError) as caught:
        await backend.count_prompt_tokens(messages)
    assert caught.value.problem is Problem.SERVER_ERROR
    assert "/tokenize" in error_text("en", caught.value)
    with pytest.raises(ChatError):
        await backend.count_text_tokens(["some words"])


@pytest.mark.parametrize("odd", [b"<html>Welcome to nginx!</html>", [1], {"data": "x"}, {}])
async def test_another_web_server_at_the_address_is_a_server_error_not_a_crash(fake, odd):
    backend, state = fake
    state.odd_answers = {"/v1/models": odd}
    with pytest.raises(ChatError) as caught:
        await stream_text(backend)
    assert caught.value.problem is Problem.SERVER_ERROR
    assert "/models" in error_text("en", caught.value)
    assert await backend.serving() is False
    state.odd_answers = {}
    assert await backend.serving() is True and await stream_text(backend) == "Hello, world!"


@pytest.mark.parametrize(
    "card",
    [
        {"owned_by": "test", "max_model_len": "4096"},
        {"owned_by": "test", "max_model_len": [4096]},
        {"owned_by": "llamacpp", "meta": "big"},
        {"owned_by": "llamacpp", "meta": {"n_ctx": "4096"}},
        {"owned_by": "llamacpp", "meta": {"n_ctx": True}},
    ],
)
async def test_a_window_the_server_gives_as_no_number_is_not_known_and_chat_goes_on(fake, card):
    backend, state = fake
    state.odd_answers = {"/v1/models": {"object": "list", "data": [{"id": "fake-ernie", "object": "model", **card}]}}
    assert (await backend.model()).max_model_len == 0
    assert await stream_text(backend) == "Hello, world!"


@pytest.mark.parametrize(
    ("readiness", "count"),
    [
        ({"healthy_workers": 2, "total_workers": 3}, ServerCount(2, 3)),
        ({"healthy_workers": 1, "total_workers": "3"}, ServerCount(1, 0)),  # a total that is no number: not known
        ({"healthy_workers": True, "total_workers": 1}, None),
        ({"healthy_workers": "2"}, None),
        ([2, 3], None),
    ],
)
def test_a_routers_count_is_read_from_whole_numbers_only(readiness, count):
    assert server_count(readiness) == count


@pytest.mark.parametrize(
    "odd",
    [
        [1, 2],
        "text",
        {"choices": "many"},
        {"choices": [3]},
        {"choices": [{"delta": "hi"}]},
        {"choices": [{"delta": {"content": 5}}]},
    ],
)
async def test_an_event_the_app_cannot_read_fails_the_answer_by_its_cause_after_its_text(fake, odd):
    backend, state = fake
    state.odd_event = odd
    said, failure = await streamed_until_it_fails(backend)
    assert failure.problem is Problem.SERVER_ERROR and "chat/completions" in error_text("en", failure)
    assert said == ["Hello"]


async def test_usage_counts_that_are_no_numbers_are_left_uncounted():
    async def chunks() -> AsyncIterator[bytes]:
        usage = {"prompt_tokens": "3", "completion_tokens": None, "prompt_tokens_details": {"cached_tokens": "2"}}
        yield b"data: " + json.dumps({"choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]}).encode()
        yield b"\n\ndata: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"

    stream = ChatStream(chunks(), "http://server")
    assert "".join([piece async for piece in stream]) == "a"
    assert (stream.prompt_tokens, stream.completion_tokens, stream.cached_tokens) == (None, None, None)


async def test_usage_of_another_shape_is_left_out():
    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: " + json.dumps({"choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]}).encode()
        yield b"\n\ndata: " + json.dumps({"choices": [], "usage": "all"}).encode() + b"\n\n"

    stream = ChatStream(chunks(), "http://server")
    assert "".join([piece async for piece in stream]) == "a" and stream.completion_tokens is None
