"""CPU priority for vLLM, below the chat UI that shares its machine."""

from __future__ import annotations

import os
from pathlib import Path


def lower_priority(nice: int) -> None:
    """Give this process (soon vLLM) the nice value, and its session too when the session is its own."""
    os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
    # With autogroup scheduling the kernel shares the CPU between sessions first, so a nice value only
    # counts against processes of the same session; `make run` gives vLLM a session of its own.
    autogroup = Path("/proc/self/autogroup")
    if nice and os.getsid(0) == os.getpid() and autogroup.exists():
        autogroup.write_text(str(nice))
