"""The Chainlit internals app/chainlit_seam.py relies on still exist in the installed Chainlit (no server needed).

Bumping Chainlit's pin: run this first; a failure names the internal that moved.
"""

from __future__ import annotations

import asyncio
import inspect
import tomllib
from importlib.metadata import version

import chainlit.server
import pytest
from chainlit.emitter import ChainlitEmitter
from chainlit.types import DeleteFeedbackRequest, Feedback, UpdateFeedbackRequest
from fastapi.routing import APIRoute
from starlette.middleware.cors import CORSMiddleware

from app import chainlit_seam as seam
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
def test_chainlit_serves_each_guarded_route_through_the_functions_the_guard_calls(path, method):
    endpoints = {
        route.endpoint
        for route in chainlit.server.router.routes
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ())
    }
    assert endpoints & {chainlit.server.update_feedback, chainlit.server.delete_feedback}
    # Ours are put first in the app's routes, so they must be matched in order.
    assert isinstance(chainlit.server.app.router.routes, list)


def test_the_feedback_functions_take_what_the_guard_passes():
    update = inspect.signature(chainlit.server.update_feedback).parameters
    delete = inspect.signature(chainlit.server.delete_feedback).parameters
    assert list(update) == ["request", "update", "current_user"]
    assert list(delete) == ["request", "payload", "current_user"]
    assert UpdateFeedbackRequest.model_fields["feedback"].annotation is Feedback
    assert "forId" in inspect.signature(Feedback).parameters
    assert "feedbackId" in DeleteFeedbackRequest.model_fields


def test_chainlit_has_its_cors_middleware_entry_to_replace():
    assert any(getattr(entry, "cls", None) is CORSMiddleware for entry in chainlit.server.app.user_middleware)


def test_a_websocket_session_has_every_attribute_the_app_uses():
    session = seam.WebsocketSession(
        id="contract", socket_id="contract-socket", emit=print, emit_call=print, user_env={}, client_type="webapp"
    )
    try:
        for name in ("id", "socket_id", "thread_id", "user", "language", "chat_settings", "has_first_interaction"):
            assert hasattr(session, name), name
        assert session.to_clear is False and session.current_task is None
        assert seam.WebsocketSession.get("contract-socket") is session
        assert inspect.iscoroutinefunction(session.delete)
    finally:
        asyncio.run(session.delete())


def test_the_emitter_sends_and_redraws_steps_and_marks_tasks():
    for name in ("send_step", "update_step"):  # they return the emit's awaitable
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
    assert isinstance(config.ui.name, str)
    assert seam.websocket_session() is None  # outside any context: no tab


def test_writes_are_held_until_the_first_message_by_chainlits_decorator():
    async def write(_self: object) -> None:
        return None

    held = seam.held_until_first_message(write)
    assert inspect.iscoroutinefunction(held) and held is not write
