"""`python -m app.local_link`: `make link` prints the running chat's key link; `open URL` opens it once it listens."""

from __future__ import annotations

import asyncio
import sys
import webbrowser

from app.config import get_settings, load_or_explain
from app.local_link import listening, running_link

# How long the opener waits for the chat to listen before it gives up.
OPEN_WITHIN_S = 120.0
ASK_EVERY_S = 0.5


async def listens_in_time(url: str) -> bool:
    """Whether the chat listens at url within OPEN_WITHIN_S (asked every ASK_EVERY_S)."""
    for _ in range(int(OPEN_WITHIN_S / ASK_EVERY_S)):
        if await asyncio.to_thread(listening, url):
            return True
        await asyncio.sleep(ASK_EVERY_S)
    return False


def open_when_listening(url: str) -> None:
    """Wait for the chat to listen, then open the link in a graphical browser (never a console one)."""
    if not asyncio.run(listens_in_time(url)):
        return
    try:
        browser = webbrowser.get()
    except webbrowser.Error:  # no browser at all
        return
    # Console browsers (lynx, w3m, $BROWSER) are plain GenericBrowser: they would take over the terminal.
    if type(browser) is not webbrowser.GenericBrowser:
        browser.open(url)


def main() -> int:
    """`make link`: print the running chat's link; `open URL`: the opener that open_later starts."""
    if sys.argv[1:2] == ["open"] and len(sys.argv) == 3:
        open_when_listening(sys.argv[2])
        return 0
    settings = load_or_explain(get_settings, "make link")
    if settings is None:
        return 2
    url = running_link(settings.data_dir)
    if url is None:
        print("make link: no chat of the local user runs here now (`make chat` or `make run` starts one).")
        return 1
    print(f"Chat UI: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
