"""The benchmark harness still runs end to end (a tiny run: 2 sessions, a few tokens)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.servers import ROOT

pytestmark = [pytest.mark.vllm, pytest.mark.app]


def test_bench_harness_prints_a_table_and_writes_a_plot(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.bench_app",
            "--sessions",
            "2",
            "--tokens",
            "8",
            "--rounds",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 2 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["direct", "app"]
    assert all(row.rstrip(" |").endswith("| 0") for row in rows), rows
    assert (tmp_path / "bench-app.md").read_text().startswith("| N | path |")
    assert (tmp_path / "bench-app.png").stat().st_size > 10_000


def test_long_chat_benchmark_prints_each_budget_per_turn_side_by_side(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tools.bench_long_chat", "--turns", "8", "--words", "60", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = {row.split("|")[1].strip(): row for row in result.stdout.splitlines() if row.startswith("| low water")}
    assert set(summary) == {"low water 0.5", "low water 1"}
    turns = [row for row in result.stdout.splitlines() if row.startswith("| 8 |")]
    assert len(turns) == 1 and turns[0].count("|") == 10, turns
    assert (tmp_path / "bench-long-chat.md").read_text().startswith("| budget |")
