"""Session-wide real servers: one vLLM with the tiny ERNIE-4.5 model, one Chainlit app against it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from servers import ChatApp, VllmServer  # noqa: E402


@pytest.fixture(scope="session")
def vllm() -> Iterator[VllmServer]:
    """The shared real vLLM server: a 4096-token window (long answers to stop), API key required."""
    server = VllmServer("shared", max_model_len=4096)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chat_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """The real Chainlit app talking to the shared vLLM."""
    app = ChatApp(vllm)
    app.start()
    yield app
    app.stop()


@pytest.fixture(scope="session")
def small_vllm() -> Iterator[VllmServer]:
    """A real vLLM with a 256-token window, where conversations overflow quickly."""
    server = VllmServer("small", max_model_len=256)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def small_app(small_vllm: VllmServer) -> Iterator[ChatApp]:
    """The real Chainlit app talking to the small-window vLLM."""
    app = ChatApp(small_vllm)
    app.start()
    yield app
    app.stop()
