"""Per-session preferences: any input leaves a valid model; bad fields keep their last good value."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from app.chat.preferences import Preferences, apply_changes
from app.config import Settings

DEFAULTS = Preferences.defaults(Settings())
LIMIT = 4096

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**15), 10**15) | st.floats() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3),
    max_leaves=6,
)
changes = st.dictionaries(
    st.sampled_from(["temperature", "top_p", "max_tokens", "repetition_penalty", "system_prompt", "other"]),
    json_values,
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(changes | json_values)
def test_any_input_leaves_valid_preferences(update):
    result, rejected = apply_changes(DEFAULTS, update, LIMIT)
    Preferences.model_validate(result.model_dump())
    assert 0 <= result.temperature <= 2 and 0 < result.top_p <= 1
    assert 1 <= result.max_tokens <= LIMIT and 1 <= result.repetition_penalty <= 2
    assert all(math.isfinite(v) for v in (result.temperature, result.top_p, result.repetition_penalty))
    if isinstance(update, dict):
        for key in update:
            if any(r.startswith(f"{str(key)[:40]}:") for r in rejected) and key in Preferences.model_fields:
                assert getattr(result, key) == getattr(DEFAULTS, key)
    else:
        assert result == DEFAULTS and rejected


def test_valid_changes_apply_and_bad_ones_are_named():
    result, rejected = apply_changes(
        DEFAULTS, {"temperature": 0.2, "max_tokens": 64.0, "top_p": float("nan"), "bogus": 1}, LIMIT
    )
    assert result.temperature == 0.2 and result.max_tokens == 64 and result.top_p == DEFAULTS.top_p
    assert len(rejected) == 2 and any(r.startswith("top_p") for r in rejected)
    assert any(r.startswith("bogus") for r in rejected)


def test_strings_and_booleans_are_not_numbers():
    result, rejected = apply_changes(DEFAULTS, {"temperature": "0.5", "max_tokens": True}, LIMIT)
    assert result == DEFAULTS and len(rejected) == 2


def test_max_tokens_above_the_limit_is_rejected():
    result, rejected = apply_changes(DEFAULTS, {"max_tokens": LIMIT + 1}, LIMIT)
    assert result.max_tokens == DEFAULTS.max_tokens and rejected == [f"max_tokens: at most {LIMIT}"]
