"""Presets on the page: the list a chat starts from, and a user's own in the settings panel (save, rename, delete)."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import chainlit as cl
from chainlit.input_widget import InputWidget, Select, Switch, TextInput

from app.chat.preferences import Preferences
from app.chat.tab import Tab
from app.config import Settings
from app.documents.library import Library
from app.errors import ChatError, HistoryUnavailable, Problem
from app.i18n import error_text, text
from app.page import seam
from app.page.notices import show
from app.page.settings_panel import settings_panel
from app.presets.builtin import BUILT_IN, own_presets, preset_name, summary
from app.presets.store import Outcome, PresetStore

# The panel's widgets for presets (their values are requests, not settings of the chat).
SAVE, PICK, RENAME, DELETE = "preset_save", "preset_pick", "preset_rename", "preset_delete"
FIELDS = (SAVE, PICK, RENAME, DELETE)
# What becomes of a change to a user's presets: a change done says so (a key in app/i18n.py), one refused is an error.
DONE = {
    Outcome.SAVED: "preset_saved",
    Outcome.REPLACED: "preset_replaced",
    Outcome.RENAMED: "preset_renamed",
    Outcome.DELETED: "preset_deleted",
}
FAILURES = {
    Outcome.TOO_MANY: Problem.PRESETS_TOO_MANY,
    Outcome.NAME_TAKEN: Problem.PRESET_NAME_TAKEN,
    Outcome.NOT_FOUND: Problem.PRESET_MISSING,
}
MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def split_requests(changes: Any) -> tuple[Any, dict[str, Any]]:
    """The panel's values: the chat's settings, and what it asks of the user's presets."""
    if not isinstance(changes, dict):
        return changes, {}
    return {k: v for k, v in changes.items() if k not in FIELDS}, {k: v for k, v in changes.items() if k in FIELDS}


async def send_panel(chat: Tab, max_tokens_limit: int, store: PresetStore | None) -> None:
    """The settings panel with the chat's settings, and the fields for the user's presets."""
    names: list[str] = []
    if store is not None and chat.user is not None:
        with contextlib.suppress(HistoryUnavailable):  # logged by the store; the panel shows the settings
            names = [preset.name for preset in await store.list(chat.user)]
    panel = settings_panel(chat, max_tokens_limit)
    panel.inputs = [*panel.inputs, *preset_widgets(chat.lang, names)]
    await panel.send()
    seam.keep_chat_settings(chat.preferences.model_dump())  # the panel's preset fields are not the chat's


def preset_widgets(lang: str, names: list[str]) -> list[InputWidget]:
    """A name to save the settings under; with presets of one's own, one to rename or delete."""
    widgets: list[InputWidget] = [
        TextInput(id=SAVE, label=text(lang, "label_preset_save"), tooltip=text(lang, "tip_preset_save"), initial="")
    ]
    if names:
        widgets += [
            Select(id=PICK, label=text(lang, "label_preset_pick"), values=names, initial_index=0),
            TextInput(id=RENAME, label=text(lang, "label_preset_rename"), initial=""),
            Switch(id=DELETE, label=text(lang, "label_preset_delete"), initial=False),
        ]
    return widgets


async def act(chat: Tab, asked: dict[str, Any], store: PresetStore | None, library: Library | None) -> bool:
    """Do what the panel asks of the user's presets, saying how it went; False if it asked nothing."""
    save, new_name, picked = (typed(asked.get(field)) for field in (SAVE, RENAME, PICK))
    delete = asked.get(DELETE) is True
    if not (save or (picked and (delete or new_name))):
        return False
    try:
        if store is None or chat.user is None:
            raise ChatError(Problem.PRESETS_NEED_HISTORY)
        if save:
            name = preset_name(save)
            searched = await library.listed(chat.user, seam.thread_id()) if library is not None else []
            documents = [document.id for document in searched]  # a chat started with it searches them too
            project = chat.project.id if chat.project is not None else None  # a chat started with it is in it too
            saved = await store.save(chat.user, name, chat.preferences.model_dump(), documents, project)
            await report(chat, saved, name)
        if picked and delete:
            await report(chat, await store.delete(chat.user, picked), picked)
        elif picked and new_name:
            name = preset_name(new_name)
            outcome = await store.rename(chat.user, picked, name)
            await report(chat, outcome, picked if outcome is Outcome.NOT_FOUND else name)
    except ChatError as error:
        await show(cl.ErrorMessage(content=error_text(chat.lang, error)))
    except HistoryUnavailable:  # logged by the store
        await show(cl.ErrorMessage(content=text(chat.lang, "history_unavailable")))
    return True


async def report(chat: Tab, outcome: Outcome, name: str) -> None:
    """Say what became of a preset; ChatError for a change refused."""
    if outcome in FAILURES:
        raise ChatError(FAILURES[outcome], name=quoted(name))
    await show(cl.Message(content=text(chat.lang, DONE[outcome], name=quoted(name))))


def typed(value: Any) -> str:
    """A text field's value, trimmed ("" for anything but text: a client may send any JSON)."""
    return value.strip() if isinstance(value, str) else ""


def quoted(name: str) -> str:
    """A preset's name as literal text in a message rendered as Markdown."""
    return MARKDOWN.sub(r"\\\1", name)


async def chat_profiles(
    user: str | None, lang: str, settings: Settings, store: PresetStore | None, *, hidden: frozenset[str] = frozenset()
) -> list[cl.ChatProfile]:
    """The presets to pick from when a chat starts: the built-in ones the admins show, then the user's own."""
    defaults = Preferences.defaults(settings)
    shown = [preset for preset in BUILT_IN if preset.name not in hidden]
    profiles = [
        cl.ChatProfile(
            name=preset.name,
            display_name=text(lang, preset.label_key),
            markdown_description=text(lang, preset.about_key)
            + "\n\n"
            + summary(lang, preset.preferences(defaults, lang)),
            default=preset is shown[0],
        )
        for preset in shown
    ]
    for name, preferences in (await own_presets(user, settings, store)).items():
        about = text(lang, "preset_own_about") + "\n\n" + summary(lang, preferences)
        profiles.append(cl.ChatProfile(name=name, markdown_description=about))
    return profiles
