"""A model whose chat template has no system role (Gemma's, some Mistral ones), served by a real vLLM."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.chat.backend import Backend, Sampling, system_in_question
from app.chat.token_bound import TemplateCost
from app.config import Settings
from tests.support.history import started_chat
from tests.support.servers import ChatApp, VllmServer
from tests.test_token_bound import learned_by_the_app, texts

pytestmark = pytest.mark.vllm

# The tiny model's template (ERNIE's), raising for a system message as Gemma's does.
WITHOUT_SYSTEM_ROLE = (
    "{%- if messages[0]['role'] == 'system' -%}{{ raise_exception('System role not supported') }}{%- endif -%}"
    "{{- '<|begin_of_sentence|>' -}}{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- 'User: ' + message['content'] + '\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}{{- 'Assistant: ' + message['content'] + '<|end_of_sentence|>' -}}"
    "{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{- 'Assistant: ' -}}{%- endif -%}"
)


@pytest.fixture(scope="module")
def vllm_without_system_role(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    template = tmp_path_factory.mktemp("template") / "without-system-role.jinja"
    template.write_text(WITHOUT_SYSTEM_ROLE)
    server = VllmServer("without-system-role", max_model_len=512, extra_args=f"--chat-template {template}")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def learned(vllm_without_system_role: VllmServer) -> TemplateCost:
    """The template's cost as the app learns it, on prompts whose system text opens the first question."""
    cost = learned_by_the_app(vllm_without_system_role)
    assert cost is not None
    return cost


def test_system_messages_open_the_first_question_whatever_follows():
    system = [{"role": "system", "content": "A"}, {"role": "system", "content": "B"}]
    user, assistant = {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}
    assert system_in_question([*system, user, assistant, user]) == [
        {"role": "user", "content": "A\n\nB\n\nq"},
        assistant,
        user,
    ]
    assert system_in_question([*system, assistant, user]) == [{"role": "user", "content": "A\n\nB"}, assistant, user]
    assert system_in_question([user]) == [user] and system_in_question(system[:1]) == [{"role": "user", "content": "A"}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=st.one_of(st.none(), texts), turns=st.lists(st.tuples(texts, texts), max_size=3), new=texts)
def test_the_bound_is_never_below_the_count_of_the_prompt_sent(vllm_without_system_role, learned, system, turns, new):
    messages = [{"role": "system", "content": system}] if system is not None else []
    for user, assistant in turns:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": new})
    assert vllm_without_system_role.count_chat_tokens(system_in_question(messages)) <= learned.prompt_bound(messages)


async def test_the_system_prompt_opens_the_first_question_and_is_counted_there(vllm_without_system_role):
    server = vllm_without_system_role
    backend = Backend(Settings(vllm_base_url=server.base_url, api_key=server.api_key))
    messages = [
        {"role": "system", "content": "SYS-7731"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    async with backend.stream_chat(messages, Sampling(temperature=0.0, top_p=1.0, max_tokens=2)) as stream:
        assert [delta async for delta in stream]
    assert server.logged_requests()[-1]["prompt"] == (
        "<|begin_of_sentence|>User: SYS-7731\n\nfirst question\nAssistant: first answer"
        "<|end_of_sentence|>User: second question\nAssistant: "
    )
    assert stream.prompt_tokens == await backend.count_prompt_tokens(messages)
    bound = await backend.prompt_bound(messages)
    assert bound is not None and bound >= stream.prompt_tokens
    await backend.aclose()


async def test_the_chat_answers_on_such_a_model(vllm_without_system_role):
    app = ChatApp(vllm_without_system_role, extra_env={"SYSTEM_PROMPT": "Answer briefly."})
    app.start()
    try:
        tab = await started_chat(app)
        for question in ("hello", "and again"):
            answer = (await tab.ask(question))[-1]
            assert answer["type"] == "assistant_message" and not answer.get("isError"), answer
        prompts = [request["prompt"] for request in vllm_without_system_role.logged_requests()]
        assert prompts[-1].startswith("<|begin_of_sentence|>User: Answer briefly.\n\nhello\nAssistant: ")
        await tab.close()
    finally:
        app.stop()
