"""ENGINE=llama.cpp: the tiny model converted by the project's own code, served by llama-server, used by the app."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from serving.errors import ServeError
from serving.llama_cpp import build_llama_plan, llama_dir, prepare, server_binary
from serving.machine import Machine
from serving.plan import ServeSettings
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of
from tests.support.llama_cpp import LlamaServer
from tests.support.servers import ChatApp, running

pytestmark = pytest.mark.llama
WINDOW = 256
CPU = Machine(cpus=2, physical_cores=2, cpu_flags=frozenset({"avx2"}), available_memory_bytes=8 << 30)


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    """llama-server with a 256-token window per slot, two slots."""
    server = LlamaServer("engine", max_model_len=WINDOW)
    with running(server):
        yield server


@pytest.fixture(scope="module")
def llama_app(llama: LlamaServer) -> Iterator[ChatApp]:
    """The app, unchanged, in front of llama-server."""
    app = ChatApp(llama)
    with running(app):
        yield app


async def greeted(app: ChatApp, **settings: object) -> ChatClient:
    tab = ChatClient(app.url)
    await tab.connect()
    await tab.greeting()
    if settings:
        await tab.change_settings(settings)
    return tab


def stats_lines(tab: ChatClient) -> list[str]:
    """The stats lines under the answers, newest last (a question's line has no text)."""
    lines = [d["props"]["text"] for e, d in tab.events if e == "element" and d.get("name") == "AnswerStats"]
    return [line for line in lines if line]


def test_the_plan_uses_only_flags_llama_server_knows_each_with_a_reason():
    help_text = subprocess.run(
        [str(server_binary(llama_dir())), "--help"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    plan = build_llama_plan(ServeSettings(_env_file=None), CPU, Path("model.q4_k_m.gguf"), llama_dir())
    flags = [arg for arg in plan.argv[1:] if arg.startswith("--")]
    unknown = [flag for flag in flags if not re.search(rf"(^|[\s,]){re.escape(flag)}(?![\w-])", help_text, re.M)]
    assert flags and unknown == []
    assert len(plan.reasons) >= len(flags) - 2  # host and port are what the settings say
    assert "--jinja" in plan.argv and plan.argv[plan.argv.index("--threads") + 1] == "2"


def test_llama_cpp_is_refused_on_a_gpu_with_the_alternative():
    gpu_settings = ServeSettings(_env_file=None, engine="llama.cpp", device="gpu")
    with pytest.raises(ServeError, match="ENGINE=vllm"):
        prepare(gpu_settings, CPU, "model", ".venv-vllm", dry_run=True)


async def test_answers_stream_through_the_app_with_llama_servers_own_token_counts(llama_app, llama):
    tab = await greeted(llama_app, max_tokens=24)
    assert "ernie-tiny" in (await tab.greeting())
    answer = answer_of(await tab.ask("hello llama"))
    assert answer["output"]
    tokens = int(stats_lines(tab)[-1].split(" tokens")[0].rsplit(" ", 1)[-1])
    assert 0 < tokens <= 24 and llama.last_task()["params"]["n_predict"] == 24  # from llama-server's usage
    async with aiohttp.ClientSession() as http, http.get(llama_app.url + "/ready") as reply:
        assert reply.status == 200 and (await reply.json())["vllm"] == "ok"
    await tab.close()


async def test_stop_frees_the_slot_at_once(llama_app, llama):
    tab = await greeted(llama_app, max_tokens=WINDOW - 40)
    mark = await tab.start_answer("a long answer")
    await tab.stop()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 30)
    await asyncio.sleep(0.5)
    assert not any(slot["is_processing"] for slot in llama.get("/slots"))
    await tab.close()


async def test_the_window_is_budgeted_exactly_with_llama_servers_tokenizer(llama_app, llama):
    tab = await greeted(llama_app, max_tokens=240, system_prompt="")
    text = "a message of some length " * 6
    await tab.ask(text)
    task = llama.last_task()
    prompt_tokens = llama.prompt_tokens([{"role": "user", "content": text}])  # llama-server's own usage figure
    assert prompt_tokens + task["params"]["n_predict"] == WINDOW  # max tokens: what the window leaves, exactly

    newest = llama.last_task()["id_task"]  # the server's own task ids; its log is written behind its replies
    refused = await tab.ask("long " * 40_000)
    assert any(m.get("isError") and "too long" in m["output"] for m in refused)
    assert llama.last_task()["id_task"] == newest  # nothing was sent
    await tab.close()


async def test_a_resumed_chat_continues_with_its_history_after_an_app_restart(llama, tmp_path):
    app = ChatApp(llama, data_dir=tmp_path)
    with running(app):
        tab = await greeted(app, max_tokens=8, system_prompt="")
        answer_of(await tab.ask("first question"))
        thread_id = tab.thread_id_started
        await tab.close()
        await asyncio.sleep(0.5)
        first_prompt = llama.prompt_tokens([{"role": "user", "content": "first question"}])
        app.stop()
        app.start()
        again = ChatClient(app.url, thread_id=thread_id)
        await again.connect()
        await again.wait_for(lambda: again.events_since(0, "resume_thread"), 30)
        await asyncio.sleep(0.5)
        answer_of(await again.ask("first question"))
        task = llama.last_task()  # the prompt it kept: this request's prompt and what it generated
        assert task["n_prompt_tokens"] > first_prompt + 8  # the earlier turn is in the prompt
        await again.close()
