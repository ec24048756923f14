"""Chainlit's callbacks, each a few lines that hand over to the module doing the work."""

from __future__ import annotations

import gc
import logging
from typing import Any

import chainlit as cl
from chainlit.types import ThreadDict

from app import chainlit_seam as seam
from app import guards, lifecycle, metrics, origins, presets, readiness, sharing, uploads
from app.answering import Answering
from app.backend import Backend
from app.config import get_settings
from app.history.presets import PresetStore
from app.history.service import fair_shares, start
from app.history.transcript import placed, resumed_chat
from app.i18n import language_of, text
from app.pipeline import Pipeline
from app.preferences import Preferences, apply_changes
from app.session import ChatSession
from app.ui import presets as preset_fields
from app.ui.answer_controls import FORK, SHOW_VERSION
from app.ui.exports import send_export
from app.ui.forks import fork
from app.ui.greeting import greet
from app.ui.versions import draw_lines, switch_version
from app.web.protection import protect

settings = get_settings()
seam.own_files_directory()
seam.no_blocking_sleeps()
backend = Backend(settings)
answering = Answering()
history = start(settings, lambda: text(session_language(), "history_unavailable"), answering)
guards.install(history.store)
sharing.install(settings)
uploads.install(settings)
readiness.install(backend, history.store)
# Each middleware goes around those before it: the Host and Origin checks first, then the body limit.
protect(settings)
origins.lock(settings.origins, settings.hosts)
shares = fair_shares(settings, history)
pipeline = Pipeline(backend, settings.stream_interval_ms / 1000, history, shares, uploads.limits(settings), answering)
metrics.serve("127.0.0.1", settings.metrics_port)
preset_store = PresetStore(history.store.writer) if history.store is not None else None
if history.store is None:
    seam.turn_off_favourites()  # favourite prompts are kept in the history
# One INFO line per HTTP request to vLLM drowns the log; failures are still logged.
logging.getLogger("httpx2").setLevel(logging.WARNING)


def session_language() -> str:
    """'zh' or 'en': the setting, else the browser's."""
    return language_of(settings.language or seam.browser_language())


@cl.on_app_startup
async def on_app_startup() -> None:
    """Close connections of ended logins from now on; leave what start-up built out of garbage collection."""
    if history.sessions is not None:
        history.sessions.start_sweeping()
    gc.collect()  # a full collection of start-up's objects paused every stream ~150 ms
    gc.freeze()


@cl.on_app_shutdown
async def close_backend() -> None:
    """Close the connection pool to vLLM."""
    await backend.aclose()


@cl.set_chat_profiles
async def chat_profiles(user: cl.User | None, language: str | None = None) -> list[cl.ChatProfile]:
    """The presets to start a chat with: the built-in ones and the user's own."""
    lang = language_of(settings.language or language)
    return await presets.chat_profiles(user.identifier if user else None, lang, settings, preset_store)


@cl.on_chat_start
async def on_chat_start() -> None:
    """Set up the session with the preset picked, show the settings and greet (or say what we wait for)."""
    user, lang, profile = seam.tab_user(), session_language(), cl.user_session.get("chat_profile")
    preferences = await presets.starting_preferences(profile, user, lang, settings, preset_store)
    chat = ChatSession(preferences=preferences, lang=lang, user=user)
    lifecycle.arrive(chat)
    await preset_fields.send_panel(chat, settings.max_tokens_limit, preset_store)
    await greet(chat, backend, settings)


@cl.on_chat_resume
async def on_chat_resume(thread: ThreadDict) -> None:
    """A past chat opened from the sidebar: its versions, what the model sees next, that chat's own settings."""
    steps = await history.every_version(thread)
    chat = resumed_chat(thread, steps, Preferences.defaults(settings), settings.max_tokens_limit, session_language())
    chat.user = seam.tab_user()
    lifecycle.arrive(chat)
    await preset_fields.send_panel(chat, settings.max_tokens_limit, preset_store)


@seam.instead_of_chainlit("chat_settings_change")
async def on_settings_change(changes: Any) -> dict[str, list[str]]:
    """Validate and apply settings (rejected ones keep their last good value); save, rename or delete a preset."""
    chat = lifecycle.current()
    if chat is None:  # before on_chat_start ran: there is nothing to apply them to yet
        return {"rejected": ["the chat has not started yet"]}
    changes, asked = preset_fields.split_requests(changes)
    chat.preferences, rejected = apply_changes(chat.preferences, changes, settings.max_tokens_limit)
    seam.keep_chat_settings(chat.preferences.model_dump())
    await history.save_preferences(chat.preferences.model_dump())
    if rejected:
        await cl.ErrorMessage(content=text(chat.lang, "settings_rejected", problems="; ".join(rejected))).send()
    if await preset_fields.act(chat, asked, preset_store) or rejected:
        await preset_fields.send_panel(chat, settings.max_tokens_limit, preset_store)
    return {"rejected": rejected}


@cl.on_message
async def on_message(message: cl.Message) -> None:
    """Answer a message typed in the composer, at the end of the branch shown."""
    if (chat := lifecycle.current()) is not None:
        await pipeline.ask(chat, message, chat.branches.leaf())


@seam.instead_of_chainlit("edit_message")
async def on_edit(payload: Any) -> None:
    """An edited question (the pencil): a new version of it, answered; the old one keeps what followed it."""
    message = payload.get("message") if isinstance(payload, dict) else None
    chat = lifecycle.current()
    if chat is None or not isinstance(message, dict) or not isinstance(message.get("output"), str):
        return
    question_id, edited = str(message.get("id")), message["output"]
    if not await pipeline.refused_while_busy(chat):
        pipeline.in_background(chat, lambda: pipeline.edit(chat, question_id, edited))


@cl.action_callback("starter")
async def on_starter(action: cl.Action) -> None:
    """An example prompt under the greeting: send it as the user's message."""
    chat = lifecycle.current()
    if chat is None or await pipeline.refused_while_busy(chat):
        return
    prompt, parent = str(action.payload.get("prompt", "")), chat.branches.leaf()
    if prompt.strip() and not chat.branches.steps:  # the chat's first message: Chainlit names it "starter"
        history.name_chat(prompt)
    message = cl.Message(content=prompt, author="User", type="user_message", metadata=placed(parent))
    await message.send()
    pipeline.in_background(chat, lambda: pipeline.ask(chat, message, parent))


@cl.action_callback("regenerate")
async def on_regenerate(_action: cl.Action) -> None:
    """Answer the newest question shown again: a new version of its answer."""
    chat = lifecycle.current()
    if chat is not None and not await pipeline.refused_while_busy(chat):
        pipeline.in_background(chat, lambda: pipeline.regenerate(chat))


@cl.action_callback(SHOW_VERSION)
async def on_show_version(action: cl.Action) -> None:
    """The previous or next version button by a message: show that version of it, with what followed it."""
    chat = lifecycle.current()
    if chat is not None and not await pipeline.refused_while_busy(chat):
        await switch_version(chat, str(action.payload.get("id")), history)


@cl.action_callback(FORK)
async def on_fork(action: cl.Action) -> None:
    """Continue in a new chat by a message: the branch up to it, copied into a new chat."""
    if (chat := lifecycle.current()) is not None:
        await fork(chat, str(action.payload.get("id")), history)


@cl.on_shared_thread_view
async def on_shared_thread_view(thread: ThreadDict, viewer: cl.User | None) -> bool:
    """A shared chat's link opened: shown only while its owner shares it, with nothing private in it."""
    return sharing.may_view(thread, viewer, anyone=settings.share_links == "anyone")


@cl.action_callback("export_markdown")
async def on_export_markdown(_action: cl.Action) -> None:
    """This chat as a Markdown file to download."""
    if (chat := lifecycle.current()) is not None:
        await send_export(chat, history, "Markdown")


@cl.action_callback("export_json")
async def on_export_json(_action: cl.Action) -> None:
    """This chat as a JSON file to download."""
    if (chat := lifecycle.current()) is not None:
        await send_export(chat, history, "JSON")


@cl.on_stop
async def on_stop() -> None:
    """The stop button: end the answer being streamed (closing its request in vLLM)."""
    if (chat := lifecycle.current()) is not None:
        lifecycle.stop_answer(chat)


@seam.after_chainlit("connection_successful")
async def on_connection_successful() -> None:
    """The stop button again if an answer kept streaming across a reconnect; a resumed chat's answer controls."""
    chat = lifecycle.current()
    if chat is not None and chat.generating:  # Chainlit's handler just told the page no task runs
        await seam.task_started()
    if chat is not None and chat.resumed:  # only now: the page replaces its messages with the thread's
        chat.resumed = False
        await draw_lines(chat, chat.branches.path(), history=history.store is not None)


@seam.after_chainlit("clear_session")
async def on_new_chat() -> None:
    """The new chat button: stop the old chat's work now (its disconnect may be handled first)."""
    if (chat := lifecycle.current()) is not None:
        chat.cancel_tasks()


@cl.on_chat_end
async def on_chat_end() -> None:
    """A new chat or a closed tab stops the session's work; with a grace period, a lost connection may come back."""
    if (chat := lifecycle.current()) is not None:
        lifecycle.depart(chat, settings.reconnect_grace_seconds)
