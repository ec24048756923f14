"""Chainlit handlers: greet, answer with a streamed reply, apply settings, stop."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gc
import json
import logging
import time
from typing import Any

import chainlit as cl
from chainlit.chat_context import chat_context
from chainlit.config import config
from chainlit.context import init_ws_context
from chainlit.input_widget import Slider, TextInput
from chainlit.server import app as server
from chainlit.server import sio
from chainlit.session import WebsocketSession
from chainlit.types import ThreadDict

from app.backend import Backend, Sampling
from app.coalesce import Coalescer
from app.config import get_settings
from app.conversation import Ending, Turn, plan_request
from app.errors import ChatError, Problem
from app.history import start
from app.i18n import STARTERS, error_text, language_of, text
from app.origins import lock
from app.preferences import Preferences, apply_changes
from app.session import ChatSession
from app.stats import AnswerStats
from app.store import HistoryUnavailable
from app.transcript import (
    NOT_SENT,
    Answer,
    conversation_of,
    export_json,
    export_markdown,
    last_answer_id,
    preferences_of,
    stats_of,
)

settings = get_settings()
backend = Backend(settings)
lock(server, sio, settings.origins, settings.hosts)
history = start(settings, server, lambda: text(session_language(), "history_unavailable"), backend.starting)
# One INFO line per HTTP request to vLLM drowns the log; failures are still logged.
logging.getLogger("httpx2").setLevel(logging.WARNING)
# The export buttons in each answer's stats line: the names of their action callbacks below.
EXPORTS = ("export_markdown", "export_json")


def session_language() -> str:
    """'zh' or 'en': the setting, else the browser's."""
    session = cl.context.session
    return language_of(settings.language or (session.language if isinstance(session, WebsocketSession) else None))


def current() -> ChatSession | None:
    """This session's state (None before on_chat_start, e.g. for a client that skipped it)."""
    chat = cl.user_session.get("chat")
    return chat if isinstance(chat, ChatSession) else None


@cl.on_app_startup
def freeze_startup_objects() -> None:
    """Leave what start-up built out of garbage collection: a full collection of it paused every stream ~150 ms."""
    gc.collect()
    gc.freeze()


@cl.on_app_shutdown
async def close_backend() -> None:
    """Close the connection pool to vLLM."""
    await backend.aclose()


def settings_panel(chat: ChatSession) -> cl.ChatSettings:
    """The settings widgets, showing the session's current preferences."""
    prefs, lang = chat.preferences, chat.lang

    def slider(key: str, low: float, high: float, step: float) -> Slider:
        return Slider(
            id=key,
            label=text(lang, f"label_{key}"),
            tooltip=text(lang, f"tip_{key}"),
            initial=getattr(prefs, key),
            min=low,
            max=high,
            step=step,
        )

    return cl.ChatSettings(
        [
            slider("temperature", 0.0, 2.0, 0.05),
            slider("top_p", 0.05, 1.0, 0.05),
            slider("max_tokens", 16, settings.max_tokens_limit, 16),
            slider("repetition_penalty", 1.0, 2.0, 0.05),
            TextInput(
                id="system_prompt",
                label=text(lang, "label_system_prompt"),
                tooltip=text(lang, "tip_system_prompt"),
                initial=prefs.system_prompt,
                multiline=True,
            ),
        ]
    )


async def say_error(chat: ChatSession, error: ChatError, record: Answer | None = None) -> None:
    """Show an error in the session's language; `record`: the turn it ends, kept with it in the history."""
    message = cl.ErrorMessage(content=error_text(chat.lang, error))
    if record is not None:
        message.metadata = record.as_metadata()
    await message.send()


def greeting(chat: ChatSession, model: str) -> str:
    """The configured greeting, or the built-in one."""
    custom = settings.greeting_zh if chat.lang == "zh" else settings.greeting_en
    return (custom or text(chat.lang, "greeting", model="{model}")).replace("{model}", model)


async def watch_readiness(chat: ChatSession, notice: cl.Message) -> None:
    """Poll vLLM until it serves a model, then turn the waiting notice into a greeting."""
    while True:
        await asyncio.sleep(settings.readiness_poll_seconds)
        try:
            model = await backend.model()
        except ChatError:
            continue
        notice.content = text(chat.lang, "ready", model=model.name) + "\n\n" + greeting(chat, model.name)
        notice.actions = starter_actions(chat)
        await show(notice, redraw=True)
        return


async def show(message: cl.Message | cl.ErrorMessage, *, redraw: bool = False) -> None:
    """Send (or redraw) a message that is not part of the conversation, so the history does not keep it.

    A greeting, a notice or an export stored with every chat would cost writes on every first message.
    """
    step = message.to_dict()
    await (cl.context.emitter.update_step(step) if redraw else cl.context.emitter.send_step(step))
    for action in getattr(message, "actions", []):  # an ErrorMessage has none
        await action.send(for_id=message.id)


@cl.on_chat_start
async def on_chat_start() -> None:
    """Set up the session, show the settings and greet (or say what we wait for)."""
    lang = session_language()
    chat = ChatSession(preferences=Preferences.defaults(settings), lang=lang)
    cl.user_session.set("chat", chat)
    await settings_panel(chat).send()
    try:
        model = await backend.model()
    except ChatError:
        waiting_for = settings.model_name or settings.model
        notice = cl.Message(content=text(lang, "not_ready", server=backend.server, what=waiting_for))
        await show(notice)
        chat.readiness = asyncio.create_task(watch_readiness(chat, notice))
        return
    await show(cl.Message(content=greeting(chat, model.name), actions=starter_actions(chat)))


@cl.on_chat_resume
async def on_chat_resume(thread: ThreadDict) -> None:
    """A past chat opened from the sidebar: what the model sees next, and that chat's own settings."""
    defaults = Preferences.defaults(settings)
    chat = ChatSession(
        preferences=preferences_of(thread.get("metadata"), defaults, settings.max_tokens_limit),
        lang=session_language(),
        conversation=conversation_of(thread["steps"]),
        resumed_answer=last_answer_id(thread["steps"]),
        resumed_stats=stats_of(thread["steps"]),
    )
    cl.user_session.set("chat", chat)
    await settings_panel(chat).send()


def starter_actions(chat: ChatSession) -> list[cl.Action]:
    """Example prompts as buttons under the greeting (Chainlit hides its own starters once a message exists)."""
    return [
        cl.Action(name="starter", payload={"prompt": prompt}, label=label, icon=icon)
        for label, prompt, icon in STARTERS[chat.lang]
    ]


@sio.on("chat_settings_change")
async def on_settings_change(sid: str, changes: Any) -> dict[str, list[str]]:
    """Validate and apply settings; rejected ones keep their last good value.

    Replaces Chainlit's handler, which fails on anything but a mapping and brackets the change with
    task events that hide the stop button of an answer started right after.
    """
    init_ws_context(sid)
    chat = current()
    if chat is None:  # before on_chat_start ran: there is nothing to apply them to yet
        return {"rejected": ["the chat has not started yet"]}
    chat.preferences, rejected = apply_changes(chat.preferences, changes, settings.max_tokens_limit)
    cl.context.session.chat_settings = chat.preferences.model_dump()
    await history.save_preferences(chat.preferences.model_dump())
    if rejected:
        await cl.ErrorMessage(content=text(chat.lang, "settings_rejected", problems="; ".join(rejected))).send()
        await settings_panel(chat).send()
    return {"rejected": rejected}


@cl.on_message
async def on_message(message: cl.Message) -> None:
    """Answer a message typed (or edited) in the composer."""
    chat = current()
    if chat is not None:
        await take_turn(chat, message.content, message.id)


async def refused_while_busy(chat: ChatSession) -> bool:
    """Tell the user an answer is still streaming; True if so."""
    if chat.generating:
        await say_error(chat, ChatError(Problem.BUSY))
    return chat.generating


async def take_turn(chat: ChatSession, user_text: str, message_id: str) -> None:
    """Answer one user message; one answer at a time per session."""
    if await refused_while_busy(chat):
        return
    chat.conversation.truncate_at(message_id)  # an edited or regenerated turn replaces what followed
    chat.generation = asyncio.current_task()
    try:
        await answer(chat, user_text, message_id)
    finally:
        chat.generation = None


def take_turn_in_background(chat: ChatSession, user_text: str, message_id: str) -> None:
    """Run a turn as Chainlit's current task (so the stop button shows), outside the action's request."""

    async def run() -> None:
        await cl.context.emitter.task_start()
        try:
            await take_turn(chat, user_text, message_id)
        finally:
            await cl.context.emitter.task_end()

    cl.context.session.current_task = asyncio.create_task(run())


@cl.action_callback("starter")
async def on_starter(action: cl.Action) -> None:
    """An example prompt under the greeting: send it as the user's message."""
    chat = current()
    if chat is None or await refused_while_busy(chat):
        return
    prompt = str(action.payload.get("prompt", ""))
    if prompt.strip() and not chat.conversation.turns:  # the chat's first message: Chainlit names it "starter"
        history.name_chat(prompt)
    message = await cl.Message(content=prompt, author="User", type="user_message").send()
    take_turn_in_background(chat, prompt, message.id)


@cl.action_callback("regenerate")
async def on_regenerate(action: cl.Action) -> None:
    """Answer the last user message again, replacing the last answer."""
    chat = current()
    if chat is None or await refused_while_busy(chat) or not chat.conversation.turns:
        return
    last = chat.conversation.turns[-1]
    if chat.regenerate is not None and (answer_id := chat.regenerate.forId) is not None:
        shown = [message for message in chat_context.get() if message.id == answer_id]
        for message in shown or [cl.Message(content="", id=answer_id)]:  # none: a resumed answer
            await message.remove()  # its button goes with it
        chat.regenerate = None
    take_turn_in_background(chat, last.user, last.message_id)


async def answer(chat: ChatSession, user_text: str, message_id: str) -> None:
    """Fit the conversation into the window, stream the reply, and record the turn."""
    if not user_text.strip():
        await say_error(chat, ChatError(Problem.EMPTY_MESSAGE))
        return
    prefs = chat.preferences
    try:
        model = await backend.model()
        plan = await plan_request(
            chat.conversation,
            system_prompt=prefs.system_prompt,
            user_text=user_text,
            max_tokens=prefs.max_tokens,
            window=model.max_model_len,
            count=backend.count_prompt_tokens,
            bound=backend.prompt_bound,
        )
    except ChatError as error:
        sent = error.problem is not Problem.MESSAGE_TOO_LONG
        if sent:
            chat.conversation.add(Turn(user_text, "", Ending.FAILED, message_id))
        await say_error(chat, error, Answer(message_id, Ending.FAILED if sent else NOT_SENT))
        return

    sampling = Sampling(
        temperature=prefs.temperature,
        top_p=prefs.top_p,
        max_tokens=plan.max_tokens,
        repetition_penalty=prefs.repetition_penalty,
    )
    reply = cl.Message(content="")
    ending, failure, tokens = Ending.COMPLETE, None, None
    batcher = Coalescer(reply.stream_token, settings.stream_interval_ms / 1000)
    started = first_token_at = time.perf_counter()
    got_token = False
    try:
        async with backend.stream_chat(plan.messages, sampling) as stream:
            async for delta in stream:
                if not got_token:
                    got_token, first_token_at = True, time.perf_counter()
                await batcher.add(delta)
                tokens = stream.completion_tokens
            tokens = stream.completion_tokens
    except asyncio.CancelledError:
        ending = Ending.STOPPED
    except ChatError as error:
        ending, failure = Ending.FAILED, error
    await batcher.flush()
    finished = time.perf_counter()

    chat.conversation.add(Turn(user_text, reply.content, ending, message_id))
    stats = AnswerStats(
        ttft_s=first_token_at - started if got_token else None,
        tokens=tokens,
        decode_s=finished - first_token_at,
        dropped_turns=plan.dropped_turns,
        window=model.max_model_len,
        stopped=ending is Ending.STOPPED,
    )
    record = Answer(message_id, ending, model.name, dataclasses.asdict(stats))
    if reply.content or failure is None:
        reply.metadata = record.as_metadata()
        await reply.send()
        await show_stats(chat, reply.id, stats)
        await offer_regenerate(chat, reply.id)
    if failure is not None:
        await say_error(chat, failure, None if reply.content else record)


async def show_stats(chat: ChatSession, answer_id: str, stats: AnswerStats) -> None:
    """The small line under an answer (public/elements/AnswerStats.jsx), drawn from the answer's stored stats.

    Not stored itself: a resumed chat draws it again from the answer's metadata, one write less per answer.
    With history on it carries the export buttons: part of a line sent anyway, not two more messages per answer.
    """
    exports = [{"name": name, "label": text(chat.lang, name)} for name in EXPORTS] if history.store is not None else []
    props = {"text": stats.describe(chat.lang), "exports": exports}
    # With a URL, Chainlit sends the element as is instead of writing its props to a file per answer.
    url = "data:application/json;base64," + base64.b64encode(json.dumps(props).encode()).decode()
    element = cl.CustomElement(name="AnswerStats", props=props, display="inline", url=url)
    await element.send(for_id=answer_id, persist=False)


async def offer_regenerate(chat: ChatSession, answer_id: str) -> None:
    """The regenerate button, on the newest answer only."""
    if chat.regenerate is not None:
        await chat.regenerate.remove()
    label = text(chat.lang, "regenerate")
    chat.regenerate = cl.Action(name="regenerate", payload={}, label=label, icon="refresh-cw", tooltip=label)
    await chat.regenerate.send(for_id=answer_id)


@cl.action_callback("export_markdown")
async def on_export_markdown(_action: cl.Action) -> None:
    """This chat as a Markdown file to download."""
    await send_export("Markdown")


@cl.action_callback("export_json")
async def on_export_json(_action: cl.Action) -> None:
    """This chat as a JSON file to download."""
    await send_export("JSON")


async def send_export(kind: str) -> None:
    """Offer the stored chat as a file, in a message that is itself not kept."""
    chat = current()
    if chat is None:
        return
    try:
        thread = await history.thread()
    except HistoryUnavailable:
        await show(cl.ErrorMessage(content=text(chat.lang, "history_unavailable")))
        return
    if thread is None:
        await show(cl.Message(content=text(chat.lang, "export_empty")))
        return
    if kind == "JSON":
        name, content, mime = "chat.json", export_json(thread, chat.preferences), "application/json"
    else:
        names = {"user": text(chat.lang, "you"), "assistant": config.ui.name}
        name, content, mime = "chat.md", export_markdown(thread, chat.preferences, names), "text/markdown"
    message = cl.Message(content=text(chat.lang, "export_ready", kind=kind))
    await show(message)
    file = cl.File(name=name, content=content.encode(), mime=mime, display="inline")
    await file.send(for_id=message.id, persist=False)


@cl.on_stop
async def on_stop() -> None:
    """The stop button: end the answer being streamed (closing its request in vLLM)."""
    chat = current()
    # Chainlit cancels its current task itself; a refused message may have replaced it.
    generation = chat.generation if chat is not None else None
    if generation is not None and not generation.done() and generation is not cl.context.session.current_task:
        generation.cancel()


chainlit_connection_successful = sio.handlers["/"]["connection_successful"]


@sio.on("connection_successful")
async def on_connection_successful(sid: str) -> None:
    """Chainlit's handler, then the stop button again if an answer kept streaming across a reconnect."""
    await chainlit_connection_successful(sid)
    context = init_ws_context(sid)
    chat = current()
    if chat is not None and chat.generating:  # Chainlit's handler just told the page no task runs
        await context.emitter.task_start()
    if chat is not None and chat.resumed_answer is not None:
        # Only now: the page replaces its messages with the thread's after on_chat_resume.
        for answer_id, stats in chat.resumed_stats.items():
            await show_stats(chat, answer_id, stats)
        await offer_regenerate(chat, chat.resumed_answer)
        chat.resumed_answer, chat.resumed_stats = None, {}


chainlit_clear_session = sio.handlers["/"]["clear_session"]


@sio.on("clear_session")
async def on_new_chat(sid: str) -> None:
    """The new chat button: stop the old chat's work now (its disconnect may be handled first)."""
    await chainlit_clear_session(sid)
    if WebsocketSession.get(sid) is None:  # no such session (never started, or already deleted)
        return
    init_ws_context(sid)
    chat = current()
    if chat is not None:
        chat.cancel_tasks()


departures: set[asyncio.Task[None]] = set()


@cl.on_chat_end
async def on_chat_end() -> None:
    """A new chat or a closed tab stops the session's work; with a grace period, a lost connection may come back."""
    chat = current()
    if chat is None:
        return
    session = cl.context.session
    if not isinstance(session, WebsocketSession) or session.to_clear or not settings.reconnect_grace_seconds:
        chat.cancel_tasks()
        return
    # A closed tab and a network blip look alike here (even an explicit disconnect arrives as a
    # closed transport); after a blip the page reconnects within about a second.
    waiting = asyncio.create_task(cancel_unless_reconnected(chat, session))
    departures.add(waiting)  # the loop keeps only weak references to tasks
    waiting.add_done_callback(departures.discard)


async def cancel_unless_reconnected(chat: ChatSession, session: WebsocketSession) -> None:
    """Stop the session's work if no connection took it over within the grace period."""
    await asyncio.sleep(settings.reconnect_grace_seconds)
    if not sio.manager.is_connected(session.socket_id, "/"):
        chat.cancel_tasks()
