"""A test run whose server fails to start, or that is interrupted mid-test, leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.servers import ROOT, hermetic_environment, marked_processes, wait_http


def nested_pytest(test: str, tmp_path: Path, **env: str) -> tuple[subprocess.Popen[str], str]:
    """Run one of the project's own tests in a pytest of its own; its processes carry a mark to find them by."""
    mark = str(uuid.uuid4())
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=hermetic_environment(TEST_RUN_MARK=mark, TEST_LOGS=str(tmp_path), **env),
    )
    return process, mark


def assert_nothing_left(mark: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked_processes(mark) == []


@pytest.mark.vllm  # a nested run starts vLLM
def test_a_server_that_fails_to_start_is_stopped(tmp_path):
    """vLLM (in a session of its own) is still loading when its start times out on purpose."""
    process, mark = nested_pytest(
        "tests/test_app.py::test_greets_in_the_browser_language", tmp_path, TEST_SERVER_START_TIMEOUT="3"
    )
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 1 and "TimeoutError" in output and "did not answer within 3.0 s" in output
    assert_nothing_left(mark)
    assert (tmp_path / "vllm-shared.log").exists()


@pytest.mark.app  # a nested run starts the app (against a fake OpenAI server)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_an_interrupted_run_stops_its_servers(tmp_path, sig):
    """The chat app is up and a test is streaming an answer when the run is interrupted."""
    test = "tests/test_reconnect.py::test_an_answer_survives_a_dropped_connection_that_comes_back"
    process, mark = nested_pytest(test, tmp_path)
    deadline = time.monotonic() + 120
    while not (
        app := [pid for pid in marked_processes(mark) if b"\0-m\0app\0" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    ):
        assert time.monotonic() < deadline and process.poll() is None, "the app never started"
        time.sleep(0.1)
    variables = Path(f"/proc/{app[0]}/environ").read_bytes().split(b"\0")
    port = dict(variable.split(b"=", 1) for variable in variables if variable)[b"CHAT_PORT"].decode()
    wait_http(f"http://127.0.0.1:{port}/", process, 60, {})  # type: ignore[arg-type]  # any Popen will do
    time.sleep(1.0)  # the test streams a 4-second answer right after the app answers
    process.send_signal(sig)
    output, _ = process.communicate(timeout=60)
    assert process.returncode != 0, output[-2000:]  # interrupted, or the interrupted test failed
    assert_nothing_left(mark)
