"""`make run` (tiny model): SIGTERM, SIGHUP or either server dying stops everything and frees both ports."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import (
    LOGS,
    ROOT,
    free_port,
    marked_processes,
    port_is_free,
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


@pytest.fixture
def make_run(request: pytest.FixtureRequest) -> Iterator[MakeRun]:
    mark, vllm_port, chat_port = str(uuid.uuid4()), free_port(), free_port()
    env = user_make_environment(
        MODEL=os.environ.get("TINY_MODEL", str(ROOT / ".cache/models/ernie-tiny")),
        SERVED_MODEL_NAME="ernie-tiny",
        PROFILE="dev",
        MAX_MODEL_LEN="512",
        VLLM_PORT=str(vllm_port),
        CHAT_PORT=str(chat_port),
        DATA_DIR=str(LOGS.parent / "data" / f"make-run-{mark}"),
        TEST_RUN_MARK=mark,
        VLLM_CPU_OMP_THREADS_BIND="0",
    )
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"make-run-{request.node.callspec.id}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = MakeRun(process, mark, (vllm_port, chat_port), log_path)
    try:
        wait_http(f"http://127.0.0.1:{chat_port}/", process, 300, {})
        yield run
    finally:
        for pid in marked_processes(mark):  # whatever a failed test left behind
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("stop", ["sigterm-to-make", "sighup-to-the-terminal"])
def test_a_stop_signal_stops_vllm_and_the_ui(make_run, stop):
    if stop == "sigterm-to-make":  # timeout(1), systemd's main process, a container stop
        os.kill(make_run.process.pid, signal.SIGTERM)
    else:  # a closed terminal signals its whole foreground process group (as Ctrl-C does with SIGINT)
        os.killpg(make_run.process.pid, signal.SIGHUP)
    make_run.wait_until_gone()
    expected = "SIGTERM" if stop == "sigterm-to-make" else "SIGHUP"
    assert f"make run: {expected} received, stopping the chat UI and vLLM." in make_run.output()


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
