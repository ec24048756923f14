"""The line under an answer: its figures, and how much of its prompt the server had in its cache."""

from __future__ import annotations

import dataclasses

from app.chat.branches import Answer
from app.chat.stats import AnswerStats
from app.history.transcript import line_of

FIGURES = AnswerStats(ttft_s=0.12, tokens=64, decode_s=3.5, dropped_turns=0, window=2048, stopped=False)


def test_the_line_says_how_many_prompt_tokens_came_from_the_servers_cache():
    stats = dataclasses.replace(FIGURES, prompt_tokens=1471, cached_tokens=1408)
    assert stats.describe("en").endswith(" · 1408 of 1471 prompt tokens from the server's cache")
    assert "提示词 1471 个 token 中 1408 个来自服务器缓存" in stats.describe("zh")


def test_nothing_is_said_of_the_cache_when_the_server_does_not_say():
    assert "cache" not in dataclasses.replace(FIGURES, prompt_tokens=1471).describe("en")


def test_an_answer_recorded_before_the_cache_was_counted_still_has_its_line():
    assert FIGURES.describe("en") == "first token 120 ms · 64 tokens · 18.3 tok/s"


def test_the_line_of_an_answer_the_app_was_cut_off_in_says_so_in_each_language():
    cut = {"type": "assistant_message", "output": "half an", "metadata": Answer("q", "cut_off").as_metadata()}
    assert line_of(cut, "en") == "cut off: the app stopped while this answer was written"
    assert line_of(cut, "zh") == "已中断：应用在生成这条回答时停止了"
