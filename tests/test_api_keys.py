"""Personal API keys against the real app and vLLM, through clients nobody here wrote (the `openai` SDK, `llm`):
answers streamed and whole in vLLM's shapes, the page's limits and messages, revocation on every replica, nobody
else's chats, and every hostile request refused in OpenAI's shape."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.accounts import account, new_key, page_login
from tests.support.chat_client import ChatClient, errors
from tests.support.history import answer_of, run_users, started_chat, stored_rows
from tests.support.servers import ROOT, ChatApp, VllmServer, free_port, running

pytestmark = [pytest.mark.app, pytest.mark.vllm]
USERS = ("ann", "ben", "cal", "dee", "eve")
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def keyed_app(vllm: VllmServer):
    """An app with password login: root (an admin) and the USERS, its metrics on a port of their own."""
    app = ChatApp(vllm, extra_env={"METRICS_PORT": str(METRICS_PORT), "MAX_REQUEST_MB": "1"})
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    for name in USERS:
        assert run_users(app, "add", name, password=f"{name}-password").returncode == 0
    with running(app):
        yield app


def sdk(app: ChatApp, key: str) -> openai.OpenAI:
    """The OpenAI SDK pointed at the app, as a script would point it (no retries: each refusal is seen once)."""
    return openai.OpenAI(base_url=app.url + "/v1", api_key=key, max_retries=0)


def llm(app: ChatApp, key: str, home: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    """`llm -m ernie-tiny PROMPT` with the app configured as an OpenAI-compatible model (its documented way)."""
    home.mkdir(exist_ok=True)
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: ernie-tiny\n  model_name: ernie-tiny\n  api_base: {app.url}/v1\n  api_key_name: ernie\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    command = [str(Path(sys.executable).with_name("llm")), "-m", "ernie-tiny", "-o", "max_tokens", "8", "--key", key]
    return subprocess.run([*command, prompt], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)


def answers_counted(ending: str = "complete") -> float:
    """The app's chat_answers metric for one ending."""
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(f'chat_answers_total{{ending="{ending}"')
    )


async def usage_of(admin: ChatClient, user: str) -> int:
    """Tokens the user used today, as the admin page shows them."""
    status, state = await admin.rest("GET", "/admin/api/state")
    assert status == 200, state
    return sum(row["prompt_tokens"] + row["completion_tokens"] for row in state["usage"] if row["user"] == user)


async def raw(app: ChatApp, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST /v1/chat/completions as any HTTP client could send it: (status, JSON)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(app.url + "/v1/chat/completions", data=data, headers=headers or {}) as reply,
    ):
        return reply.status, json.loads(await reply.text())


def openai_error(body: Any) -> dict[str, Any]:
    """The error of a refusal in OpenAI's shape (message, type, param, code), checked to be one."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"] and error["type"], body
    return dict(error)


async def test_the_openai_sdk_streams_and_gets_whole_answers_counted_like_the_pages(keyed_app):
    ann, root = await page_login(keyed_app, "ann"), await page_login(keyed_app, "root")
    key = await new_key(ann)
    assert key.startswith("ek-") and len(key) > 40
    client = sdk(keyed_app, key)
    assert [model.id for model in client.models.list()] == ["ernie-tiny"]
    counted, used = answers_counted(), await usage_of(root, "ann")

    stream = client.chat.completions.create(
        model="ernie-tiny",
        messages=[{"role": "user", "content": "Say hello"}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert said and chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert (chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8) or said

    whole = client.chat.completions.create(
        model="ernie-tiny", messages=[{"role": "user", "content": "Say hello"}], max_tokens=8
    )
    assert whole.object == "chat.completion" and whole.choices[0].message.content
    assert whole.usage is not None and whole.usage.completion_tokens <= 8 and whole.usage.prompt_tokens > 0

    assert answers_counted() == counted + 2  # the operators' metrics count them like the page's answers
    for _ in range(50):  # usage is written in the background, as the page's
        if await usage_of(root, "ann") > used:
            break
        await asyncio.sleep(0.2)
    assert await usage_of(root, "ann") >= used + whole.usage.prompt_tokens + whole.usage.completion_tokens
    listed = (await account(ann))["keys"]
    assert [k["name"] for k in listed] == ["script"] and listed[0]["last_used_at"] and "key" not in listed[0]
    assert key not in json.dumps(listed)  # the page never gets the key again


async def test_the_sdk_and_llm_stream_then_meet_the_users_daily_quota_with_the_pages_own_message(keyed_app, tmp_path):
    cal, root = await page_login(keyed_app, "cal"), await page_login(keyed_app, "root")
    key = await new_key(cal)
    streamed = llm(keyed_app, key, tmp_path / "llm", "Say hello")
    assert streamed.returncode == 0 and streamed.stdout.strip(), streamed.stderr
    client = sdk(keyed_app, key)
    chunks = list(
        client.chat.completions.create(
            model="ernie-tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    status, _ = await root.rest("POST", "/admin/api/users/limits", {"name": "cal", "daily_tokens": 1})
    assert status == 200
    page = await started_chat(keyed_app, credentials=("cal", "cal-password"))
    on_the_page = errors(await page.ask("And now?"))
    assert len(on_the_page) == 1 and on_the_page[0].startswith("You have used today's 1 tokens")
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(
            model="ernie-tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True
        )
    hours = re.compile(r"in \d+ h")
    assert hours.sub("", refused.value.body["message"]) == hours.sub("", on_the_page[0])  # type: ignore[index]
    assert refused.value.body["type"] == "insufficient_quota"  # type: ignore[index]
    by_llm = llm(keyed_app, key, tmp_path / "llm", "Say hello")
    assert by_llm.returncode != 0 and "You have used today's 1 tokens" in by_llm.stderr
    await page.close()


async def test_a_revoked_key_is_refused_at_once_by_every_app_on_the_database(vllm: VllmServer, tmp_path):
    shared = {"DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}"}
    first, second = ChatApp(vllm, extra_env=dict(shared)), ChatApp(vllm, extra_env=dict(shared))
    assert run_users(first, "add", "root", "--admin", password="root-password").returncode == 0
    assert run_users(first, "add", "ann", password="ann-password").returncode == 0
    with running(first, second):
        ann, root = await page_login(first, "ann"), await page_login(first, "root")
        own, other = await new_key(ann, "own"), await new_key(ann, "other")
        for key in (own, other):
            assert [m.id for m in sdk(second, key).models.list()] == ["ernie-tiny"]
        listed = {k["name"]: k["id"] for k in (await account(ann))["keys"]}
        status, _ = await ann.rest("POST", "/account/api/keys/revoke", {"id": listed["own"]})
        assert status == 200
        status, _ = await root.rest("POST", "/admin/api/keys/revoke", {"id": listed["other"]})
        assert status == 200
        for key in (own, other):
            for app in (second, first):
                with pytest.raises(openai.AuthenticationError) as refused:
                    sdk(app, key).chat.completions.create(
                        model="ernie-tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
                    )
                assert refused.value.body["code"] == "invalid_api_key"  # type: ignore[index]
        changes = (await root.rest("GET", "/admin/api/state"))[1]["changes"]
        assert [c["action"] for c in changes][:1] == ["revoke API key"] and changes[0]["target"] == "ann"


async def test_another_users_key_never_reaches_your_chats_and_yours_keeps_a_call_in_your_chat(keyed_app):
    tab = await started_chat(keyed_app, credentials=("dee", "dee-password"))
    assert answer_of(await tab.ask("A chat of dee's"))["output"]
    chat = tab.thread_id_started
    before = await stored_rows(keyed_app, chat)
    dee, eve = await page_login(keyed_app, "dee"), await page_login(keyed_app, "eve")
    eves = sdk(keyed_app, await new_key(eve))
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as refused:
            eves.chat.completions.create(
                model="ernie-tiny",
                messages=[{"role": "user", "content": "Into dee's chat"}],
                max_tokens=4,
                stream=stream,
                extra_body={"chat_id": chat},
            )
        assert refused.value.body["code"] == "chat_not_found"  # type: ignore[index]
    assert await stored_rows(keyed_app, chat) == before

    made = eves.chat.completions.with_raw_response.create(
        model="ernie-tiny",
        messages=[{"role": "user", "content": "Eve's own"}],
        max_tokens=4,
        extra_body={"chat_id": "new"},
    )
    eves_chat = made.headers["x-chat-id"]
    assert made.parse().choices[0].message.content and eves_chat != chat
    status, eves_list = await eve.rest("GET", "/chats/api/state")
    assert status == 200 and [c["id"] for c in eves_list["chats"]] == [eves_chat]
    status, dees_list = await dee.rest("GET", "/chats/api/state")
    assert eves_chat not in [c["id"] for c in dees_list["chats"]]

    deez = sdk(keyed_app, await new_key(dee))
    chunks = list(
        deez.chat.completions.create(
            model="ernie-tiny",
            messages=[{"role": "user", "content": "Kept by a script"}],
            max_tokens=4,
            stream=True,
            extra_body={"chat_id": chat},
        )
    )
    assert chunks
    for _ in range(50):  # kept like the page's messages: committed in the background
        if (await stored_rows(keyed_app, chat))["steps"] == before["steps"] + 2:
            break
        await asyncio.sleep(0.2)
    assert (await stored_rows(keyed_app, chat))["steps"] == before["steps"] + 2  # the question and its answer
    await tab.close()


async def test_hostile_requests_are_refused_in_openais_shape(keyed_app):
    ben, root = await page_login(keyed_app, "ben"), await page_login(keyed_app, "root")
    key = await new_key(ben)
    bearer = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    asked: dict[str, Any] = {"model": "ernie-tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    expected: list[tuple[Any, dict[str, str], int, str | None]] = [
        (b"{not json", bearer, 400, None),
        (b"[1, 2]", bearer, 400, None),
        ({**asked, "model": "gpt-4o"}, bearer, 404, "model_not_found"),
        ({**asked, "n": 2}, bearer, 400, None),
        ({**asked, "tools": [{"type": "function", "function": {"name": "f"}}]}, bearer, 400, None),
        ({**asked, "messages": [{"role": "tool", "content": "x"}]}, bearer, 400, None),
        ({**asked, "temperature": 9}, bearer, 400, None),
        ({**asked, "messages": [{"role": "user", "content": "word " * 6000}]}, bearer, 400, "context_length_exceeded"),
        (b"x" * 1_100_000, bearer, 413, "request_too_large"),
        (asked, {}, 401, "missing_api_key"),
        (asked, {"Authorization": "Bearer"}, 401, "missing_api_key"),
        (asked, {"Authorization": "Basic YW5uOmFubi1wYXNzd29yZA=="}, 401, "missing_api_key"),
        (asked, {"Authorization": "Bearer ek-garbled"}, 401, "invalid_api_key"),
        (asked, {"Authorization": f"Bearer {key[:-2]}"}, 401, "invalid_api_key"),
        (asked, {"Authorization": f"Bearer {key}\u00e9"}, 401, "invalid_api_key"),
    ]
    for body, headers, status, code in expected:
        got, answer = await raw(keyed_app, body, headers)
        assert (got, openai_error(answer)["code"]) == (status, code or openai_error(answer)["code"]), str(body)[:60]
    cookie_only = ChatClient(keyed_app.url, credentials=("ben", "ben-password"))
    await cookie_only.log_in()  # a login cookie is no key
    status, answer = await cookie_only.rest("POST", "/v1/chat/completions", asked)
    assert status == 401 and openai_error(answer)["code"] == "missing_api_key"

    assert await root.rest("POST", "/admin/api/defaults", {"api_keys": False}) == (200, {"ok": True})
    try:
        got, answer = await raw(keyed_app, asked, bearer)
        assert got == 403 and openai_error(answer)["code"] == "api_keys_off"
        assert (await ben.rest("POST", "/account/api/keys/create", {"name": "another"}))[0] == 403
    finally:
        assert (await root.rest("POST", "/admin/api/defaults", {"api_keys": True}))[0] == 200
    assert (await raw(keyed_app, asked, bearer))[0] == 200

    assert (await root.rest("POST", "/admin/api/users/remove", {"name": "ben"}))[0] == 200
    got, answer = await raw(keyed_app, asked, bearer)
    assert got == 401 and openai_error(answer)["code"] == "invalid_api_key"
