"""The vLLM client module against a real vLLM serving the tiny ERNIE-4.5 model."""

from __future__ import annotations

from typing import Any

import pytest

from app.chat.backend import Backend, ChatStream, Message, Sampling
from app.config import Settings
from app.errors import ChatError, Problem

pytestmark = pytest.mark.vllm


def backend_for(vllm, **overrides) -> Backend:
    return Backend(Settings(vllm_base_url=vllm.base_url, api_key=vllm.api_key, **overrides))


async def collect(backend: Backend, messages: list[Message], **sampling: Any) -> tuple[str, ChatStream]:
    params = Sampling(**{"temperature": 0.0, "top_p": 1.0, "max_tokens": 12, **sampling})
    async with backend.stream_chat(messages, params) as stream:
        parts = [delta async for delta in stream]
    return "".join(parts), stream


async def test_discovers_served_model_and_window(vllm):
    model = await backend_for(vllm).model()
    assert model.name == "ernie-tiny"
    assert model.max_model_len == vllm.max_model_len


async def test_streamed_text_equals_final_text_and_usage(vllm):
    backend = backend_for(vllm)
    streamed, stream = await collect(backend, [{"role": "user", "content": "Hello"}], max_tokens=10)
    final = await backend._client.chat.completions.create(
        model="ernie-tiny", messages=[{"role": "user", "content": "Hello"}], temperature=0.0, max_tokens=10
    )
    assert streamed and streamed == final.choices[0].message.content
    assert stream.completion_tokens == 10 and stream.finish_reason == "length"
    assert stream.prompt_tokens == await backend.count_prompt_tokens([{"role": "user", "content": "Hello"}])


async def test_max_tokens_is_honoured(vllm):
    for limit in (1, 5, 17):
        _, stream = await collect(backend_for(vllm), [{"role": "user", "content": "count"}], max_tokens=limit)
        assert stream.completion_tokens is not None and stream.completion_tokens <= limit
        assert stream.completion_tokens == limit or stream.finish_reason == "stop"


async def test_temperature_zero_repeats_itself(vllm):
    backend = backend_for(vllm)
    messages = [{"role": "user", "content": "Tell me a story"}]
    first, _ = await collect(backend, messages, max_tokens=16)
    second, _ = await collect(backend, messages, max_tokens=16)
    assert first == second


async def test_system_prompt_and_history_are_rendered_by_the_chat_template(vllm):
    backend = backend_for(vllm)
    messages = [
        {"role": "system", "content": "SYS-7731"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    await collect(backend, messages, max_tokens=2)
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert prompt == (
        "<|begin_of_sentence|>SYS-7731\nUser: first question\nAssistant: first answer"
        "<|end_of_sentence|>User: second question\nAssistant: "
    )


@pytest.mark.parametrize("key", ["", "wrong"])
async def test_request_without_the_api_key_is_refused(vllm, key):
    with pytest.raises(ChatError) as caught:
        await Backend(Settings(vllm_base_url=vllm.base_url, api_key=key)).model()
    assert caught.value.problem is Problem.UNAUTHORIZED


async def test_unknown_model_name_is_reported(vllm):
    with pytest.raises(ChatError) as caught:
        await backend_for(vllm, model_name="no-such-model").model()
    assert caught.value.problem is Problem.MODEL_MISSING


async def test_prompt_over_the_window_is_rejected_with_vllms_reason(small_vllm):
    backend = backend_for(small_vllm)
    with pytest.raises(ChatError) as caught:
        await collect(backend, [{"role": "user", "content": "word " * 400}], max_tokens=8)
    assert caught.value.problem is Problem.REJECTED
    assert "maximum context length" in str(caught.value.details["reason"])
