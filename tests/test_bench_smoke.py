"""The benchmarks still run end to end (tiny runs: 2 sessions, a few tokens, a few questions and pages)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.config import DEFAULT_DOCUMENT_TOKENS
from tests.support.servers import ROOT
from tools import bench_app, bench_documents, bench_long_chat
from tools.bench_search import SUBSTRING as SUBSTRING_METHOD
from tools.bench_search import WHITESPACE as WHITESPACE_METHOD

# The documents benchmark's summary rows, one a side.
SIDES = ("| from passages", "| cut to fit")
# What a prompt holds besides its passages in the documents benchmark (its system prompt, question and template).
QUESTION_TOKENS = 100


def bench(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark as `make` does, tiny; it must end well (its output for the test to read)."""
    result = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.vllm
@pytest.mark.app
async def test_bench_harness_prints_a_table_and_writes_a_plot(vllm, tmp_path):
    # make bench's table, small, on the session's vLLM: no server started for it.
    args = bench_app.options(["--sessions", "2", "--tokens", "8", "--rounds", "1", "--out", str(tmp_path)])
    written = await bench_app.report(vllm, "ernie-tiny", args)
    rows = [line for line in written.splitlines() if line.startswith("| 2 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["direct", "app"]
    assert all(row.rstrip(" |").endswith("| 0") for row in rows), rows
    assert (tmp_path / "bench-app.md").read_text().startswith("| N | path |")
    assert (tmp_path / "bench-app.png").stat().st_size > 10_000


@pytest.mark.app
def test_capacity_benchmark_prints_the_direct_path_and_the_app_per_number_of_tabs(tmp_path):
    args = ("--tabs", "2,4", "--rate", "64", "--intervals", "1,4", "--tokens", "32", "--seconds", "2")
    result = bench("tools.bench_capacity", *args, "--out", str(tmp_path))
    print(result.stdout)  # the table, in the test's output
    rows = [row.split("|")[1:-1] for row in result.stdout.splitlines() if row.startswith(("| 1 |", "| 4 |"))]
    assert [tuple(cell.strip() for cell in cells[:3]) for cells in rows] == [
        (interval, tabs, path) for interval in "14" for tabs in "24" for path in ("direct", "app")
    ]
    assert all(cells[-1].strip().startswith("0 of ") and cells[-1].strip() != "0 of 0" for cells in rows), rows
    assert (tmp_path / "bench-capacity.md").read_text().startswith("| tokens per event | tabs | path |")


@pytest.mark.vllm
@pytest.mark.app
async def test_long_chat_benchmark_prints_each_budget_per_turn_side_by_side(vllm):
    # make bench-long-chat's report, small, on the session's vLLM: no server started for it.
    args = bench_long_chat.options(["--turns", "8", "--words", "60"])
    lines = (await bench_long_chat.report(vllm, args)).splitlines()
    summary = {row.split("|")[1].strip(): row for row in lines if row.startswith("| low water")}
    assert set(summary) == {"low water 0.5", "low water 1"}
    turns = [row for row in lines if row.startswith("| 8 |")]
    assert len(turns) == 1 and turns[0].count("|") == 10, turns
    assert lines[0].startswith("| budget |")


@pytest.mark.vllm
@pytest.mark.app
async def test_documents_benchmark_sends_the_needles_within_the_budget_and_follow_ups_reuse_the_cache(vllm):
    # make bench-documents' report, small, on the session's vLLM (a 4096-token window): no server started for it.
    args = ("--model", "tiny", "--pages", "8", "--questions", "2", "--window", "4096", "--budgets", "2000")
    lines = (await bench_documents.report(vllm, bench_documents.options([*args, "--keep-pages", "40"]))).splitlines()
    sides = {row.split("|")[1].strip(): row.split("|")[2:-1] for row in lines if row.startswith(SIDES)}
    assert list(sides) == [
        "from passages, budget 2000",
        "from passages, default budget",
        "from passages, share 0.6, as before",
        "cut to fit by hand",
    ]
    passages, _ttft, prompt, needles, _later, cached = (cell.strip() for cell in sides["from passages, default budget"])
    assert needles == "2 of 2" and int(passages) >= 1  # the chosen passages hold the needles ...
    assert int(prompt) <= DEFAULT_DOCUMENT_TOKENS + QUESTION_TOKENS  # ... and fit the budget
    # A follow-up's prompt begins with the one before (in vLLM's cache), then adds its own passage: about half.
    assert int(cached.rstrip("%")) >= 25
    # Per question, a row for each side (the cut's last): did the needle reach the model.
    found = {n: [row.split("|")[-2].strip() for row in lines if row.startswith(f"| {n} | ")] for n in (1, 2)}
    assert [len(each) for each in found.values()] == [4, 4], lines
    assert found[1][-1] == "yes" and found[2][-1] == "no"  # needles on pages 1 and 8; 4096 tokens hold under 8
    assert any(row.startswith("| 40 | ") for row in lines)  # a chat streamed while a 40-page PDF was kept
    assert lines[0].startswith("# A question about a long document")


@pytest.mark.postgres
def test_retrieval_benchmark_prints_recall_per_method_and_language_and_indexing_per_database(tmp_path):
    result = bench("tools.bench_retrieval", "--questions", "5", "--pages", "3", "--out", str(tmp_path))
    lines = result.stdout.splitlines()
    rows = [row for row in lines if "%" in row and row.startswith("| ") and row.count("|") == 12]
    recall = {row.split("|")[1].strip(): row.split("|")[2:-1] for row in rows}
    assert list(recall) == [
        "whitespace BM25 (what other chat UIs do)",
        "character bigrams",
        "this project, SQLite",
        "this project, PostgreSQL",
    ]
    assert all(len(cells) == 10 for cells in recall.values()), recall
    assert "rank alike: the same first 10 passages for 5 of 5 en questions and 5 of 5 zh questions." in result.stdout
    budgets = [row.split("|")[1].strip() for row in lines if row.startswith("| ") and row.count("|") == 8]
    assert budgets[1:] == ["500", "1000", "1500", "2000", "3000"]  # after the header: the app's choice per budget
    indexed = [row.split("|")[1:3] for row in lines if row.startswith(("| manual.pdf |", "| chinese.txt |"))]
    databases = [database.strip() for _, database in indexed]
    assert databases == ["SQLite", "SQLite", "PostgreSQL", "PostgreSQL"], indexed
    assert (tmp_path / "bench-retrieval.md").read_text().startswith("# Passage retrieval")


def test_search_benchmark_prints_recall_and_time_per_method_and_query(tmp_path):
    tiny = ("--chats", "200", "--questions", "10", "--skip-postgres", "--out", str(tmp_path))
    result = bench("tools.bench_search", *tiny)
    typed = "the question as typed"
    recall_at_10 = {
        cells[0]: float(cells[4].rstrip("%"))
        for line in result.stdout.splitlines()
        if (cells := [cell.strip() for cell in line.split("|")[1:-1]])[1:2] == [typed]
    }
    assert set(recall_at_10) == {SUBSTRING_METHOD, WHITESPACE_METHOD, "this app, SQLite"}
    assert recall_at_10["this app, SQLite"] > recall_at_10[SUBSTRING_METHOD]  # a question as typed finds its chat
    assert (tmp_path / "bench-search.md").exists()
