"""`make run` (tiny model): SIGTERM, SIGHUP or either server dying stops everything and frees both ports."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.chat_client import ChatClient
from tests.support.servers import (
    LOGS,
    ROOT,
    free_port,
    marked_processes,
    port_is_free,
    remember_key,
    user_make_environment,
    wait_http,
)

pytestmark = pytest.mark.vllm


@dataclass
class MakeRun:
    """A running `make run` in a session of its own, as a terminal would hold it."""

    process: subprocess.Popen[bytes]
    mark: str
    ports: tuple[int, int]
    log: Path
    data_dir: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until_gone(self, timeout: float = 30) -> float:
        """Seconds until make and every process it started have ended and both ports are free."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if (
                self.process.poll() is not None
                and not marked_processes(self.mark)
                and all(port_is_free(port) for port in self.ports)
            ):
                return time.monotonic() - started
            time.sleep(0.2)
        pytest.fail(
            f"after {timeout} s: processes {marked_processes(self.mark)}, "
            f"ports free {[port_is_free(p) for p in self.ports]}\n{self.output()[-3000:]}"
        )


def started(name: str, ports: tuple[int, int], mark: str, **settings: str) -> Generator[MakeRun, None, None]:
    """`make run` with these settings until the chat UI answers on ports[1]; whatever it leaves is killed after."""
    data_dir = LOGS.parent / "data" / f"make-run-{mark}"
    env = user_make_environment(
        CHAT_PORT=str(ports[1]), DATA_DIR=str(data_dir), OPEN_BROWSER="false", TEST_RUN_MARK=mark, **settings
    )
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"make-run-{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = MakeRun(process, mark, ports, log_path, data_dir)
    try:
        wait_http(f"http://127.0.0.1:{ports[1]}/", process, 300, {})
        remember_key(f"http://127.0.0.1:{ports[1]}", run.output())
        yield run
    finally:
        for pid in marked_processes(mark):  # whatever a failed test left behind
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def make_run(request: pytest.FixtureRequest) -> Iterator[MakeRun]:
    mark, vllm_port = str(uuid.uuid4()), free_port()
    yield from started(
        request.node.callspec.id,
        (vllm_port, free_port()),
        mark,
        MODEL=os.environ.get("TINY_MODEL", str(ROOT / ".cache/models/ernie-tiny")),
        SERVED_MODEL_NAME="ernie-tiny",
        PROFILE="dev",
        MAX_MODEL_LEN="512",
        VLLM_PORT=str(vllm_port),
        VLLM_CPU_OMP_THREADS_BIND="0",
    )


def make_link(run: MakeRun) -> str:
    """What `make link` prints for the chat `make run` started."""
    env = user_make_environment(CHAT_PORT=str(run.ports[1]), DATA_DIR=str(run.data_dir))
    done = subprocess.run(["make", "--no-print-directory", "link"], cwd=ROOT, env=env, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.mark.parametrize("stop", ["sigterm-to-make", "sighup-to-the-terminal"])
def test_a_stop_signal_stops_vllm_and_the_ui(make_run, stop):
    # Without users the chat is the local user's: `make run` prints the key link, `make link` prints it again.
    printed = re.search(r"^Chat UI: (http://localhost:(\d+)/\?key=[\w-]{43}) ", make_run.output(), re.MULTILINE)
    assert printed is not None and printed[2] == str(make_run.ports[1]), make_run.output()[-2000:]
    assert make_link(make_run) == f"Chat UI: {printed[1]}"
    if stop == "sigterm-to-make":  # timeout(1), systemd's main process, a container stop
        os.kill(make_run.process.pid, signal.SIGTERM)
    else:  # a closed terminal signals its whole foreground process group (as Ctrl-C does with SIGINT)
        os.killpg(make_run.process.pid, signal.SIGHUP)
    make_run.wait_until_gone()
    expected = "SIGTERM" if stop == "sigterm-to-make" else "SIGHUP"
    assert f"make run: {expected} received, stopping the chat UI and vLLM." in make_run.output()
    assert "no chat of the local user runs here now" in make_link(make_run)


@pytest.mark.parametrize("dies", ["vllm"])
def test_a_server_that_dies_takes_make_run_down_with_a_reason(make_run, dies):
    server = next(
        pid
        for pid in marked_processes(make_run.mark)
        if b"vllm.entrypoints" in Path(f"/proc/{pid}/cmdline").read_bytes()
    )
    os.killpg(os.getpgid(server), signal.SIGKILL)  # as the kernel's OOM killer or a crash would
    make_run.wait_until_gone()
    assert make_run.process.returncode != 0
    assert "make run: vLLM exited with code -9; stopping the rest." in make_run.output()


async def test_with_vllm_servers_set_make_run_starts_the_router_in_front_and_stops_it(vllm):
    mark, router_port = str(uuid.uuid4()), free_port()
    runs = started(
        "router",
        (router_port, free_port()),
        mark,
        VLLM_SERVERS=vllm.root,
        ROUTER_PORT=str(router_port),
        ROUTER_METRICS_PORT=str(free_port()),
        API_KEY=vllm.api_key,
    )
    run = next(runs)
    try:
        assert "waiting for vLLM's router at" in run.output()
        tab = ChatClient(f"http://127.0.0.1:{run.ports[1]}")
        await tab.connect()
        await tab.greeting()
        await tab.change_settings({"max_tokens": 4})
        before = len(vllm.logged_requests())
        produced = await tab.ask("through the router")
        assert not [m for m in produced if m.get("isError")]
        assert "through the router" in vllm.logged_requests()[before]["prompt"]
        await tab.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{run.ports[1]}/ready", timeout=10) as reply:
            ready = json.loads(reply.read())
        assert (ready["vllm"], ready["vllm_servers_answering"], ready["vllm_servers"]) == ("ok", 1, 1)
        os.kill(run.process.pid, signal.SIGTERM)
        run.wait_until_gone()
        assert "make run: SIGTERM received, stopping the chat UI and vLLM's router." in run.output()
    finally:
        runs.close()
