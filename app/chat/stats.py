"""Per-answer figures shown under each answer, measured from the stream."""

from __future__ import annotations

from dataclasses import dataclass

from app.i18n import text


@dataclass(frozen=True)
class AnswerStats:
    """Timing and size of one streamed answer."""

    ttft_s: float | None
    tokens: int | None
    decode_s: float
    dropped_turns: int
    window: int
    stopped: bool
    # The prompt's tokens, and how many of them the server found in its cache (None: it did not say).
    prompt_tokens: int | None = None
    cached_tokens: int | None = None

    def describe(self, lang: str) -> str:
        """One short line, e.g. 'first token 120 ms · 64 tokens · 18.2 tok/s'."""
        ttft = "–" if self.ttft_s is None else f"{self.ttft_s * 1000:.0f} ms"
        tokens = "–" if self.tokens is None else str(self.tokens)
        rate = "–"
        if self.tokens and self.decode_s > 0:
            rate = f"{self.tokens / self.decode_s:.1f}"
        parts = [text(lang, "stats", ttft=ttft, tokens=tokens, rate=rate)]
        if self.prompt_tokens and self.cached_tokens is not None:  # why a turn was fast or slow to start
            parts.append(text(lang, "cached", cached=self.cached_tokens, prompt=self.prompt_tokens))
        if self.dropped_turns:
            parts.append(text(lang, "trimmed", count=self.dropped_turns, window=self.window))
        if self.stopped:
            parts.append(text(lang, "stopped"))
        return " · ".join(parts)
