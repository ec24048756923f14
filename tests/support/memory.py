"""The memory a running app holds, as the kernel counts it."""

from __future__ import annotations

from tests.support.servers import ChatApp


def rss_kb(app: ChatApp) -> int:
    """The app process's resident memory."""
    assert app.process is not None
    status = open(f"/proc/{app.process.pid}/status").read()  # noqa: SIM115  # read at once
    return int(status.split("VmRSS:")[1].split()[0])
