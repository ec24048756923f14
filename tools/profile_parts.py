"""Where the app's time goes in a py-spy profile (`--format raw`): each sample's stack put in one part of the work."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# Each part by what its frames' file paths hold, checked from a stack's innermost frame outwards: the first frame
# that belongs to a part decides (a JSON encoder called by socket.io is socket.io's; a socket write by the websocket
# server is the websocket's).
WEBSOCKET, PACKETS, UPDATES = "websocket frames", "socket.io packets", "page updates"
UPSTREAM, HISTORY, REST = "vLLM's streams", "history writes", "the rest"
PARTS = {  # py-spy names a frame `function (path/from/site-packages.py:line)`
    WEBSOCKET: ("(uvicorn/protocols/websockets/", "(websockets/"),
    PACKETS: ("(socketio/", "(engineio/", "emits_sent_by_the_emitter", "Frames.__call__"),
    UPDATES: (
        "(chainlit/message.py",
        "(chainlit/emitter.py",
        "(app/chat/coalesce.py",
        "OnPage.words",
        "Reply.stream.<locals>.show",
    ),
    UPSTREAM: (
        "(aiohttp/",
        "(httpx",
        "(httpcore",
        "(h11/",
        "(anyio/",
        "(openai/",
        "(app/chat/backend.py",
        "(app/chat/transport.py",
    ),
    HISTORY: ("(sqlalchemy/", "(app/history/", "(app/terms.py"),
}


# The event loop waiting for its sockets: py-spy counts it now and then though the process is idle, so it is no work.
WAITING = "EpollSelector.select (selectors.py"


def part_of(stack: list[str]) -> str:
    """The part of the work one sampled stack (outermost frame first) was doing."""
    for frame in reversed(stack):
        for part, marks in PARTS.items():
            if any(mark in frame for mark in marks):
                return part
    return REST


def shares(raw: Path) -> dict[str, float]:
    """Each part's share of the profile's samples at work (py-spy's raw format: `frame;frame;… count`)."""
    counts: Counter[str] = Counter()
    for stack, count in samples(raw.read_text()):
        frames = stack.split(";")
        if stack and not frames[-1].startswith(WAITING):
            counts[part_of(frames)] += count
    total = sum(counts.values()) or 1
    return {part: counts[part] / total for part in [*PARTS, REST]}


def samples(text: str) -> Iterator[tuple[str, int]]:
    """Each stack and its count; a frame py-spy names by a compiled function's docstring runs over several lines."""
    pending: list[str] = []
    for line in text.splitlines():
        pending.append(line)
        stack, _, count = "\n".join(pending).rpartition(" ")
        if count.isdigit():
            yield stack, int(count)
            pending = []
