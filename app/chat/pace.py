"""How often an answer's text goes to its page: the interval, spaced further when many answers stream at once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    """Updates every `interval_s`; past `most_per_second` updates over all answers, each answer's are spaced out.

    A page update and its frame cost the app's one event loop about 55 µs; with hundreds of answers streaming at
    a GPU's pace the updates alone would fill it, and every new answer's first token would wait behind them.
    """

    interval_s: float
    most_per_second: int = 0  # 0: no cap

    def interval_for(self, answers: int) -> float:
        """The interval for an answer starting while `answers` (itself included) are being written."""
        if self.most_per_second <= 0:
            return self.interval_s
        return max(self.interval_s, answers / self.most_per_second)
