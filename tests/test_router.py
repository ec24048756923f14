"""Two vLLM servers behind vLLM's router (make router), the app in front: each chat kept on one server, a stop
aborted where the answer runs, a server killed mid-answer without a chat lost (real vLLM, router and app)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.chat_client import ChatClient, start_long_answer
from tests.support.servers import ChatApp, RouterServer, VllmServer, free_port, running
from tools import bench_router

pytestmark = [pytest.mark.vllm, pytest.mark.app]


class Routed:
    """Two vLLM servers, the router in front of them, the app in front of the router (with its metrics)."""

    def __init__(self) -> None:
        self.servers = [VllmServer(f"routed-{n}", max_model_len=4096) for n in (1, 2)]
        self.router = RouterServer("routed", self.servers)
        self.metrics_port = free_port()
        self.app = ChatApp(self.router, extra_env={"METRICS_PORT": str(self.metrics_port)})

    def holding(self, marker: str) -> list[VllmServer]:
        """The servers that were sent a prompt with the marker."""
        return [s for s in self.servers if any(marker in r["prompt"] for r in s.logged_requests())]

    def home(self, marker: str) -> tuple[VllmServer, VllmServer]:
        """The one server that was sent the marker, and the other one."""
        (mine,) = self.holding(marker)
        (other,) = [s for s in self.servers if s is not mine]
        return mine, other

    def ready(self) -> tuple[int, dict[str, object]]:
        """The app's GET /ready: its status and body."""
        try:
            with urllib.request.urlopen(self.app.url + "/ready", timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    def servers_in_metrics(self) -> dict[str, float]:
        """The app's chat_model_servers gauge, by state."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as reply:
            lines = reply.read().decode().splitlines()
        prefix = 'chat_model_servers{state="'
        return {
            line[len(prefix) :].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith(prefix)
        }


@pytest.fixture(scope="module")
def routed() -> Iterator[Routed]:
    stack = Routed()
    with running(*stack.servers, stack.router, stack.app):
        yield stack


async def chat(app: ChatApp) -> ChatClient:
    """A tab with its greeting, answering in a few tokens."""
    tab = ChatClient(app.url)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"max_tokens": 4})
    return tab


async def answered(tab: ChatClient, text: str) -> None:
    """Send a message; it gets an answer and no error line."""
    produced = await tab.ask(text)
    shown = [(m.get("type"), m.get("isError"), m.get("output")) for m in produced]
    assert not [m for m in produced if m.get("isError")], shown
    assert any(m.get("type") == "assistant_message" for m in produced), shown


async def test_the_router_benchmark_measures_each_policy_beside_one_server_alone(routed, vllm):
    # make bench-router's run, small, on this module's servers and the session's: no server started for it.
    args = bench_router.options(["--chats", "2", "--turns", "2", "--first-words", "60"])
    results = await bench_router.behind_the_router(routed.servers, args) | await bench_router.alone(vllm, args)
    rows = [row.split("|")[2:5] for row in bench_router.table(results).splitlines() if row.startswith("| 2 |")]
    sides = [side.strip() for side, _, _ in rows]
    assert sides == ["2 servers, router consistent_hash", "2 servers, router round_robin", "1 server alone"]
    # Each chat's second turn begins with its first: kept on one server, part of its prompt is found cached.
    cached = {side.strip(): float(share.strip(" %")) for side, share, _ in rows}
    assert cached["2 servers, router consistent_hash"] > 0 and cached["1 server alone"] > 0, rows
    assert all(float(speed) > 0 for _, _, speed in rows), rows


async def test_every_turn_of_a_chat_goes_to_one_server_and_ready_counts_them(routed):
    tabs = [await chat(routed.app) for _ in range(4)]

    async def talk(index: int, tab: ChatClient) -> None:
        for turn in range(3):
            await answered(tab, f"chat {index} turn {turn}")

    await asyncio.gather(*(talk(index, tab) for index, tab in enumerate(tabs)))
    status, shown = await tabs[0].rest("GET", "/admin/api/state")  # the local user is the admin here
    assert status == 200 and (shown["health"]["vllm"]["servers_answering"], shown["health"]["vllm"]["servers"]) == (
        2,
        2,
    )
    for index, tab in enumerate(tabs):
        assert len(routed.holding(f"chat {index} turn 2")) == 1
        (server,) = routed.holding(f"chat {index} turn 0")
        assert routed.holding(f"chat {index} turn 2") == [server], "a chat's turns moved between servers"
        # The key is the chat's id, which every app replica knows: a chat stays put across replicas too.
        assert f"x-session-id:{tab.thread_id_started}" in routed.router.log_path.read_text(errors="replace")
        await tab.close()
    status, body = routed.ready()
    assert status == 200 and (body["vllm"], body["vllm_servers_answering"], body["vllm_servers"]) == ("ok", 2, 2)
    assert routed.servers_in_metrics() == {"answering": 2.0, "not_answering": 0.0}


async def test_stop_aborts_the_answer_on_the_server_that_runs_it(routed):
    tab = await chat(routed.app)
    await answered(tab, "which server is mine?")
    mine, other = routed.home("which server is mine?")
    mark = await start_long_answer(tab, mine, "Write a very long story")
    assert other.metric("vllm:num_requests_running") == 0
    request_id = mine.logged_requests()[-1]["id"]
    await tab.stop()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 30)
    deadline = time.monotonic() + 10
    while f"Request {request_id} aborted." not in mine.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the router did not abort the stopped answer on its server"
        await asyncio.sleep(0.1)
    # vLLM logs the abort as its API server asks it; its engine drops the request, and counts it, a moment later.
    while mine.metric("vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, "the stopped answer still runs on its server"
        await asyncio.sleep(0.1)
    await tab.close()


async def test_a_server_killed_mid_answer_loses_no_chat_and_gets_chats_again_once_back(routed):
    tab = await chat(routed.app)
    await answered(tab, "before the crash")
    mine, other = routed.home("before the crash")

    mark = await start_long_answer(tab, mine, "write a long answer")
    mine.kill()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 30)
    await asyncio.sleep(0.2)
    failures = [m["output"] for m in tab.events_since(mark, "new_message") if m.get("isError")]
    assert len(failures) == 1 and "lost in the middle of the answer" in failures[0]

    # At once, the next message: answered by the other server, with the whole chat so far.
    await tab.change_settings({"max_tokens": 4})
    await answered(tab, "after the crash")
    assert routed.holding("after the crash") == [other]
    prompt = next(r["prompt"] for r in other.logged_requests() if "after the crash" in r["prompt"])
    assert "before the crash" in prompt and "write a long answer" in prompt
    # The router's health check (every second) counts it out; the app says so.
    await tab.wait_for(lambda: routed.ready()[1]["vllm_servers_answering"] == 1, 10)
    assert routed.ready() == (200, {**routed.ready()[1], "vllm": "ok", "vllm_servers_answering": 1, "vllm_servers": 2})
    assert routed.servers_in_metrics() == {"answering": 1.0, "not_answering": 1.0}
    # New chats go to the server that answers.
    newcomers = [await chat(routed.app) for _ in range(3)]
    for index, newcomer in enumerate(newcomers):
        await answered(newcomer, f"newcomer {index}")
        assert routed.holding(f"newcomer {index}") == [other]

    # Back: the router's health check finds it, and the chat goes home to the server its id hashes to.
    await asyncio.to_thread(mine.start)
    await tab.wait_for(lambda: routed.router.answering() == 2, 15)
    await answered(tab, "once it is back")
    assert routed.holding("once it is back") == [mine]
    assert routed.ready()[1]["vllm_servers_answering"] == 2
    # New chats land on it again: each chat's id hashes to either server, so one of a dozen surely does.
    for index in range(12):
        newcomers.append(await chat(routed.app))
        await answered(newcomers[-1], f"back newcomer {index}")
        if routed.holding(f"back newcomer {index}") == [mine]:
            break
    else:
        pytest.fail("no new chat went to the server once it was back")
    for t in (tab, *newcomers):
        await t.close()
