"""The greeting with example prompts, or a notice while vLLM is not up, turned into the greeting when it is."""

from __future__ import annotations

import asyncio

import chainlit as cl

from app.chat.backend import Backend
from app.chat.tab import Tab
from app.config import Settings
from app.errors import ChatError
from app.i18n import STARTERS, text
from app.page.notices import show


def greeting(settings: Settings, chat: Tab, model: str) -> str:
    """The configured greeting, or the built-in one."""
    custom = settings.greeting_zh if chat.lang == "zh" else settings.greeting_en
    return (custom or text(chat.lang, "greeting", model="{model}")).replace("{model}", model)


def plain(name: str) -> str:
    """A name the person chose, shown as text in Markdown (its markup characters escaped)."""
    return "".join("\\" + char if char in "\\`*_{}[]()#+-.!<>|~" else char for char in name)


def starter_actions(chat: Tab) -> list[cl.Action]:
    """Example prompts as buttons under the greeting (Chainlit hides its own starters once a message exists)."""
    return [
        cl.Action(name="starter", payload={"prompt": prompt}, label=label, icon=icon)
        for label, prompt, icon in STARTERS[chat.lang]
    ]


async def greet(chat: Tab, backend: Backend, settings: Settings, *, admin: bool = False) -> None:
    """Greet with the model's name (and a link to the admin page for an admin), or say what we wait for and greet
    once vLLM serves."""
    try:
        model = await backend.model()
    except ChatError:
        waiting_for = settings.model_name or settings.model
        notice = cl.Message(content=text(chat.lang, "not_ready", server=backend.server, what=waiting_for))
        await show(notice)
        chat.readiness = asyncio.create_task(watch_readiness(chat, notice, backend, settings))
        return
    content = greeting(settings, chat, model.name) + ("\n\n" + text(chat.lang, "admin_link") if admin else "")
    if chat.project is not None:  # a chat started in a project: its instructions and documents apply
        content = text(chat.lang, "in_project", name=plain(chat.project.name)) + "\n\n" + content
    await show(cl.Message(content=content, actions=starter_actions(chat)))


async def watch_readiness(chat: Tab, notice: cl.Message, backend: Backend, settings: Settings) -> None:
    """Poll vLLM until it serves a model, then turn the waiting notice into a greeting."""
    while True:
        await asyncio.sleep(settings.readiness_poll_seconds)
        try:
            model = await backend.model()
        except ChatError:
            continue
        notice.content = text(chat.lang, "ready", model=model.name) + "\n\n" + greeting(settings, chat, model.name)
        notice.actions = starter_actions(chat)
        await show(notice, redraw=True)
        return
