"""The app never blocks its event loop: no synchronous HTTP clients or sleeps in app/."""

from __future__ import annotations

import re
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
BLOCKING = re.compile(
    r"(?<![A-Za-z])OpenAI\(|import requests|requests\.(get|post)|time\.sleep\(|urllib\.request|"
    r"httpx\.Client\(|subprocess\.run\("
)


def test_no_blocking_calls_in_the_app():
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in APP.rglob("*.py")
        if path.name != "__main__.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BLOCKING.search(line)
    ]
    assert offenders == []


def test_the_app_never_imports_vllm():
    assert not [p for p in APP.rglob("*.py") if re.search(r"^\s*(import|from)\s+vllm\b", p.read_text(), re.M)]
