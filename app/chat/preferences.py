"""Per-session chat preferences: a validated model whose field names are the settings widget ids."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.config import Settings

SYSTEM_PROMPT_MAX_CHARS = 8000

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class Preferences(BaseModel):
    """What one person chose for their session; every change is validated field by field."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_assignment=True)

    temperature: Annotated[Number, Field(ge=0.0, le=2.0)]
    top_p: Annotated[Number, Field(ge=0.01, le=1.0)]
    max_tokens: Annotated[int, Field(strict=True, ge=1)]
    repetition_penalty: Annotated[Number, Field(ge=1.0, le=2.0)]
    system_prompt: Annotated[str, Field(strict=True, max_length=SYSTEM_PROMPT_MAX_CHARS)]

    @classmethod
    def defaults(cls, settings: Settings) -> Preferences:
        """The starting preferences of every session."""
        return cls(
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=min(settings.max_tokens, settings.max_tokens_limit),
            repetition_penalty=settings.repetition_penalty,
            system_prompt=settings.system_prompt[:SYSTEM_PROMPT_MAX_CHARS],
        )


def apply_changes(current: Preferences, changes: Any, max_tokens_limit: int) -> tuple[Preferences, list[str]]:
    """Apply each valid change; return the new preferences and the rejected keys with reasons."""
    if not isinstance(changes, dict):
        return current, [f"settings must be a mapping, not {type(changes).__name__}"]
    accepted = current.model_dump()
    rejected: list[str] = []
    for key, sent in changes.items():
        if key not in Preferences.model_fields:
            rejected.append(f"{str(key)[:40]}: unknown setting")
            continue
        value = sent
        if key == "max_tokens" and isinstance(sent, float) and sent.is_integer():
            value = int(sent)  # sliders may send 512.0
        try:
            Preferences.model_validate({**current.model_dump(), key: value})
        except ValidationError as exc:
            rejected.append(f"{key}: {exc.errors()[0]['msg']}")
            continue
        if key == "max_tokens" and value > max_tokens_limit:
            rejected.append(f"max_tokens: at most {max_tokens_limit}")
            continue
        accepted[key] = value
    return Preferences(**accepted), rejected
