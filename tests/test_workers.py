"""The processes that read and split files: last in line for the CPU, and never outliving the app (no server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.chat.workers import LOWEST_NICENESS, in_worker
from tests.support.servers import ROOT

# The kernel ends a worker once its app is gone; a busy machine may take a moment.
GONE_WITHIN_S = 10.0


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def autogroup_nice(pid: int) -> int | None:
    """The nice value of the process's autogroup (None: the kernel has no autogroup scheduling)."""
    autogroup = Path(f"/proc/{pid}/autogroup")
    return int(autogroup.read_text().split()[-1]) if autogroup.exists() else None


async def test_a_worker_gets_the_cpu_only_when_nothing_else_wants_it():
    pid = await in_worker(os.getpid)
    assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    assert os.getpriority(os.PRIO_PROCESS, pid) == LOWEST_NICENESS
    # A session of its own: with autogroup scheduling the app's session would lend it the app's share of the CPU.
    assert os.getsid(pid) == pid != os.getsid(0)
    assert autogroup_nice(pid) in (None, LOWEST_NICENESS)


def test_a_worker_ends_when_its_app_is_killed():
    started = "import asyncio, os, time; from app.chat.workers import in_worker; "
    started += "print(asyncio.run(in_worker(os.getpid)), flush=True); time.sleep(600)"
    app = subprocess.Popen([sys.executable, "-c", started], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        worker = int(app.stdout.readline())
        assert alive(worker)
        app.send_signal(signal.SIGKILL)  # no shutdown hook runs: what the kernel's OOM killer does
        app.wait(timeout=10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(worker)
    finally:
        app.kill()
        app.wait()
