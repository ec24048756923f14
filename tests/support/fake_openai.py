"""A small local OpenAI-compatible HTTP server with switchable failures, for fast unit tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeState:
    """What the fake server does next, and what it received."""

    def __init__(self) -> None:
        # ok | status | drop | error_event (vLLM's error event mid-answer) | slow | paced (max_tokens
        # tokens at tokens_per_second)
        self.mode = "ok"
        self.status = 500
        self.reply = ["Hello", ", ", "world", "!"]
        self.window = 64
        self.cached_tokens = 0  # what the final usage says the prompt found in the server's cache
        self.tokens_per_second = 2000.0
        self.requests: list[dict[str, Any]] = []
        self.streams_open = 0
        self.streams_finished = 0
        self.streams_aborted = 0  # the client closed the stream before its end
        # A model whose template raises for a system message (Gemma's), on a server without /detokenize.
        self.refuse_system = False
        # What a path answers with 200 instead of its own answer (bytes: as a web page, else as JSON).
        self.odd_answers: dict[str, object] = {}
        # The JSON of an event an answer's stream sends after its first (None: none).
        self.odd_event: object | None = None


def count_tokens(messages: list[dict[str, str]]) -> int:
    """The fake tokenizer: one token per word plus two per message plus one for the prompt."""
    return 1 + sum(2 + len(m["content"].split()) for m in messages)


async def counted(messages: list[dict[str, str]]) -> int:
    """The fake tokenizer as the budget asks for it (an awaited count)."""
    return count_tokens(messages)


def make_handler(state: FakeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _odd(self, body: object) -> None:
            if not isinstance(body, bytes):
                self._json(200, body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path in state.odd_answers:
                self._odd(state.odd_answers[self.path])
            elif self.path == "/v1/models":
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": "fake-ernie", "object": "model", "owned_by": "test", "max_model_len": state.window}
                        ],
                    },
                )
            else:
                self._json(404, {"error": {"message": "no such path"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, **body})
            if state.mode == "status":
                self._json(
                    state.status,
                    {"error": {"message": f"fake failure {state.status}", "type": "test", "code": state.status}},
                )
                return
            if self.path in state.odd_answers:
                self._odd(state.odd_answers[self.path])
                return
            if state.refuse_system and (body.get("messages") or [{}])[0].get("role") == "system":
                self._json(400, {"error": {"message": "System role not supported", "type": "BadRequestError"}})
                return
            if state.refuse_system and self.path == "/detokenize":
                self._json(404, {"error": {"message": "no such path"}})
                return
            if self.path == "/tokenize":  # a chat's messages, or a text alone (one token a word)
                count = count_tokens(body["messages"]) if "messages" in body else len(body["prompt"].split())
                tokens = {"tokens": list(range(count))} if state.refuse_system else {}  # for a bound's probes
                self._json(200, {"count": count, "max_model_len": state.window, **tokens})
                return
            if state.mode == "slow":
                time.sleep(3)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            state.streams_open += 1
            try:
                self._stream(body)
            except (BrokenPipeError, ConnectionResetError):
                state.streams_aborted += 1
            finally:
                state.streams_open -= 1

        def _stream(self, body: dict[str, Any]) -> None:
            reply = state.reply
            if state.mode == "paced":
                reply = [f" t{i}" for i in range(int(body.get("max_tokens") or 16))]
            for index, piece in enumerate(reply):
                if state.mode == "paced" and index:
                    time.sleep(1 / state.tokens_per_second)
                if state.odd_event is not None and index == 1:
                    self._chunk(f"data: {json.dumps(state.odd_event)}\n\n".encode())
                if state.mode == "drop" and index == 2:
                    self.connection.shutdown(2)
                    return
                if state.mode == "error_event" and index == 2:
                    self._event({"error": {"message": "engine failed", "type": "InternalServerError", "code": 500}})
                    self._chunk(b"")
                    return
                self._event(
                    {
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": index + 1, "total_tokens": 4 + index},
                    }
                )
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None})
            self._event(
                {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 3,
                        "completion_tokens": len(reply),
                        "total_tokens": 3 + len(reply),
                        "prompt_tokens_details": {"cached_tokens": state.cached_tokens},
                    },
                }
            )
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            self.close_connection = True
            state.streams_finished += 1

        def _event(self, chunk: dict[str, Any]) -> None:
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake-ernie",
                **chunk,
            }
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


@dataclass(frozen=True)
class FakeModel:
    """The fake server as a model server an app is started against (its answers are what the test scripts)."""

    name: str
    base_url: str
    api_key: str = "fake-key"


@contextmanager
def fake_openai_server() -> Iterator[tuple[str, FakeState]]:
    """Serve the fake API on a free loopback port in a thread; yield its /v1 URL and state."""
    state = FakeState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()
