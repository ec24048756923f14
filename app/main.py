"""Chainlit's callbacks, each a few lines that hand over to the module doing the work."""

from __future__ import annotations

import gc
from typing import Any

import chainlit as cl
from chainlit.types import ThreadDict

from app.build import build
from app.chat.branches import placed
from app.chat.preferences import Preferences, apply_changes
from app.chat.tab import Tab
from app.chat.workers import stop_workers
from app.config import get_settings
from app.i18n import text
from app.page import library_page, lifecycle, organize, remember, seam, temporary
from app.page.answer_controls import FORK, SHOW_VERSION
from app.page.exports import send_export
from app.page.forks import fork
from app.page.greeting import greet
from app.page.lifecycle import resumed_chat
from app.page.notices import show
from app.page.sources import OPEN_SOURCE, open_source
from app.page.versions import draw_lines, switch_version
from app.presets import builtin as presets
from app.presets import panel as preset_fields
from app.web import share_links

APP = build(get_settings())


@cl.on_app_startup
async def on_app_startup() -> None:
    """Close ended logins' connections, take over stopped apps' writes, beat; tune the garbage collector."""
    if APP.sessions is not None:
        APP.sessions.start_sweeping()
    await APP.history.start()
    if APP.replicas is not None:
        APP.replicas.start()
    gc.collect()  # a full collection of start-up's objects paused every stream ~150 ms
    gc.freeze()
    # A young collection every 700 new objects (Python's default) moved each answer's objects, which live for its
    # seconds, to the oldest generation; its collections then paused every stream 25-90 ms every 2-3 s at 256
    # answers. Every 10 000 they mostly die young (docs/scaling.md).
    gc.set_threshold(10_000, 10, 10)


@cl.on_app_shutdown
async def on_app_shutdown() -> None:
    """Stop the answers (each keeps what it showed), commit or journal what waits; close the pool to vLLM; end the
    processes reading files."""
    await APP.history.close()
    await APP.backend.aclose()
    stop_workers()


@cl.set_chat_profiles
async def chat_profiles(user: cl.User | None, language: str | None = None) -> list[cl.ChatProfile]:
    """The presets to start a chat with: the built-in ones and the user's own."""
    lang, (settings, hidden) = APP.language(language), await APP.chat_defaults()
    return await preset_fields.chat_profiles(
        user.identifier if user else None, lang, settings, APP.preset_store, hidden=hidden
    )


@cl.on_chat_start
async def on_chat_start() -> None:
    """Set up the session with the preset picked, show the settings and greet (or say what we wait for)."""
    user, lang, profile = seam.tab_user(), APP.language(), cl.user_session.get("chat_profile")
    settings, hidden = await APP.chat_defaults()
    preferences = await presets.starting_preferences(profile, user, lang, settings, APP.preset_store, hidden=hidden)
    chat = Tab(preferences=preferences, lang=lang, user=user)
    lifecycle.arrive(chat)
    await preset_fields.send_panel(chat, APP.settings.max_tokens_limit, APP.preset_store)
    await library_page.offer(chat, APP.library)
    preset = await presets.starting_preset(profile, user, APP.preset_store)
    await library_page.start_with(chat, APP.library, preset.documents if preset is not None else [])
    project = preset.project_id if preset is not None else None
    await organize.start(chat, APP.projects, APP.history.team, APP.library, project)
    await greet(chat, APP.backend, APP.settings, admin=await APP.is_admin(user))


@cl.on_chat_resume
async def on_chat_resume(thread: ThreadDict) -> None:
    """A past chat opened from the sidebar: its versions, what the model sees next, that chat's own settings."""
    steps = await APP.history.every_version(thread)
    chat = resumed_chat(
        thread, steps, Preferences.defaults(APP.settings), APP.settings.max_tokens_limit, APP.language()
    )
    chat.user = seam.tab_user()
    lifecycle.arrive(chat)
    await preset_fields.send_panel(chat, APP.settings.max_tokens_limit, APP.preset_store)
    await organize.resume(chat, APP.projects)
    await library_page.resume(chat, APP.library)


@seam.instead_of_chainlit("chat_settings_change")
async def on_settings_change(changes: Any) -> dict[str, list[str]]:
    """Validate and apply settings (rejected ones keep their last good value); save, rename or delete a preset."""
    chat = lifecycle.current()
    if chat is None:  # before on_chat_start ran: there is nothing to apply them to yet
        return {"rejected": ["the chat has not started yet"]}
    changes, asked = preset_fields.split_requests(changes)
    chat.preferences, rejected = apply_changes(chat.preferences, changes, APP.settings.max_tokens_limit)
    seam.keep_chat_settings(chat.preferences.model_dump())
    await APP.history.save_preferences(chat.preferences.model_dump())
    if rejected:
        await cl.ErrorMessage(content=text(chat.lang, "settings_rejected", problems="; ".join(rejected))).send()
    if await preset_fields.act(chat, asked, APP.preset_store, APP.library) or rejected:
        await preset_fields.send_panel(chat, APP.settings.max_tokens_limit, APP.preset_store)
    return {"rejected": rejected}


@cl.on_message
async def on_message(message: cl.Message) -> None:
    """Answer a message typed in the composer, at the end of the branch shown."""
    if (chat := lifecycle.current()) is None:
        return
    if message.command == library_page.DOCUMENTS_COMMAND:
        await APP.pipeline.aside(message)
        await library_page.show_library(chat, APP.library)
        return
    await organize.first_question(chat, APP.history)
    if await remember.offered(chat, message.content, APP.memories):  # for the user's memory, not for the model
        await APP.pipeline.aside(message)
        return
    await APP.pipeline.ask(chat, message, chat.branches.leaf())


@seam.instead_of_chainlit("edit_message")
async def on_edit(payload: Any) -> None:
    """An edited question (the pencil): a new version of it, answered; the old one keeps what followed it."""
    message = payload.get("message") if isinstance(payload, dict) else None
    chat = lifecycle.current()
    if chat is None or not isinstance(message, dict) or not isinstance(message.get("output"), str):
        return
    question_id, edited = str(message.get("id")), message["output"]
    if not await APP.pipeline.told_busy(chat):
        APP.pipeline.in_background(chat, lambda: APP.pipeline.edit(chat, question_id, edited))


@cl.action_callback("starter")
async def on_starter(action: cl.Action) -> None:
    """An example prompt under the greeting: send it as the user's message."""
    chat = lifecycle.current()
    if chat is None or await APP.pipeline.told_busy(chat):
        return
    prompt, parent = str(action.payload.get("prompt", "")), chat.branches.leaf()
    if prompt.strip() and not chat.branches.steps:  # the chat's first message: Chainlit names it "starter"
        APP.history.name_chat(prompt)
    message = cl.Message(content=prompt, author="User", type="user_message", metadata=placed(parent))
    await message.send()
    APP.pipeline.in_background(chat, lambda: APP.pipeline.ask(chat, message, parent))


@cl.action_callback("regenerate")
async def on_regenerate(_action: cl.Action) -> None:
    """Answer the newest question shown again: a new version of its answer."""
    chat = lifecycle.current()
    if chat is not None and not await APP.pipeline.told_busy(chat):
        APP.pipeline.in_background(chat, lambda: APP.pipeline.regenerate(chat))


@cl.action_callback(SHOW_VERSION)
async def on_show_version(action: cl.Action) -> None:
    """The previous or next version button by a message: show that version of it, with what followed it."""
    chat = lifecycle.current()
    if chat is not None and not await APP.pipeline.told_busy(chat):
        await switch_version(chat, str(action.payload.get("id")), APP.history)


@cl.action_callback(FORK)
async def on_fork(action: cl.Action) -> None:
    """Continue in a new chat by a message: the branch up to it, copied into a new chat."""
    if (chat := lifecycle.current()) is not None:
        await fork(chat, str(action.payload.get("id")), APP.history)


@cl.on_shared_thread_view
async def on_shared_thread_view(thread: ThreadDict, viewer: cl.User | None) -> bool:
    """A shared chat's link opened: shown only while its owner shares it, with nothing private in it."""
    return share_links.may_view(thread, viewer, anyone=APP.settings.share_links == "anyone")


@cl.action_callback(OPEN_SOURCE)
async def on_open_source(action: cl.Action) -> None:
    """A source under an answer: its passage in the side view."""
    if (chat := lifecycle.current()) is not None:
        await open_source(chat, APP.library, action.payload)


@cl.action_callback(library_page.USE)
async def on_use_document(action: cl.Action) -> None:
    """A listed document: searched by this chat from now on."""
    if (chat := lifecycle.current()) is not None:
        await library_page.act(chat, APP.library, library_page.USE, action.payload)


@cl.action_callback(library_page.RENAME)
async def on_rename_document(action: cl.Action) -> None:
    """A listed document given the name typed in its place."""
    if (chat := lifecycle.current()) is not None:
        await library_page.act(chat, APP.library, library_page.RENAME, action.payload)


@cl.action_callback(library_page.DELETE)
async def on_delete_document(action: cl.Action) -> None:
    """A listed document deleted, with its passages."""
    if (chat := lifecycle.current()) is not None:
        await library_page.act(chat, APP.library, library_page.DELETE, action.payload)


@cl.action_callback(remember.KEEP)
async def on_remember(action: cl.Action) -> None:
    """Remember, under a "remember …" message: the fact kept in the user's memory."""
    if (chat := lifecycle.current()) is not None:
        await remember.answered(chat, APP.memories, action)


@cl.action_callback(remember.DROP)
async def on_dont_remember(action: cl.Action) -> None:
    """Don't, under a "remember …" message: nothing kept."""
    if (chat := lifecycle.current()) is not None:
        await remember.answered(chat, APP.memories, action)


@cl.action_callback(temporary.KEEP)
async def on_keep_chat(_action: cl.Action) -> None:
    """Keep this chat: a temporary chat written as it stands, and kept from now on."""
    if (chat := lifecycle.current()) is not None:
        await APP.history.keep_now(chat)
        await show(cl.Message(content=text(chat.lang, "temporary_kept")))


@cl.action_callback("export_markdown")
async def on_export_markdown(_action: cl.Action) -> None:
    """This chat as a Markdown file to download."""
    if (chat := lifecycle.current()) is not None:
        await send_export(chat, APP.history, "Markdown", APP.library)


@cl.action_callback("export_json")
async def on_export_json(_action: cl.Action) -> None:
    """This chat as a JSON file to download."""
    if (chat := lifecycle.current()) is not None:
        await send_export(chat, APP.history, "JSON", APP.library)


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
        await draw_lines(chat, chat.branches.path(), kept=APP.history.kept)


@seam.after_chainlit("clear_session")
async def on_new_chat() -> None:
    """The new chat button: stop the old chat's work now (its disconnect may be handled first)."""
    if (chat := lifecycle.current()) is not None:
        chat.cancel_tasks()


@cl.on_chat_end
async def on_chat_end() -> None:
    """A new chat or a closed tab stops the session's work; with a grace period, a lost connection may come back."""
    if (chat := lifecycle.current()) is not None:
        lifecycle.depart(chat, APP.settings.reconnect_grace_seconds)
        APP.history.temporaries.forget(seam.thread_id())
