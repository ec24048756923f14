"""JSON per token: orjson's text reads back as the standard library's would, and what orjson refuses is still sent."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import json_codec


def values(integers: st.SearchStrategy[int]) -> st.SearchStrategy[object]:
    """JSON's values, their integers drawn from these."""
    return st.recursive(
        st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text() | integers, inner, max_size=4),
        max_leaves=20,
    )


@given(values(st.integers()))
def test_any_value_reads_back_as_the_standard_librarys_json_of_it(value):
    assert json.loads(json_codec.encoded(value)) == json.loads(json_codec.text(value)) == json.loads(json.dumps(value))


@given(values(st.integers(-(2**63), 2**64 - 1)))  # vLLM's events: counts and ids, no integer past 64 bits
def test_an_event_reads_as_the_standard_library_reads_it(value):
    assert json_codec.decoded(json.dumps(value)) == json.loads(json.dumps(value))


def test_text_is_compact_and_keeps_chinese_as_written():
    assert json_codec.text(["stream_token", {"token": "你好", "n": 1}]) == '["stream_token",{"token":"你好","n":1}]'


@pytest.mark.parametrize(("value", "expected"), [("\ud800", '"\\ud800"'), (2**70, "1180591620717411303424")])
def test_what_orjson_refuses_is_the_standard_librarys(value, expected):
    assert json_codec.text(value) == expected


def test_keys_that_are_not_text_are_written_as_text_by_orjson_and_nan_as_null_which_browsers_parse():
    assert json_codec.encoded({1: "a", 2.5: float("nan")}) == orjson.dumps({"1": "a", "2.5": None})
    assert json.dumps(float("nan")) == "NaN"  # what the standard library sent, and JSON.parse refuses


def test_bytes_are_refused_as_json_refuses_them():
    with pytest.raises(TypeError):
        json_codec.encoded({"content": b"\x00"})


def test_an_event_that_is_not_json_is_the_standard_librarys_decode_error():
    with pytest.raises(json.JSONDecodeError):
        json_codec.decoded(b"{not json")
