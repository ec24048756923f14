"""Presets: named settings a chat starts with, built in (Balanced, Precise, ...) or a user's own, as chat profiles."""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass, field

from app.chat.preferences import Preferences, apply_changes
from app.config import Settings
from app.errors import ChatError, HistoryUnavailable, Problem
from app.i18n import TEXT, text
from app.presets.store import PresetStore, StoredPreset

logger = logging.getLogger(__name__)
# A preset's name is shown in the list of presets: short, one line.
NAME_MAX_CHARS = 40


@dataclass(frozen=True)
class BuiltIn:
    """A preset every user has: its sampling, and its system prompt per language (None: the settings' own)."""

    name: str  # the chat profile's name, the same in every language: the page sends it back at chat start
    key: str  # names its texts in app/i18n.py: see label_key, about_key and prompt_key
    sampling: dict[str, float] = field(default_factory=dict)
    own_prompt: bool = False

    @property
    def label_key(self) -> str:
        """The key of its label in app/i18n.py."""
        return f"preset_{self.key}"

    @property
    def about_key(self) -> str:
        """The key of its description in app/i18n.py."""
        return f"preset_{self.key}_about"

    @property
    def prompt_key(self) -> str:
        """The key of its system prompt in app/i18n.py (a text only with own_prompt)."""
        return f"preset_{self.key}_prompt"

    def preferences(self, defaults: Preferences, lang: str) -> Preferences:
        """The settings a chat started with this preset has."""
        prompt = {"system_prompt": text(lang, self.prompt_key)} if self.own_prompt else {}
        return Preferences(**{**defaults.model_dump(), **self.sampling, **prompt})


BUILT_IN = (
    BuiltIn("Balanced", "balanced"),  # the settings' defaults: the model's own recommendation
    BuiltIn("Precise", "precise", {"temperature": 0.2, "top_p": 0.5}, own_prompt=True),
    BuiltIn("Creative", "creative", {"temperature": 1.1, "top_p": 0.95}, own_prompt=True),
    BuiltIn("Translate zh↔en", "translate", {"temperature": 0.2, "top_p": 0.8}, own_prompt=True),
)
BY_NAME = {preset.name: preset for preset in BUILT_IN}
# Names a user's preset cannot take: the built-in presets' names and labels in every language, casefolded.
RESERVED = {preset.name.casefold() for preset in BUILT_IN} | {
    TEXT[lang][preset.label_key].casefold() for lang in TEXT for preset in BUILT_IN
}


def preset_name(typed: str) -> str:
    """A name typed for a preset, trimmed; ChatError when it cannot be one."""
    name = " ".join(typed.split())
    if not name or len(name) > NAME_MAX_CHARS or any(unicodedata.category(c)[0] == "C" for c in name):
        raise ChatError(Problem.PRESET_NAME, limit=NAME_MAX_CHARS)
    if name.casefold() in RESERVED:
        raise ChatError(Problem.PRESET_BUILT_IN)
    return name


def summary(lang: str, preferences: Preferences) -> str:
    """A preset's sampling in one line."""
    return text(lang, "preset_summary", **preferences.model_dump(exclude={"system_prompt"}))


async def own_presets(user: str | None, settings: Settings, store: PresetStore | None) -> dict[str, Preferences]:
    """A user's own presets by name, as valid settings (none while the database fails)."""
    if user is None or store is None:
        return {}
    try:
        stored = await store.list(user)
    except HistoryUnavailable:  # logged by the store; the built-in presets still work
        return {}
    defaults = Preferences.defaults(settings)
    return {preset.name: apply_changes(defaults, preset.preferences, settings.max_tokens_limit)[0] for preset in stored}


async def starting_preset(profile: str | None, user: str | None, store: PresetStore | None) -> StoredPreset | None:
    """The user's own preset a chat was started with: the documents it searches, its project (None: another)."""
    if not profile or profile in BY_NAME or user is None or store is None:
        return None
    try:
        return await store.get(user, profile)
    except HistoryUnavailable:  # logged by the store; the chat starts without them
        return None


async def starting_preferences(
    profile: str | None,
    user: str | None,
    lang: str,
    settings: Settings,
    store: PresetStore | None,
    *,
    hidden: frozenset[str] = frozenset(),
) -> Preferences:
    """The settings of a chat started with the preset the page names: a built-in one or the user's own, else defaults.

    The page sends any name it likes: only the user's own presets are looked up, never anyone else's.
    """
    defaults = Preferences.defaults(settings)
    if profile in BY_NAME and profile not in hidden:
        return BY_NAME[profile].preferences(defaults, lang)
    if profile in BY_NAME:
        return defaults  # a preset the admins hid
    own = await own_presets(user, settings, store) if profile else {}
    if profile and profile not in own:
        logger.warning("%s's chat named the preset %r, not theirs: it starts with the defaults", user, profile)
    return own.get(profile or "", defaults)
