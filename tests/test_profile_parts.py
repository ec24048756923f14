"""A py-spy profile of the app split into the parts of its work, as `make bench-capacity --py-spy` reports it."""

from __future__ import annotations

import pytest

from tools.profile_parts import HISTORY, PACKETS, REST, UPDATES, UPSTREAM, WEBSOCKET, part_of, shares

# Frames as py-spy's raw format names them, from stacks sampled in the app under the capacity benchmark.
LOOP = "_patch_loop.<locals>._run_once (nest_asyncio.py:133)"
STREAM = "Reply.stream (app/chat/reply.py:242)"
TOKEN = "MessageBase.stream_token (chainlit/message.py:197)"
EMIT = "emits_sent_by_the_emitter.<locals>.emit (app/page/seam.py:484)"
WRITE = "_SelectorSocketTransport.write (asyncio/selector_events.py:1057)"
JSON_OUT = "JSONEncoder.encode (json/encoder.py:200)"
JSON_IN = "JSONDecoder.raw_decode (json/decoder.py:356)"
FRAME_OUT = "WebSocketsSansIOProtocol.send (uvicorn/protocols/websockets/websockets_sansio_impl.py:512)"
ROWS_IN = "Writer._apply (app/history/writes/writer.py:90)"
STACKS = {
    WEBSOCKET: [LOOP, STREAM, TOKEN, EMIT, FRAME_OUT, WRITE],
    PACKETS: [LOOP, STREAM, TOKEN, EMIT, "Packet.encode (socketio/packet.py:64)", JSON_OUT],
    UPDATES: [LOOP, STREAM, "Coalescer.add (app/chat/coalesce.py:25)", TOKEN],
    UPSTREAM: [LOOP, STREAM, "ChatStream._read (app/chat/backend.py:179)", JSON_IN],
    HISTORY: ["Thread.run (threading.py:982)", ROWS_IN, "Connection.execute (sqlalchemy/engine/base.py:1412)"],
    REST: [LOOP, "BaseEventLoop.create_future (asyncio/base_events.py:427)"],
}
# uvloop at work in its C code (its callbacks, its sockets), under the seam that serves the app.
UVLOOP = [
    "main (app/__main__.py:41)",
    "serve (app/page/seam.py:495)",
    "run (uvloop/__init__.py:92)",
    "Runner.run (asyncio/runners.py:118)",
]


@pytest.mark.parametrize("part", STACKS)
def test_a_stack_belongs_to_the_part_its_innermost_known_frame_names(part):
    assert part_of(STACKS[part]) == part


def test_the_parts_share_out_every_sample(tmp_path):
    raw = tmp_path / "profile.txt"
    counts = {WEBSOCKET: 1, PACKETS: 2, UPDATES: 3, UPSTREAM: 10, HISTORY: 4, REST: 0}
    waiting = f"{LOOP};EpollSelector.select (selectors.py:468) 7\n"  # the loop idle: not work
    raw.write_text(waiting + "".join(f"{';'.join(STACKS[part])} {count}\n" for part, count in counts.items() if count))
    assert shares(raw) == {part: count / 20 for part, count in counts.items()}


def test_uvloops_own_work_is_none_of_the_parts_though_the_seam_serves_it():
    assert part_of(UVLOOP) == REST


def test_a_frame_named_by_a_docstring_over_several_lines_stays_in_its_sample(tmp_path):
    # py-spy names some compiled functions (SQLAlchemy's) by their docstring, line breaks and all.
    named = "Apply Python context manager behavior to transaction objects.\n\n    Performs validation. (__doc__:-1)"
    raw = tmp_path / "profile.txt"
    raw.write_text(f"{';'.join(STACKS[HISTORY][:2])};{named} 3\n{';'.join(STACKS[UPSTREAM])} 1\n")
    assert shares(raw) == {**dict.fromkeys([WEBSOCKET, PACKETS, UPDATES, REST], 0.0), HISTORY: 0.75, UPSTREAM: 0.25}
