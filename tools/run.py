"""`make run`: start vLLM, wait until it serves a model, start the chat UI; a signal or either one ending stops both.

With VLLM_SERVERS set, it starts vLLM's router in front of those servers instead, and the chat UI against the router.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import FrameType

from app import listening
from app.config import DEFAULT_DOCUMENT_TOKENS, Settings, dotenv_file, get_settings, load_or_explain
from serving.machine import detect
from serving.plan import ServeSettings, choose_device, passage_budget
from serving.router import RouterSettings

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


class StopRequested(Exception):
    """A signal asked `make run` to stop."""


def request_stop(signum: int, _frame: FrameType | None) -> None:
    """Turn a stop signal into an exception, so the children are stopped on the way out."""
    raise StopRequested(signal.Signals(signum).name)


def die_with_parent() -> None:
    """In the child: get SIGTERM if `make run` itself dies without cleaning up (e.g. SIGKILL)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(module: str, **env: str) -> subprocess.Popen[bytes]:
    """`python -m module` in a session of its own (a terminal's signals reach only `make run`), with env added."""
    # No threads run in `make run`, and the child makes one prctl call before exec.
    return subprocess.Popen(
        [sys.executable, "-m", module],
        env={**os.environ, **env},
        start_new_session=True,
        preexec_fn=die_with_parent,  # noqa: PLW1509  # see the comment above
    )


def wait_for_models(url: str, api_key: str, server: subprocess.Popen[bytes], timeout: float) -> bool:
    """Poll /v1/models until it answers 200, the server exits, or time runs out."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a process group, then kill it if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # what the leader left in its group (vLLM's engine)
        os.killpg(process.pid, signal.SIGKILL)


def supervise(processes: dict[str, subprocess.Popen[bytes]]) -> int:
    """Wait until one of the processes ends; say which."""
    while True:
        for name, process in processes.items():
            if process.poll() is not None:
                print(
                    f"make run: {name} exited with code {process.returncode}; stopping the rest.",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
        time.sleep(0.5)


def passages_of_the_plan(settings: Settings) -> dict[str, str]:
    """The passages' budget the serving plan sets for this machine's device, for the app (DOCUMENT_TOKENS) unless it
    is set to another than the default."""
    if settings.document_tokens != DEFAULT_DOCUMENT_TOKENS:
        return {}
    serve = ServeSettings(_env_file=dotenv_file())
    device = choose_device(serve, detect(os.environ.get("SERVER_VENV", ".venv-vllm")))
    return {"DOCUMENT_TOKENS": str(passage_budget(device))}


def main() -> int:
    settings = load_or_explain(get_settings, "make run")
    router = load_or_explain(lambda: RouterSettings(_env_file=dotenv_file()), "make run")
    if settings is None or router is None:
        return 2
    if (problem := listening.unavailable(settings.chat_host, settings.chat_port)) is not None:
        print(f"make run: {problem}", file=sys.stderr)  # before vLLM takes minutes to load for nothing
        return 2
    for sig in STOP_SIGNALS:
        signal.signal(sig, request_stop)
    # Behind the router, the chat UI finds the model at the router (unless VLLM_BASE_URL says otherwise).
    base_url = (settings.vllm_base_url or router.base_url) if router.servers else settings.base_url
    server, module = ("vLLM's router", "serving.router") if router.servers else ("vLLM", "serving")
    models_url = base_url.rstrip("/") + "/models"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        processes[server] = start(module)
        print(f"waiting for {server} at {models_url} ...", flush=True)
        if not wait_for_models(models_url, settings.api_key.get_secret_value(), processes[server], timeout=1800):
            print(f"make run: {server} did not start; see its output above.", file=sys.stderr)
            return 1
        plan = {} if router.servers else passages_of_the_plan(settings)  # servers elsewhere: the app's own setting
        processes["the chat UI"] = start("app", VLLM_BASE_URL=base_url, **plan)
        print(f"Ctrl-C stops the chat UI and {server}.", flush=True)
        return supervise(processes)
    except StopRequested as request:
        print(f"make run: {request} received, stopping the chat UI and {server}.", flush=True)
        return 0
    finally:
        for sig in STOP_SIGNALS:  # a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        for process in reversed(processes.values()):
            stop(process)


if __name__ == "__main__":
    sys.exit(main())
