"""Processes that read and split files, below everything else on the machine, the model server included."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

from app.errors import ChatError, Problem

# A long PDF is pure Python for seconds to minutes: in a thread it would hold the GIL the event loop streaming every
# answer needs, so it runs in processes of its own. On a CPU the model server's OpenMP threads share every core and
# wait for each other each step: a worker taking a core at the app's priority slowed another chat's stream tenfold
# while a 1 000-page PDF was read, so workers take only what the server leaves.
WORKERS = 2
LOWEST_NICENESS = 19
# Linux prctl(2): the signal a process gets when the thread that started it ends (the app: its event loop's).
PR_SET_PDEATHSIG = 1
Result = TypeVar("Result")


def exit_with(parent: int) -> None:
    """Have the kernel end this process once its parent is gone (a worker must never outlive the app)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # gone before the kernel was asked
        os._exit(0)


def lowest_priority(app: int) -> None:
    """Make this worker process (of the app's process `app`) the last to get the CPU: idle scheduling, in a session of
    its own at nice 19.

    With autogroup scheduling the kernel shares the CPU between sessions before it looks at a process's own nice
    value or policy, so in the app's session a worker would get the app's share, ahead of the model server.
    """
    exit_with(app)
    os.setsid()
    os.setpriority(os.PRIO_PROCESS, 0, LOWEST_NICENESS)
    with contextlib.suppress(OSError):  # a kernel without autogroup scheduling has no such file
        Path("/proc/self/autogroup").write_text(str(LOWEST_NICENESS))
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


@functools.cache
def workers() -> ProcessPoolExecutor:
    """The processes that read and split files (started at first use, fresh interpreters: no thread of ours copied)."""
    return ProcessPoolExecutor(
        WORKERS,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=lowest_priority,
        initargs=(os.getpid(),),
    )


def stop_workers() -> None:
    """End the worker processes if any started (the app is stopping); a task still running is dropped."""
    if workers.cache_info().currsize:
        workers().shutdown(wait=False, cancel_futures=True)
        workers.cache_clear()


async def in_worker(function: Callable[..., Result], *args: Any) -> Result:
    """A function of files run in a worker process (its arguments and result are pickled); ChatError if the process
    died under it (the next call gets new ones)."""
    try:
        return await asyncio.get_running_loop().run_in_executor(workers(), function, *args)
    except BrokenProcessPool:
        workers.cache_clear()
        raise ChatError(Problem.READER_STOPPED) from None
