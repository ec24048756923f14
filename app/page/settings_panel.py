"""The settings panel (the sliders icon by the message box), showing a session's preferences."""

from __future__ import annotations

import chainlit as cl
from chainlit.input_widget import Slider, TextInput

from app.chat.tab import Tab
from app.i18n import text


def label_key(setting: str) -> str:
    """The key in app/i18n.py of a setting's label (each field of Preferences has one)."""
    return f"label_{setting}"


def tip_key(setting: str) -> str:
    """The key in app/i18n.py of a setting's tooltip (each field of Preferences has one)."""
    return f"tip_{setting}"


def settings_panel(chat: Tab, max_tokens_limit: int) -> cl.ChatSettings:
    """The settings widgets, showing the session's current preferences."""
    prefs, lang = chat.preferences, chat.lang

    def slider(key: str, low: float, high: float, step: float) -> Slider:
        return Slider(
            id=key,
            label=text(lang, label_key(key)),
            tooltip=text(lang, tip_key(key)),
            initial=getattr(prefs, key),
            min=low,
            max=high,
            step=step,
        )

    return cl.ChatSettings(
        [
            slider("temperature", 0.0, 2.0, 0.05),
            slider("top_p", 0.05, 1.0, 0.05),
            slider("max_tokens", 16, max_tokens_limit, 16),
            slider("repetition_penalty", 1.0, 2.0, 0.05),
            TextInput(
                id="system_prompt",
                label=text(lang, label_key("system_prompt")),
                tooltip=text(lang, tip_key("system_prompt")),
                initial=prefs.system_prompt,
                multiline=True,
            ),
        ]
    )
