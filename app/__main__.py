"""`python -m app`: start the Chainlit UI on the configured host and port."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from app import listening, local_link
from app.config import get_settings, load_or_explain
from app.errors import HistoryUnreachable, LoginRequired
from app.history.accounts import Login, startup_login


def main() -> int:
    settings = load_or_explain(get_settings, "make chat")
    if settings is None:
        return 2
    if (problem := listening.unavailable(settings.chat_host, settings.chat_port)) is not None:
        print(f"make chat: {problem}", file=sys.stderr)
        return 2
    try:
        login = startup_login(settings)
    except (HistoryUnreachable, LoginRequired) as problem:
        print(f"make chat: {problem}", file=sys.stderr)
        return 2
    main_py = Path(__file__).with_name("main.py")
    print(local_link.hand_out(settings, login), flush=True)
    # Chainlit reads .chainlit/ and chainlit*.md from the working directory: the project root.
    os.chdir(main_py.parent.parent)
    # Measured cheaper per streamed token than uvicorn's pure-Python wsproto (README, Benchmarks);
    # uvicorn deprecates its older `websockets` implementation in favour of this one.
    os.environ.setdefault("UVICORN_WS_PROTOCOL", "websockets-sansio")
    # Browsers ask for every websocket frame compressed: for frames of a hundred bytes that cost up to a fifth of
    # the app's CPU per streamed token (docs/benchmarks.md), for next to no bandwidth. Declined unless set.
    os.environ.setdefault("UVICORN_WS_PER_MESSAGE_DEFLATE", "false")
    if settings.proxy_networks or login is Login.LOCAL:
        # uvicorn would replace the connection's address by X-Forwarded-For's for any loopback peer: the app
        # checks the connection's own against TRUSTED_PROXIES first (app/web/proxies.py), then reads the header;
        # the local user's refusals log the real peer (a proxy in front of it is what they are about).
        os.environ["FORWARDED_ALLOW_IPS"] = ""
    # Imported once the working directory is the project's: Chainlit reads its configuration at import.
    from app.page import seam

    # Served from this `-m` run, whose main module ends in `__main__`: a process spawned to read files does not run
    # it again (a script's imports would be, 1.3 s of CPU at the app's priority).
    seam.serve(main_py, settings.chat_host, settings.chat_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
