"""The Chainlit internals app/page/seam.py relies on still exist in the installed Chainlit (no server needed).

Bumping Chainlit's pin: run this first; a failure names the internal that moved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import chainlit as cl
import chainlit.server
import engineio.async_socket
import engineio.json
import pytest
import socketio
from chainlit.context import init_http_context
from chainlit.emitter import ChainlitEmitter
from chainlit.types import DeleteFeedbackRequest, ElementRequest, Feedback, UpdateFeedbackRequest
from fastapi import HTTPException
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.middleware.cors import CORSMiddleware

from app.config import Settings
from app.page import seam
from app.presets.panel import chat_profiles
from app.web.headers import own_page
from tests.support.servers import ROOT


def test_the_installed_chainlit_is_the_pinned_one():
    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"chainlit=={version('chainlit')}" in pinned


@pytest.mark.parametrize("event", seam.SOCKET_EVENTS)
def test_chainlit_handles_each_socket_event_the_app_replaces_or_wraps(event):
    handler = chainlit.server.sio.handlers["/"][event]
    assert inspect.iscoroutinefunction(handler)
    assert next(iter(inspect.signature(handler).parameters)) == "sid"  # the wrappers pass the sid first


def test_socketio_exposes_the_origin_check_and_the_connection_registry():
    assert hasattr(chainlit.server.sio.eio, "cors_allowed_origins")
    assert callable(chainlit.server.sio.manager.is_connected)


@pytest.mark.parametrize(("path", "method"), seam.ROUTES)
def test_chainlit_serves_each_guarded_route_with_the_parameters_the_guards_read(path, method):
    parameters = inspect.signature(seam.chainlit_endpoint(path, method), eval_str=True).parameters
    assert "current_user" in parameters
    payload = next(p.annotation for name, p in parameters.items() if name in ("payload", "update"))
    assert {"sessionId", "feedback", "feedbackId"} & set(payload.model_fields)
    # The guards are put first in the app's routes, so they must be matched in order.
    assert isinstance(chainlit.server.app.router.routes, list)


@pytest.mark.parametrize(("path", "method"), seam.LOGIN_ROUTES)
def test_chainlit_serves_each_login_route_with_the_request_the_app_reads(path, method):
    parameters = inspect.signature(seam.chainlit_endpoint(path, method), eval_str=True).parameters
    assert "request" in parameters
    if path == "/login":
        assert "form_data" in parameters


def test_the_login_internals_the_app_uses_exist():
    from chainlit.auth.cookie import get_token_from_cookies
    from chainlit.config import config
    from chainlit.session import ws_sessions_id

    assert get_token_from_cookies({"access_token": "a.b.c"}) == "a.b.c"
    assert isinstance(config.project.user_session_timeout, int)
    assert isinstance(ws_sessions_id, dict)
    assert callable(chainlit.server.sio.disconnect)


def test_the_payloads_carry_what_the_guards_read():
    assert UpdateFeedbackRequest.model_fields["feedback"].annotation is Feedback
    assert {"id", "forId"} <= set(inspect.signature(Feedback).parameters)
    assert "feedbackId" in DeleteFeedbackRequest.model_fields
    assert {"element", "sessionId"} <= set(ElementRequest.model_fields)
    assert callable(seam.WebsocketSession.get_by_id)


def test_chainlits_page_links_what_the_app_replaces_with_its_own_copies():
    from chainlit.server import build_dir

    page = (Path(build_dir) / "index.html").read_text()
    assert "fonts.googleapis.com" in page and "cdn.jsdelivr.net/npm/katex" in page and "</head>" in page
    assert own_page(page).count("https://") == 0


def test_chainlit_has_its_cors_middleware_entry_to_replace():
    assert any(getattr(entry, "cls", None) is CORSMiddleware for entry in chainlit.server.app.user_middleware)


def test_a_websocket_session_has_every_attribute_the_app_uses():
    session = seam.WebsocketSession(
        id="contract", socket_id="contract-socket", emit=print, emit_call=print, user_env={}, client_type="webapp"
    )
    try:
        used = ("id", "socket_id", "thread_id", "user", "token", "language", "chat_settings", "has_first_interaction")
        for name in used:
            assert hasattr(session, name), name
        assert session.environ == {}  # a session opened by a request holds its WSGI environment (the page's Referer)
        assert session.to_clear is False and session.current_task is None
        assert seam.WebsocketSession.get("contract-socket") is session
        assert inspect.iscoroutinefunction(session.delete)
    finally:
        asyncio.run(session.delete())


def test_the_emitter_sends_redraws_and_takes_off_steps_and_marks_tasks():
    for name in ("send_step", "update_step", "delete_step"):  # they return the emit's awaitable
        assert list(inspect.signature(getattr(ChainlitEmitter, name)).parameters) == ["self", "step_dict"], name
    for name in ("task_start", "task_end"):
        assert list(inspect.signature(getattr(ChainlitEmitter, name)).parameters) == ["self"], name


def test_the_context_the_seam_reads_exists():
    from chainlit.chat_context import chat_context
    from chainlit.config import config
    from chainlit.context import ChainlitContextException, init_ws_context

    assert list(inspect.signature(init_ws_context).parameters) == ["session_or_sid"]
    assert issubclass(ChainlitContextException, Exception)
    assert callable(chat_context.get)
    for name in ("add", "remove"):  # the page's messages, which a version switch changes
        assert list(inspect.signature(getattr(chat_context, name)).parameters) == ["message"], name
    assert isinstance(config.ui.name, str)
    assert seam.websocket_session() is None  # outside any context: no tab
    assert seam.page_address() == "" and seam.first_question_modes() is None
    assert "modes" in inspect.signature(cl.Message.__init__).parameters  # a question carries the composer's modes


def test_writes_are_held_until_the_first_message_by_chainlits_decorator():
    async def write(_self: object) -> None:
        return None

    held = seam.held_until_first_message(write)
    assert inspect.iscoroutinefunction(held) and held is not write


async def test_a_stored_step_goes_back_on_the_page_and_off_it_again():

    init_http_context()  # the page's messages are a session's
    step = {"id": "s1", "createdAt": "2026-01-01T00:00:00Z", "output": "hi", "type": "user_message", "name": "User"}
    await seam.show_again(step)  # type: ignore[arg-type]  # the keys a stored step has
    (message,) = seam.shown_messages()
    assert (message.id, message.content, message.type) == ("s1", "hi", "user_message")
    await seam.hide(message)
    assert seam.shown_messages() == []


def test_the_shared_chat_and_page_routes_take_what_the_seam_gives_them():
    shared = inspect.signature(seam.chainlit_endpoint(seam.SHARED_CHAT_ROUTE, "GET"), eval_str=True).parameters
    assert list(shared) == ["request", "thread_id", "current_user"]
    assert list(inspect.signature(seam.chainlit_endpoint(seam.PAGE_ROUTE, "GET")).parameters) == ["request"]


async def test_the_open_route_asks_chainlits_login_dependency_without_refusing(monkeypatch):
    from chainlit.auth import get_current_user, reuseable_oauth

    assert list(inspect.signature(get_current_user).parameters) == ["token"]
    assert callable(reuseable_oauth) and reuseable_oauth.auto_error is False  # no token: None, not a 401
    monkeypatch.setenv("CHAINLIT_CUSTOM_AUTH", "1")  # login required, as with the history on
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "contract-test-secret-" + "x" * 32)
    with pytest.raises(HTTPException):
        await get_current_user(token="forged")
    assert await seam.user_if_logged_in(token=None) is None and await seam.user_if_logged_in(token="forged") is None


def test_chainlit_asks_the_apps_thread_sharing_callback_with_the_thread_and_the_viewer():
    code = "".join(inspect.getsource(seam.chainlit_endpoint(seam.SHARED_CHAT_ROUTE, "GET")).split())
    assert "on_shared_thread_view(thread,current_user)" in code
    assert 'metadata.get("is_shared")' in code  # a chat marked shared is shown whatever the callback says


def test_chainlit_keeps_session_files_under_the_directory_the_seam_moves(tmp_path, monkeypatch):
    import chainlit.config
    from chainlit.session import WebsocketSession

    monkeypatch.setattr(chainlit.config, "FILES_DIRECTORY", tmp_path)
    monkeypatch.setattr(chainlit.server, "FILES_DIRECTORY", tmp_path)  # the one its shutdown deletes
    dead = tmp_path / "process-999999999"
    dead.mkdir()
    seam.own_files_directory()
    own = tmp_path / f"process-{os.getpid()}"
    assert own == vars(chainlit.server)["FILES_DIRECTORY"] and own.is_dir() and not dead.exists()
    session = WebsocketSession.__new__(WebsocketSession)
    session.id = "a-session"
    assert session.files_dir == own / "a-session"


def test_chainlits_favourites_follow_the_feature_flag_the_seam_turns_off(monkeypatch):
    from chainlit import socket
    from chainlit.config import config

    for handler in (socket.message_favorite, socket.fetch_favorites):
        assert "config.features.favorites" in inspect.getsource(handler), handler.__name__
    assert "cfg.features.model_dump()" in inspect.getsource(seam.chainlit_endpoint("/project/settings", "GET"))
    monkeypatch.setattr(config.features, "favorites", True)
    seam.turn_off_favourites()
    assert config.features.favorites is False


def test_chainlits_upload_route_checks_the_types_count_and_size_the_seam_sets():
    from chainlit.config import config
    from chainlit.element import Element
    from chainlit.server import validate_file_upload
    from fastapi import UploadFile
    from starlette.datastructures import Headers

    from app.web.uploads import ROUTE, accept

    def upload(name: str, mime: str, size: int) -> UploadFile:
        return UploadFile(file=None, size=size, filename=name, headers=Headers({"content-type": mime}))  # type: ignore[arg-type]

    before = config.features.spontaneous_file_upload
    try:
        seam.allow_uploads(accept({".md", ".pdf"}), 3, 1)
        feature = config.features.spontaneous_file_upload
        assert feature is not None and feature.enabled and feature.max_files == 3 and feature.max_size_mb == 1
        for allowed in (upload("a.md", "text/markdown", 10), upload("b.pdf", "application/pdf", 10)):
            validate_file_upload(allowed)
        for refused in (
            upload("c.exe", "application/octet-stream", 10),
            upload("d.pdf", "text/plain", 10),
            upload("e.md", "text/markdown", 2 * 1024 * 1024),
        ):
            with pytest.raises(ValueError):  # noqa: PT011  # Chainlit's message is its own
                validate_file_upload(refused)
    finally:
        config.features.spontaneous_file_upload = before
    parameters = inspect.signature(seam.chainlit_endpoint(ROUTE, "POST")).parameters
    assert {"session_id", "file"} <= set(parameters)
    # What the page's upload becomes on the message the app reads: an element with its name, path and type.
    assert {"name", "path", "mime"} <= {field.name for field in dataclasses.fields(Element)}


async def test_chainlits_messages_and_steps_are_built_without_stopping_the_event_loop(monkeypatch):
    modules = [importlib.import_module(name) for name in seam.CONSTRUCTORS_THAT_SLEEP]
    for module in modules:  # `time` there serves that sleep and nothing else
        assert set(re.findall(r"\btime\.\w+", inspect.getsource(module))) == {"time.sleep"}, module.__name__
        monkeypatch.setattr(module, "time", time)
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    init_http_context()
    cl.Message(content="hi")
    cl.Step(name="run")
    assert slept == [0.001, 0.001]  # Chainlit's own: the seam still has something to take away
    seam.no_blocking_sleeps()
    cl.Message(content="a")
    cl.Step(name="run")
    assert slept == [0.001, 0.001]


def test_an_action_goes_to_the_page_as_chainlits_own_dict_says(monkeypatch):
    action = cl.Action(name="fork", payload={"id": "m", "nested": {"n": [1, "2"]}}, label="L", tooltip="T", icon="i")
    action.forId = "message"
    chainlits = action.to_dict()
    monkeypatch.setattr(cl.Action, "to_dict", cl.Action.to_dict)  # put back after the test
    seam.plain_action_dicts()
    assert action.to_dict() == chainlits and list(action.to_dict()) == list(chainlits)
    assert set(chainlits) == {"name", "payload", "label", "tooltip", "icon", "forId", "id"}


def test_chainlit_offers_an_oauth_provider_once_its_variables_are_set(monkeypatch):
    from chainlit.oauth_providers import get_configured_oauth_providers

    generic = ("CLIENT_ID", "CLIENT_SECRET", "AUTH_URL", "TOKEN_URL", "USER_INFO_URL", "SCOPES")
    for name in generic:
        monkeypatch.delenv(f"OAUTH_GENERIC_{name}", raising=False)
    assert "generic" not in get_configured_oauth_providers()
    for name in generic:
        monkeypatch.setenv(f"OAUTH_GENERIC_{name}", "x")
    assert "generic" in get_configured_oauth_providers() and seam.oauth_configured()


def test_an_ended_logins_cookie_is_dropped_in_every_part():
    from starlette.requests import Request
    from starlette.responses import Response

    cookies = "access_token_0=a; access_token_1=b; other=c"
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", cookies.encode())]})
    response = Response()
    seam.clear_login(request, response)
    dropped = [v for k, v in response.raw_headers if k == b"set-cookie"]
    assert sorted(v.split(b"=")[0] for v in dropped) == [b"access_token_0", b"access_token_1"]
    assert all(b"Max-Age=0" in v or b"expires=" in v.lower() for v in dropped)


async def test_an_emit_to_one_tab_is_socketios_packet_sent_by_the_emitting_task():
    assert "create_task" in inspect.getsource(socketio.AsyncManager.emit)  # socketio's own: the seam's reason

    async def sent_by(seamed: bool) -> list[tuple[str, str, bool]]:
        server, sent = socketio.AsyncServer(async_mode="asgi"), []
        emitting = asyncio.current_task()

        async def send_packet(eio_sid: str, packet) -> None:
            sent.append((eio_sid, packet.encode(), asyncio.current_task() is emitting))

        server.eio.send_packet = send_packet
        if seamed:
            seam.emits_sent_by_the_emitter(server)
        tab = await server.manager.connect("eio-tab", "/")
        await server.manager.connect("eio-other", "/")
        await server.emit("stream_token", {"id": "m", "token": " t1 t2"}, to=tab)
        await server.emit("task_end", to=tab)
        await server.emit("element", {"id": "e", "content": [b"\x00\x01"]}, to=tab)  # bytes: an attachment
        await server.emit("everyone", ("a", 1))  # to every tab: socketio's own way
        return sent

    plain, seamed = await sent_by(seamed=False), await sent_by(seamed=True)
    assert [(eio, packet) for eio, packet, _ in seamed] == [(eio, packet) for eio, packet, _ in plain]
    assert plain[0][1] == '42["stream_token",{"id":"m","token":" t1 t2"}]'
    assert [packet for _, packet, _ in plain[2:4]] == [
        '451-["element",{"id":"e","content":[{"_placeholder":true,"num":0}]}]',
        b"\x00\x01",
    ]
    assert [by_emitter for _, _, by_emitter in seamed] == [True, True, True, True, False, False]
    assert not any(by_emitter for _, _, by_emitter in plain)


async def test_packets_to_a_tab_in_orjson_are_socketios_own_with_chinese_as_written():
    assert inspect.signature(socketio.AsyncServer).parameters["json"].default is None  # socketio's own way to swap it

    async def sent_by(in_orjson: bool) -> list[str | bytes]:
        server, sent = socketio.AsyncServer(async_mode="asgi"), []
        # socketio's own codec on a class of this test's: the app's build sets orjson's on socketio's, shared by all.
        server.packet_class = type("Packet", (socketio.packet.Packet,), {"json": engineio.json})

        async def send_packet(eio_sid: str, packet) -> None:
            sent.append(packet.encode())

        server.eio.send_packet = send_packet
        seam.emits_sent_by_the_emitter(server)
        if in_orjson:
            seam.packets_in_orjson(server)
        tab = await server.manager.connect("eio-tab", "/")
        await server.emit("stream_token", {"id": "m", "token": "你好"}, to=tab)
        await server.emit("stream_token", {"id": "m", "token": "\ud800", "n": 2**70}, to=tab)  # orjson refuses both
        await server.emit("element", {"id": "e", "content": [b"\x00\x01"]}, to=tab)
        return sent

    plain, in_orjson = await sent_by(in_orjson=False), await sent_by(in_orjson=True)
    assert in_orjson[0] == '42["stream_token",{"id":"m","token":"你好"}]' != plain[0]
    assert json.loads(in_orjson[0][2:]) == json.loads(plain[0][2:])
    assert in_orjson[1:] == plain[1:]
    assert plain[1:] == [
        '42["stream_token",{"id":"m","token":"\\ud800","n":1180591620717411303424}]',
        '451-["element",{"id":"e","content":[{"_placeholder":true,"num":0}]}]',
        b"\x00\x01",
    ]


def test_packets_from_a_tab_are_read_as_socketio_reads_them_refusing_huge_integers():
    server = socketio.AsyncServer(async_mode="asgi")
    server.packet_class = type("Packet", (socketio.packet.Packet,), {"json": engineio.json})
    seam.packets_in_orjson(server)
    packet = server.packet_class()
    packet.decode('42["message",{"text":"你好","n":18446744073709551616}]')
    assert packet.data == ["message", {"text": "你好", "n": 2**64}]
    with pytest.raises(ValueError, match="too large"):
        server.packet_class().decode('42["message",{"n":' + "1" * 200 + "}]")


async def test_an_emit_to_one_tab_walks_its_data_for_bytes_only_when_json_refuses_it(monkeypatch):
    server, walked = socketio.AsyncServer(async_mode="asgi"), []
    walk = socketio.packet.Packet.data_is_binary.__func__

    def walked_through(cls, data) -> bool:
        walked.append(data)
        return bool(walk(cls, data))

    monkeypatch.setattr(socketio.packet.Packet, "data_is_binary", classmethod(walked_through))

    async def send_packet(eio_sid: str, packet) -> None:
        pass

    server.eio.send_packet = send_packet
    seam.emits_sent_by_the_emitter(server)
    tab = await server.manager.connect("eio-tab", "/")
    await server.emit("new_message", {"id": "m", "output": "text", "metadata": {"turn": {"stats": [1, 2]}}}, to=tab)
    assert walked == []
    await server.emit("element", {"id": "e", "content": b"\x00"}, to=tab)
    assert walked[0] == ["element", {"id": "e", "content": b"\x00"}]


class PausingWebsocket:
    """A tab's websocket as engine.io's ASGI driver has it, whose sends wait while it is paused (a slow reader)."""

    def __init__(self) -> None:
        self.writable, self.gone = asyncio.Event(), asyncio.Event()
        self.writable.set()
        self.frames: list[str | bytes] = []
        self.senders: list[asyncio.Task[Any] | None] = []

    async def send(self, message: str | bytes) -> None:
        await self.writable.wait()
        self.frames.append(message)
        self.senders.append(asyncio.current_task())

    async def wait(self) -> str:
        await self.gone.wait()
        raise OSError("closed")

    async def close(self) -> None:
        self.gone.set()


async def a_tab_on_a_websocket(server: socketio.AsyncServer) -> tuple[str, PausingWebsocket, asyncio.Task[Any]]:
    """A tab whose engine.io socket runs its websocket handler (and writer) on a PausingWebsocket."""
    seam.emits_sent_by_the_emitter(server)
    seam.frames_counted()
    socket = engineio.async_socket.AsyncSocket(server.eio, "eio-tab")
    server.eio.sockets["eio-tab"] = socket
    websocket = PausingWebsocket()
    handling = asyncio.create_task(socket._websocket_handler(websocket))
    await asyncio.sleep(0)
    return await server.manager.connect("eio-tab", "/"), websocket, handling


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["text", "text", "text", "bytes", "pause", "resume", "turn"]), max_size=40))
@example(["pause", "text", "text", "text", "text"])  # a send that waits, and the writer's sent meanwhile
@example(["bytes", "text"])  # queued attachments, then text
@example(["bytes", "pause", "pause", "text"])  # text emitted while the writer sends a packet, then its attachment
def test_frames_reach_a_tab_in_the_order_emitted_however_its_websocket_pauses(steps):
    """Text goes onto the websocket from its emitter where it can; bytes (attachments) always through the queue."""

    async def run() -> tuple[list[int], list[str | bytes]]:
        server = socketio.AsyncServer(async_mode="asgi")
        tab, websocket, handling = await a_tab_on_a_websocket(server)
        emitted: list[int] = []
        emits: list[asyncio.Task[None]] = []

        async def emit(n: int, data: dict[str, bytes]) -> None:
            emitted.append(n)  # where it stands: nothing before its packet is queued or sent awaits
            await server.emit("stream_token", {"n": n, **data}, to=tab)

        for step in steps:
            if step in ("text", "bytes"):
                data = {"b": b"\x00"} if step == "bytes" else {}
                emits.append(asyncio.create_task(emit(len(emits), data)))
            elif step == "pause":
                websocket.writable.clear()
            elif step == "resume":
                websocket.writable.set()
            for _ in range(3 if step == "turn" else 1):
                await asyncio.sleep(0)
        websocket.writable.set()
        await asyncio.gather(*emits)
        for _ in range(10):
            await asyncio.sleep(0)
        await websocket.close()
        await handling
        return emitted, websocket.frames

    emitted, frames = asyncio.run(run())
    texts = [frame for frame in frames if isinstance(frame, str)]
    assert [int(re.findall(r'"n":(\d+)', frame)[0]) for frame in texts] == emitted
    after_attachments = [frames[i + 1] for i, frame in enumerate(frames) if isinstance(frame, str) and "451-" in frame]
    assert after_attachments == [b"\x00"] * len(after_attachments) == [f for f in frames if isinstance(f, bytes)]


async def test_a_frame_to_a_tab_with_nothing_before_it_is_written_by_the_emitter_else_queued():
    server = socketio.AsyncServer(async_mode="asgi")
    tab, websocket, handling = await a_tab_on_a_websocket(server)
    socket, emitting = server.eio.sockets["eio-tab"], asyncio.current_task()
    seam.frames_counted()  # once only: the handler is counted already
    await server.emit("stream_token", {"n": 0}, to=tab)
    websocket.writable.clear()
    paused = asyncio.create_task(server.emit("stream_token", {"n": 1}, to=tab))
    await asyncio.sleep(0)
    await server.emit("stream_token", {"n": 2}, to=tab)  # one is being sent: this one queued behind it
    assert socket.queue.qsize() == 1
    websocket.writable.set()
    await paused
    for _ in range(5):
        await asyncio.sleep(0)
    await server.emit("element", {"content": b"\x00"}, to=tab)  # bytes: attachments go through the queue
    for _ in range(5):
        await asyncio.sleep(0)
    await websocket.close()
    await handling
    assert websocket.frames == [
        '42["stream_token",{"n":0}]', '42["stream_token",{"n":1}]', '42["stream_token",{"n":2}]',
        '451-["element",{"content":{"_placeholder":true,"num":0}}]', b"\x00",
    ]  # fmt: skip
    writers = websocket.senders[2:]  # engine.io's writer task, from the queue
    assert websocket.senders[:2] == [emitting, paused] and emitting not in writers and paused not in writers


def test_the_app_is_served_as_chainlits_command_line_would_on_uvloop_with_asyncios_c_tasks(tmp_path):
    target = tmp_path / "target.py"
    target.write_text("import chainlit as cl\n\n\n@cl.on_message\nasync def answer(message):\n    pass\n")
    script = f"""
import asyncio, sys, uvicorn
from pathlib import Path
from chainlit.config import config
from app.page import seam

async def serve(server):
    print(type(asyncio.get_running_loop()).__module__, type(asyncio.current_task()).__module__)
    loaded = config.code.on_message is not None and config.run.module_name.endswith("target.py")
    print("nest_asyncio" in sys.modules, loaded)
    print(config.run.headless, config.run.host, config.run.port, server.config.ws, server.config.ws_per_message_deflate)

uvicorn.Server.serve = serve
seam.serve(Path({str(target)!r}), "127.0.0.1", 8123)
"""
    environment = {**os.environ, "UVICORN_WS_PROTOCOL": "websockets-sansio"}
    environment.pop("UVICORN_WS_PER_MESSAGE_DEFLATE", None)
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=environment, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [
        "uvloop", "_asyncio", "False", "True", "True", "127.0.0.1", "8123", "websockets-sansio", "True"
    ]  # fmt: skip


def test_chainlit_reads_a_tabs_profile_by_reentering_its_loop_and_the_seam_gives_its_own_config():
    script = """
import asyncio, uvloop
from chainlit.config import config
from chainlit.session import WebsocketSession
from app.page import seam

reads = []

async def profiles(user, language):
    reads.append(language)
    return []

config.code.set_chat_profiles = profiles

async def tab():
    own = WebsocketSession("s", "sock", print, print, {}, "webapp", chat_profile="Balanced").config is config
    await asyncio.sleep(0.05)
    print(own, len(reads))
    reads.clear()

async def main():
    await tab()
    seam.config_without_profiles()
    await tab()

uvloop.run(main())
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ran.returncode == 0, ran.stderr
    # Chainlit's: uvloop refuses to re-enter, but the read it was given still runs (for each tab that connects).
    assert ran.stdout.split() == ["True", "1", "True", "0"]


async def test_the_apps_presets_override_none_of_chainlits_configuration():
    profiles = await chat_profiles(None, "en", Settings(), None)
    assert profiles and all(profile.config_overrides is None for profile in profiles)
