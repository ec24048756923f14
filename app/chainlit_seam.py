"""The seam with Chainlit: every use of a Chainlit internal is here, and nowhere else in the app.

The internals (Chainlit 2.12; `tests/test_chainlit_seam.py` checks each still exists and has the shape used):
- `chainlit.server.sio.handlers` for the socket.io events in SOCKET_EVENTS, replaced or wrapped:
  `chat_settings_change` (Chainlit's fails on anything but a mapping and brackets the change with task
  events that hide the stop button), `connection_successful` (Chainlit's tells the page no task runs, though
  an answer may have kept streaming across a reconnect; a resumed chat's stats lines and regenerate button
  can only be drawn after it), `clear_session` (New chat must stop the old chat's work at once), `connect`
  (a removed user's login cookie must open no chat).
- `chainlit.server.sio.eio.cors_allowed_origins`: Chainlit sets [], which turns python-socketio's Origin
  check off.
- `chainlit.server.sio.manager.is_connected`: whether a session's socket came back within the grace period.
- `chainlit.server.app.user_middleware`: Chainlit's CORSMiddleware entry follows .chainlit/config.toml, read
  before the app's settings; it is replaced with one for the app's origins (and the Host check added).
- `chainlit.server.app.router.routes` with `update_feedback`, `delete_feedback`, `UserParam` and the ROUTES
  below: Chainlit's feedback routes check no ownership; ours are matched first and call Chainlit's.
- `chainlit.context.init_ws_context` and `ChainlitContextException`: our socket.io handlers run in the
  session's context; a REST call has no chat session.
- `chainlit.session.WebsocketSession` and its `id`, `socket_id`, `thread_id`, `user`, `language`,
  `chat_settings`, `has_first_interaction`, `to_clear`, `current_task`, `delete()`: a tab's session.
- `chainlit.chat_context.chat_context`: the messages the page shows (regenerate removes the shown answer).
- `chainlit.data.utils.queue_until_user_message`: the data layer holds writes until the first message, as
  Chainlit's own data layers do.
- the emitter's `send_step`, `update_step`, `task_start` and `task_end`: messages that are shown but not
  stored (greeting, notices, exports), and the stop button for a turn an action started.
- `chainlit.config.config.ui.name`: the assistant's name in the Markdown export.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar, cast

import chainlit as cl
from chainlit.chat_context import chat_context
from chainlit.config import config
from chainlit.context import ChainlitContextException, init_ws_context
from chainlit.data.utils import queue_until_user_message as chainlit_queue_until_user_message
from chainlit.server import UserParam, delete_feedback, sio, update_feedback
from chainlit.server import app as server
from chainlit.session import WebsocketSession as WebsocketSession  # re-exported: the type of a tab's session
from chainlit.step import StepDict
from chainlit.types import DeleteFeedbackRequest, UpdateFeedbackRequest
from fastapi import HTTPException, Request
from fastapi.routing import APIRoute
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

# Chainlit's socket.io handlers the app replaces or wraps.
SOCKET_EVENTS = ("connect", "connection_successful", "clear_session", "chat_settings_change")
# Chainlit's routes the app guards (its own are matched after ours).
ROUTES = (("/feedback", "PUT"), ("/feedback", "DELETE"))
Handler = Callable[..., Awaitable[Any]]
Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])
# Whether a user (by identifier) may rate a message or remove a rating, by their ids.
Permission = Callable[[str, str], Awaitable[bool]]


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


def guard_feedback(may_rate: Permission, may_unrate: Permission) -> None:
    """Thumbs up/down only where the permission says so; Chainlit's routes do the rest."""

    async def rate(request: Request, update: UpdateFeedbackRequest, current_user: UserParam) -> Response:
        if not current_user or not await may_rate(current_user.identifier, update.feedback.forId):
            raise HTTPException(status_code=404, detail="Message not found")
        return cast(Response, await update_feedback(request, update, current_user))

    async def unrate(request: Request, payload: DeleteFeedbackRequest, current_user: UserParam) -> Response:
        if not current_user or not await may_unrate(current_user.identifier, payload.feedbackId):
            raise HTTPException(status_code=404, detail="Feedback not found")
        return cast(Response, await delete_feedback(request, payload, current_user))

    # Matched before Chainlit's own routes for the same paths.
    server.router.routes[:0] = [
        APIRoute("/feedback", rate, methods=["PUT"]),
        APIRoute("/feedback", unrate, methods=["DELETE"]),
    ]


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


def add_middleware(middleware: Any, **options: Any) -> None:  # Starlette types it as a factory protocol
    """An ASGI middleware around Chainlit's whole app (REST, socket.io and the page)."""
    server.add_middleware(middleware, **options)


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


def shown_messages() -> Iterable[cl.Message]:
    """The messages this session's page shows."""
    return cast(Iterable[cl.Message], chat_context.get())


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


def assistant_name() -> str:
    """The assistant's name as the page shows it."""
    return str(config.ui.name)


def held_until_first_message(method: Method) -> Method:
    """A data-layer write that Chainlit holds back until the session's first message (a greeting makes no chat)."""
    return cast(Method, chainlit_queue_until_user_message()(method))  # type: ignore[no-untyped-call,unused-ignore]
