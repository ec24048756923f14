"""The seam with Chainlit: every use of a Chainlit internal is here, and nowhere else in the app.

The internals (Chainlit 2.12; `tests/test_chainlit_seam.py` checks each still exists and has the shape used):
- `chainlit.server.sio.handlers` for the socket.io events in SOCKET_EVENTS, replaced or wrapped:
  `chat_settings_change` (Chainlit's fails on anything but a mapping and brackets the change with task
  events that hide the stop button), `connection_successful` (Chainlit's tells the page no task runs, though
  an answer may have kept streaming across a reconnect; a resumed chat's stats lines and regenerate button
  can only be drawn after it), `clear_session` (New chat must stop the old chat's work at once), `connect`
  (a removed user's login cookie must open no chat), `edit_message` (Chainlit's overwrites the question and
  deletes what followed it from the history; an edit is a new version beside the old question).
- `chainlit.server.sio.eio.cors_allowed_origins`: Chainlit sets [], which turns python-socketio's Origin
  check off.
- `chainlit.server.sio.manager.is_connected`: whether a session's socket came back within the grace period.
- `chainlit.server.app.user_middleware`: Chainlit's CORSMiddleware entry follows .chainlit/config.toml, read
  before the app's settings; it is replaced with one for the app's origins. The app's own middleware goes
  around Chainlit's (Host and Origin checks, the body limit) or inside its gzip (the security headers, which
  rewrite the page).
- `chainlit.server.router` (Chainlit's routes) and `chainlit.server.app.router.routes`: for each of ROUTES,
  a guard with the same parameters is matched first and calls Chainlit's function: Chainlit checks no
  ownership of the message or feedback rated, nor of the chat an element names, and answers an unknown
  session id with a 500 (`WebsocketSession.get_by_id`).
- `chainlit.context.init_ws_context` and `ChainlitContextException`: our socket.io handlers run in the
  session's context (so do the redraws of a message's saved mark, from the history's writer); a REST call
  has no chat session.
- `chainlit.session.WebsocketSession` and its `id`, `socket_id`, `thread_id`, `user`, `token`, `language`,
  `chat_settings`, `has_first_interaction`, `to_clear`, `current_task`, `delete()`, and `ws_sessions_id`
  (the live ones): a tab's session; sessions whose login ended are disconnected.
- `chainlit.auth.cookie.get_token_from_cookies`: the login token, which Chainlit may split over cookies;
  `clear_auth_cookie`: every part of it dropped when its login has ended;
  the app checks it against logouts and password changes before Chainlit sees the request.
- `chainlit.auth.get_current_user` and `reuseable_oauth` (the dependency behind Chainlit's `current_user`):
  with SHARE_LINKS=anyone, the shared-chat route (`GET /project/share/{thread_id}`) answers callers without
  a login too; Chainlit's own refuses them before its thread-sharing callback is asked. Its function for that
  route and its catch-all page route: a link's visitor without a login gets the chat as plain HTML (Chainlit's
  page would send them to its login form), a logged-in one Chainlit's page.
- `chainlit.chat_context.chat_context`: the messages the page shows, in order (a regeneration, an edit or a
  choice of version takes the rest of the branch off the page, and puts another one back).
- `chainlit.data.utils.queue_until_user_message`: the data layer holds writes until the first message, as
  Chainlit's own data layers do.
- the emitter's `send_step`, `update_step`, `delete_step`, `task_start` and `task_end`: messages that are shown
  but not stored (greeting, notices, exports, a branch put back on the page) or taken off the page but kept in
  the history (another version shown), and the stop button for a turn an action started.
- `chainlit.config.config.ui.name`: the assistant's name in the Markdown export;
  `config.project.user_session_timeout`: a login's lifetime, from LOGIN_HOURS instead of config.toml.
  `config.features.favorites`: turned off with the history off (favourite prompts are kept there; the page
  would offer a star that keeps nothing).
- `chainlit.config.FILES_DIRECTORY` (and `chainlit.server`'s copy): where sessions keep files (uploads, exports).
  Chainlit uses `.files` in the app's directory and deletes it at shutdown, so one app process stopping would take
  away the files of every other process run from the same directory (a replica, a second `make chat`); each
  process gets a directory of its own in it.
- `chainlit.message.time` and `chainlit.step.time`: Chainlit's Message and Step constructors sleep (blocking)
  a millisecond, so that two steps built in a row get different millisecond timestamps, which stops the event
  loop, every chat's stream with it: three times per answer, 25 ms when eight questions arrive at once. Their
  `time` becomes one whose sleep returns at once; the history orders by microsecond timestamps.
- `config.features.spontaneous_file_upload` (its `SpontaneousFileUploadFeature`): the files a message may carry
  (types, count, size) from UPLOAD_TYPES, UPLOAD_MAX_FILES and UPLOAD_MAX_MB instead of config.toml, read
  before the app's settings; the page and Chainlit's upload route both check them.
- `chainlit.server.sio.manager.emit` (python-socketio's AsyncManager), `sio.packet_class` and `sio.eio.send_packet`:
  socketio sends an emit to one tab from a task of its own and waits for it, so every page update of every answer
  cost a task and two turns of the event loop, and a loaded loop made each update slower than the stream's
  interval. An emit to one tab is sent by the task that emits it (the same engine.io packets); any other goes to
  socketio's own. The JSON of its packets to the tabs (`sio.packet_class.json`, a module's `dumps`) is orjson's.
- engine.io's `AsyncSocket._websocket_handler` (its writer sends each packet with `ws.send`, after `task_done` for
  each it took from the socket's `asyncio.Queue`, whose `_unfinished_tasks` counts those not yet taken), the
  server's `sockets` and a socket's `upgraded`, `upgrading`, `closing` and `closed`: a packet went through the
  socket's queue to a writer task woken for it, a task and a loop turn a frame. A text packet to a tab with nothing
  queued, taken or being sent goes onto its websocket from the emitting task; any other through the queue, in order.
- Chainlit's command line (`chainlit run`), replaced by `serve`: it makes its event loop re-entrant with nest_asyncio,
  which swaps asyncio's C tasks and futures for pure-Python ones and refuses uvloop. `serve` does what `chainlit
  run --headless` does (`config.run`, `chainlit.config.load_module`, `chainlit.auth.ensure_jwt_secret`, its logging,
  uvicorn's settings from the same variables) and runs the server on uvloop. Chainlit re-enters its loop in one
  place, `WebsocketSession.get_config`, to read a tab's chat profile for configuration overrides; the app's presets
  override nothing, so a tab's configuration is Chainlit's own (`config_without_profiles`).
- `WebsocketSession.environ`: the WSGI environment of the request that opened a tab's socket; its Referer is the
  page's address (a chat opened from the chats page as `/?project=<id>` starts in that project).
- `chainlit.oauth_providers.get_configured_oauth_providers`: the ids of the OAuth providers whose variables Chainlit
  found (its `oauth_callback` decorator refuses to register without one; the admin page links sign-ons of these).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import logging
import os
import shutil
import sys
import types
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import chainlit as cl
import chainlit.config as chainlit_config
import chainlit.server as chainlit_server
import engineio.async_socket
import engineio.json
import engineio.packet
import socketio.packet
import uvicorn
import uvloop
from chainlit.auth import ensure_jwt_secret, get_current_user, reuseable_oauth
from chainlit.auth.cookie import clear_auth_cookie, get_token_from_cookies
from chainlit.chat_context import chat_context
from chainlit.config import ChainlitConfig, SpontaneousFileUploadFeature, config, load_module
from chainlit.context import ChainlitContextException, init_ws_context
from chainlit.data.utils import queue_until_user_message as chainlit_queue_until_user_message
from chainlit.oauth_providers import get_configured_oauth_providers
from chainlit.server import app as server
from chainlit.server import router, sio
from chainlit.session import WebsocketSession as WebsocketSession  # re-exported: the type of a tab's session
from chainlit.session import ws_sessions_id
from chainlit.step import StepDict
from fastapi import Depends, HTTPException
from fastapi.routing import APIRoute
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response

from app import json_codec

# Chainlit's socket.io handlers the app replaces or wraps.
SOCKET_EVENTS = ("connect", "connection_successful", "clear_session", "chat_settings_change", "edit_message")
# Chainlit's routes the app guards (its own are matched after ours).
ROUTES = (
    ("/feedback", "PUT"),
    ("/feedback", "DELETE"),
    ("/project/element", "PUT"),
    ("/project/element", "DELETE"),
    ("/project/action", "POST"),
    ("/mcp", "POST"),
    ("/mcp", "DELETE"),
)
# Chainlit's catch-all route (its page, at any path) and its route giving a shared chat to its link's page.
PAGE_ROUTE = "/{full_path:path}"
SHARED_CHAT_ROUTE = "/project/share/{thread_id}"
# Chainlit's login routes the app runs its own code around (throttling, ending sessions, no renewal).
LOGIN_ROUTES = (("/login", "POST"), ("/logout", "POST"), ("/auth/jwt", "POST"))
# Chainlit's modules whose Message and Step constructors sleep.
CONSTRUCTORS_THAT_SLEEP = ("chainlit.message", "chainlit.step")
# A process's own directory in Chainlit's files directory: this, then its process id.
FILES_OF_PROCESS = "process-"
# Chainlit's command line logs this way (to standard output, from INFO).
LOG_FORMAT = "%(asctime)s - %(levelname)s - %(name)s - %(message)s"
# The attribute of an engine.io socket that keeps its tab's websocket (`frames_counted`).
FRAMES = "app_frames"
# The mark of engine.io's websocket handler once `frames_counted` wraps it.
COUNTING = "app_counts_frames"
Handler = Callable[..., Awaitable[Any]]
Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])
# Looks at a route's parameters (by name, as Chainlit's function takes them) and raises HTTPException to refuse.
RouteCheck = Callable[[dict[str, Any]], Awaitable[object]]
# Runs a route: its parameters and Chainlit's function for it, which it may call or not.
RouteWrapper = Callable[[dict[str, Any], Handler], Awaitable[Any]]


def instead_of_chainlit(event: str) -> Callable[[Handler], Handler]:
    """Our handler for a socket.io event instead of Chainlit's, run in the session's context."""

    def register(handler: Handler) -> Handler:
        async def handle(sid: str, *args: Any) -> Any:
            init_ws_context(sid)
            return await handler(*args)

        sio.on(event, handle)
        return handler

    return register


def after_chainlit(event: str) -> Callable[[Handler], Handler]:
    """Chainlit's handler for a socket.io event, then ours in the session's context (if the session exists)."""
    chainlit_handler = sio.handlers["/"][event]

    def register(handler: Handler) -> Handler:
        async def handle(sid: str, *args: Any) -> Any:
            result = await chainlit_handler(sid, *args)
            if WebsocketSession.get(sid) is not None:
                init_ws_context(sid)
                await handler(*args)
            return result

        sio.on(event, handle)
        return handler

    return register


def refuse_unknown_users(known: Callable[[str], Awaitable[bool]]) -> None:
    """After Chainlit accepts a connection, refuse it if its logged-in user is not `known` (removed since)."""
    chainlit_connect = sio.handlers["/"]["connect"]

    async def connect(sid: str, environ: dict[str, Any], auth: dict[str, Any]) -> Any:
        accepted = await chainlit_connect(sid, environ, auth)
        session = WebsocketSession.get(sid)
        if session is None or session.user is None or await known(session.user.identifier):
            return accepted
        await session.delete()
        raise ConnectionRefusedError("authentication failed")

    sio.on("connect", connect)


def guard_route(path: str, method: str, check: RouteCheck) -> None:
    """Run `check` on the parameters of Chainlit's route before it; the check refuses with an HTTPException."""

    async def checked(params: dict[str, Any], endpoint: Handler) -> Any:
        await check(params)
        return await endpoint(**params)

    wrap_route(path, method, checked)


def wrap_route(path: str, method: str, wrapper: RouteWrapper) -> None:
    """Our `wrapper(params, chainlit_function)` in place of Chainlit's route, with the same parameters."""
    endpoint = chainlit_endpoint(path, method)

    async def wrapped(**params: Any) -> Any:
        return await wrapper(params, endpoint)

    # FastAPI reads the parameters (the payload model, Chainlit's current-user dependency) off the signature.
    wrapped.__signature__ = inspect.signature(endpoint, eval_str=True)  # type: ignore[attr-defined]
    server.router.routes.insert(0, APIRoute(path, wrapped, methods=[method]))  # matched before Chainlit's


def open_to_anyone(path: str, method: str) -> None:
    """Chainlit's route, matched first, answering callers without a login too (its current_user is then None)."""
    endpoint = chainlit_endpoint(path, method)
    signature = inspect.signature(endpoint, eval_str=True)
    parameters = [
        p.replace(annotation=LoggedInUser) if p.name == "current_user" else p for p in signature.parameters.values()
    ]

    async def opened(**params: Any) -> Any:
        return await endpoint(**params)

    opened.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    server.router.routes.insert(0, APIRoute(path, opened, methods=[method]))


async def user_if_logged_in(token: str | None = Depends(reuseable_oauth)) -> Any:
    """The caller's user as Chainlit's routes get it, or None for a caller without a (valid) login."""
    try:
        return await get_current_user(token=token)  # type: ignore[arg-type]  # Chainlit types it str, takes None
    except HTTPException:
        return None


# A route parameter of this type is the caller's user, or None without a (valid) login.
LoggedInUser = Annotated[Any, Depends(user_if_logged_in)]


async def chainlit_page(request: Request) -> Response:
    """Chainlit's page, as its catch-all route serves it at any path."""
    return cast(Response, await chainlit_endpoint(PAGE_ROUTE, "GET")(request=request))


async def shared_chat(request: Request, thread_id: str) -> dict[str, Any]:
    """A shared chat as Chainlit's route gives it to a caller without a login (HTTPException: it gives none)."""
    response = await chainlit_endpoint(SHARED_CHAT_ROUTE, "GET")(
        request=request, thread_id=thread_id, current_user=None
    )
    return dict(json.loads(response.body))


def add_route(path: str, endpoint: Handler, method: str = "GET") -> None:
    """A route of the app's own, matched before Chainlit's (whose catch-all serves the page)."""
    server.router.routes.insert(0, APIRoute(path, endpoint, methods=[method]))


def chainlit_endpoint(path: str, method: str) -> Handler:
    """Chainlit's function behind a route."""
    for route in router.routes:
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ()):
            return cast(Handler, route.endpoint)
    raise RuntimeError(f"Chainlit serves no {method} {path}; the app's guard for it cannot be applied")


def oauth_providers() -> list[str]:
    """The ids of the OAuth providers whose variables Chainlit found (it offers a sign-in button for each)."""
    return list(get_configured_oauth_providers())


def oauth_configured() -> bool:
    """Whether Chainlit found an OAuth provider's variables (it then offers its sign-in button)."""
    return bool(oauth_providers())


def session_by_id(session_id: object) -> WebsocketSession | None:
    """A tab's session by the id its page sends in REST calls (None if there is none)."""
    return WebsocketSession.get_by_id(session_id) if isinstance(session_id, str) else None


def lock_origins(socket_origin_check: Callable[..., bool] | str, cors_origins: list[str]) -> None:
    """python-socketio's Origin check, and Chainlit's CORS grant for these origins only."""
    sio.eio.cors_allowed_origins = socket_origin_check
    for index, middleware in enumerate(server.user_middleware):
        if getattr(middleware, "cls", None) is CORSMiddleware:  # Starlette types .cls as a factory, not a class
            server.user_middleware[index] = Middleware(
                CORSMiddleware,
                allow_origins=cors_origins,
                allow_credentials=True,
                allow_methods=["*"],
                allow_headers=["*"],
            )
            return
    raise RuntimeError("Chainlit's CORS middleware was not found; the origin lock cannot be applied")


def surround(*layers: Middleware) -> None:
    """ASGI middleware around Chainlit's whole app (REST, socket.io and the page), the first outermost."""
    server.user_middleware[0:0] = layers


def innermost(layer: Middleware) -> None:
    """ASGI middleware inside Chainlit's own (its gzip): it sees each response as the route made it."""
    server.user_middleware.append(layer)


def asgi_app() -> Any:
    """The ASGI application Chainlit serves: routes, socket.io and the page, with their middleware."""
    return server


def set_login_secret(secret: str) -> None:
    """The key Chainlit signs and checks login tokens with (it reads it from its environment variable)."""
    os.environ["CHAINLIT_AUTH_SECRET"] = secret


def clear_login(request: Request, response: Response) -> None:
    """Have the browser drop its login cookie (all its parts), as Chainlit's logout does."""
    clear_auth_cookie(request, response)


def login_token(cookies: dict[str, str]) -> str | None:
    """The login token in a request's cookies (Chainlit may split it over several)."""
    return get_token_from_cookies(cookies)


def live_sessions() -> list[WebsocketSession]:
    """The tabs connected to this app process."""
    return list(ws_sessions_id.values())


async def disconnect(session: WebsocketSession) -> None:
    """Close a tab's connection and forget its session (its page goes back to the login)."""
    await sio.disconnect(session.socket_id)
    await session.delete()


def in_session(session: WebsocketSession, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    """Run work in a task of that tab's own context (its user session and page), from outside it."""

    async def run() -> None:
        init_ws_context(session)
        await work()

    return asyncio.create_task(run())


def is_connected(session: WebsocketSession) -> bool:
    """Whether the session's socket is connected (again)."""
    return bool(sio.manager.is_connected(session.socket_id, "/"))


def websocket_session() -> WebsocketSession | None:
    """This tab's session; None in a REST call or outside any Chainlit context."""
    try:
        session = cl.context.session
    except ChainlitContextException:
        return None
    return session if isinstance(session, WebsocketSession) else None


def tab_user() -> str | None:
    """The logged-in user of this tab (None without login)."""
    session = websocket_session()
    return session.user.identifier if session is not None and session.user is not None else None


def tab_user_id() -> str | None:
    """The database id of this tab's logged-in user (None without login)."""
    session = websocket_session()
    user = session.user if session is not None else None
    return str(user.id) if user is not None and hasattr(user, "id") else None


def browser_language() -> str | None:
    """The language the tab's browser asked for (its Accept-Language), if this is a tab."""
    session = websocket_session()
    return session.language if session is not None else None


def thread_id() -> str:
    """The id of this session's chat."""
    return str(cl.context.session.thread_id)


def keep_chat_settings(values: dict[str, Any]) -> None:
    """The session's settings where Chainlit keeps them (it saves them with the chat when the tab disconnects)."""
    cl.context.session.chat_settings = values


def page_address() -> str:
    """The address of this tab's page when it opened its connection ("" if not known)."""
    session = websocket_session()
    return str((session.environ if session is not None else {}).get("HTTP_REFERER", ""))


def first_question_modes() -> dict[str, str] | None:
    """The composer's modes the tab's first question was sent with (None: no question yet, or not a tab)."""
    if websocket_session() is None:
        return None
    for message in shown_messages():
        if message.type == "user_message":
            return dict(message.modes or {})
    return None


def shown_messages() -> list[cl.Message]:
    """The messages this session's page shows, oldest first."""
    return list(cast(Iterable[cl.Message], chat_context.get()))


async def hide(message: cl.Message) -> None:
    """Take a message off the page; the history keeps it (Message.remove would delete it there too)."""
    chat_context.remove(message)
    await cl.context.emitter.delete_step(message.to_dict())


async def show_again(step: StepDict) -> None:
    """Put a stored message back on the page, at its end, without storing it again."""
    chat_context.add(cl.Message.from_dict(step))
    await cl.context.emitter.send_step({**step, "parentId": None})  # a parent not on the page would hide it


async def send_unstored(step: StepDict, *, redraw: bool = False) -> None:
    """Show (or redraw) a message without the data layer storing it."""
    emitter = cl.context.emitter
    await (emitter.update_step(step) if redraw else emitter.send_step(step))


async def task_started() -> None:
    """Tell the page a task runs (it shows the stop button)."""
    await cl.context.emitter.task_start()


async def task_ended() -> None:
    """Tell the page the task ended."""
    await cl.context.emitter.task_end()


def run_as_current_task(task: asyncio.Task[None]) -> None:
    """Make a task the session's current one, which Chainlit's stop button cancels."""
    cl.context.session.current_task = task


def is_current_task(task: asyncio.Task[None]) -> bool:
    """Whether the task is the one Chainlit's stop button cancels itself."""
    return task is cl.context.session.current_task


def set_login_lifetime(seconds: int) -> None:
    """How long a login token (and its cookie) lasts."""
    config.project.user_session_timeout = seconds


def own_files_directory() -> None:
    """Keep this process's session files in a directory of its own, which Chainlit deletes at its shutdown.

    The directories of processes that were killed (and so could not delete theirs) are deleted here.
    """
    shared = chainlit_config.FILES_DIRECTORY
    for directory in shared.glob(f"{FILES_OF_PROCESS}*"):
        pid = directory.name.removeprefix(FILES_OF_PROCESS)
        if pid.isdigit() and not is_alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)
    own = shared / f"{FILES_OF_PROCESS}{os.getpid()}"
    own.mkdir(parents=True, exist_ok=True)
    chainlit_config.FILES_DIRECTORY = own
    chainlit_server.FILES_DIRECTORY = own  # type: ignore[attr-defined]  # its shutdown deletes this one


def config_without_profiles() -> None:
    """A tab's Chainlit configuration is the app's own: the chat profiles (the presets) override none of it."""

    def apps_config(_session: WebsocketSession) -> ChainlitConfig:
        return cast(ChainlitConfig, config)

    WebsocketSession.get_config = apps_config  # type: ignore[method-assign,assignment]


def serve(main_py: Path, host: str, port: int) -> None:
    """Serve the Chainlit app in `main_py` as `chainlit run --headless` does, on uvloop."""
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format=LOG_FORMAT, datefmt="%Y-%m-%d %H:%M:%S")
    config.run.headless, config.run.host, config.run.port = True, host, port
    config.run.module_name = str(main_py)
    load_module(config.run.module_name)
    ensure_jwt_secret()
    deflate = os.environ.get("UVICORN_WS_PER_MESSAGE_DEFLATE", "true").lower() in ("true", "1", "yes")
    settings = uvicorn.Config(
        server,
        host=host,
        port=port,
        ws=os.environ.get("UVICORN_WS_PROTOCOL", "auto"),
        ws_per_message_deflate=deflate,
        log_level="error",
    )
    uvloop.run(uvicorn.Server(settings).serve())


def emits_sent_by_the_emitter(server: Any = sio) -> None:
    """An emit to one tab is sent by the task that emits it, not by a task of its own it then waits for."""
    manager = server.manager
    socketio_emit = manager.emit

    async def emit(event: str, data: Any, namespace: str, **options: Any) -> Any:
        room = options.get("to") or options.get("room")
        one_tab = isinstance(room, str) and options.get("callback") is None and options.get("skip_sid") is None
        recipients = list(manager.get_participants(namespace, room)) if one_tab else []
        if len(recipients) != 1:
            return await socketio_emit(event, data, namespace, **options)
        arguments = list(data) if isinstance(data, tuple) else [] if data is None else [data]
        encoded = event_packet(server.packet_class, namespace, [event, *arguments])
        tab = recipients[0][1]
        if isinstance(encoded, str) and (frames := frames_now(server.eio, tab)) is not None:
            try:
                await frames(engineio.packet.Packet(engineio.packet.MESSAGE, encoded).encode())
            except Exception:  # a tab gone meanwhile: queued, engine.io's writer finds it so and closes it
                pass
            else:
                return None
        for part in encoded if isinstance(encoded, list) else [encoded]:  # a list: binary attachments follow
            await server.eio.send_packet(tab, engineio.packet.Packet(engineio.packet.MESSAGE, part))
        return None

    manager.emit = emit


@dataclasses.dataclass
class Frames:
    """A tab's websocket as engine.io's writer sends on it: one frame at a time, in the order sent, those under way
    counted."""

    send: Callable[[str | bytes], Awaitable[None]]
    # Sends begun and not ended, the lock's holder and waiters: engine.io's writer sends a batch taken from its
    # queue one frame after another, and a frame emitted between two of them would wait on the lock before the second.
    under_way: int = 0
    # A paused websocket wakes every waiting send at once, and a send that comes meanwhile finds it writable: it
    # would go before them. Frames take turns instead (asyncio's lock wakes its waiters in order).
    turns: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)

    async def __call__(self, message: str | bytes) -> None:
        self.under_way += 1
        try:
            async with self.turns:
                await self.send(message)
        finally:
            self.under_way -= 1


def frames_counted() -> None:
    """Each tab's websocket is kept with its socket (`FRAMES`), engine.io's writer sending through it, counted."""
    handler = engineio.async_socket.AsyncSocket._websocket_handler
    if getattr(handler, COUNTING, False):
        return

    async def counted(socket: engineio.async_socket.AsyncSocket, websocket: Any) -> Any:
        frames = Frames(websocket.send)
        websocket.send = frames
        setattr(socket, FRAMES, frames)
        return await handler(socket, websocket)

    setattr(counted, COUNTING, True)
    engineio.async_socket.AsyncSocket._websocket_handler = counted


def frames_now(engine: Any, tab: str) -> Frames | None:
    """The tab's websocket if a frame sent on it now goes after every packet sent before (None: engine.io's queue).

    Nothing is in engine.io's queue or taken from it unsent (`task_done` comes after its writer takes packets, and
    it sends them without a pause but the websocket's own), nor being sent; the tab is upgraded and open.
    """
    socket = engine.sockets.get(tab)
    frames = getattr(socket, FRAMES, None)
    if frames is None or not socket.upgraded or socket.upgrading or socket.closing or socket.closed:
        return None
    return frames if frames.under_way == 0 and socket.queue._unfinished_tasks == 0 else None


def packets_in_orjson(server: Any = sio) -> None:
    """socket.io's packets to the tabs encoded by orjson (a page update's JSON in a tenth of the time).

    Those from the tabs, a few a question, are read as socket.io reads them (engine.io's JSON, which refuses an
    integer of more than 100 digits; orjson would read one past 64 bits as a float).
    """
    server.packet_class.json = types.SimpleNamespace(dumps=json_codec.text, loads=engineio.json.loads)


def event_packet(packet_class: Any, namespace: str, data: list[Any]) -> Any:
    """An event's socket.io packet, encoded: text, else a list (bytes in the data travel as attachments after it)."""
    try:
        # Said not binary, the packet skips socket.io's walk through every value for bytes, a third of an emit's
        # cost (docs/benchmarks.md); JSON refuses bytes, and then socket.io walks it and sends them as attachments.
        return packet_class(socketio.packet.EVENT, namespace=namespace, data=data, binary=False).encode()
    except TypeError:
        return packet_class(socketio.packet.EVENT, namespace=namespace, data=data).encode()


def plain_action_dicts() -> None:
    """An action (a button) goes to the page as its fields' values, without dataclasses_json's walk (58 µs each)."""
    names = [field.name for field in dataclasses.fields(cl.Action)]

    def to_dict(action: cl.Action) -> dict[str, Any]:
        return {name: getattr(action, name) for name in names}

    setattr(cl.Action, "to_dict", to_dict)  # noqa: B010  (mypy refuses the method assigned)


def no_blocking_sleeps() -> None:
    """Chainlit's Message and Step constructors go on without their blocking millisecond's sleep."""
    for name in CONSTRUCTORS_THAT_SLEEP:  # by name: `chainlit.step` is also Chainlit's step decorator
        importlib.import_module(name).time = types.SimpleNamespace(sleep=lambda _seconds: None)  # type: ignore[attr-defined]


def is_alive(pid: int) -> bool:
    """Whether a process of this id runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def turn_off_favourites() -> None:
    """No favourite prompts: the page shows no star, and Chainlit's favourite events do nothing."""
    config.features.favorites = False


def allow_uploads(accept: dict[str, list[str]], max_files: int, max_size_mb: int) -> None:
    """Files attached to messages (button and drag-and-drop): these types (MIME pattern: name endings), count, size."""
    config.features.spontaneous_file_upload = SpontaneousFileUploadFeature(
        enabled=True, accept=accept, max_files=max_files, max_size_mb=max_size_mb
    )


def assistant_name() -> str:
    """The assistant's name as the page shows it."""
    return str(config.ui.name)


def held_until_first_message(method: Method) -> Method:
    """A data-layer write that Chainlit holds back until the session's first message (a greeting makes no chat)."""
    return cast(Method, chainlit_queue_until_user_message()(method))  # type: ignore[no-untyped-call,unused-ignore]
