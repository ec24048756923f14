"""Where a benchmark's report goes: printed, and written as Markdown into its results folder."""

from __future__ import annotations

from pathlib import Path


def publish(report: str, out: Path, name: str) -> int:
    """Write the report to out/name.md, print it; the program's exit code (0)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(report + "\n")
    print(report)
    return 0
