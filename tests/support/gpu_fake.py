"""A stand-in for vLLM on a GPU: an OpenAI-compatible server streaming every answer at a set pace, for load.

Like vLLM's engine it takes steps: each step gives every running stream its next token, `rate` steps a second.
A stream sends its first token at once and then an event every `interval` tokens (vLLM's `--stream-interval`),
so hundreds of streams cost its event loop one timer per step, not one per token. Answers are `max_tokens`
long, token i being " t{i}", so a reader can tell a lost or reordered token. It answers what the app asks of
vLLM: /v1/models, /tokenize and /detokenize (one token per byte of its own chat template), and streamed chat
completions with usage in every event when asked (vLLM's continuous_usage_stats). A client that closes its
connection mid-answer aborts it, as in vLLM. GET /stats says what it served.

`python -m tests.support.gpu_fake --port 8000 --rate 128 --interval 1` runs it (the benchmarks do).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

MODEL = "fake-ernie"
WINDOW = 131072
TEMPLATE = "<|{role}|>{content}\n"
USAGE = '"usage":{{"prompt_tokens":{prompt},"total_tokens":{total},"completion_tokens":{completion}}}'


def token(index: int) -> str:
    """The answer's token at this position."""
    return f" t{index}"


def rendered(messages: list[dict[str, Any]]) -> str:
    """A chat prompt as the fake's template renders it."""
    return "".join(TEMPLATE.format(role=m.get("role", ""), content=m.get("content", "")) for m in messages)


@dataclass
class Stream:
    """One streamed answer: how far it is, and the connection it is written to."""

    writer: asyncio.StreamWriter
    request_id: str
    max_tokens: int
    prompt_tokens: int
    usage_every_event: bool
    made: int = 0
    sent: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def chunk(self, choices: str, usage: bool) -> bytes:
        """One server-sent event of this stream (vLLM's chunk), with the usage so far if asked."""
        tail = ""
        if usage:
            total = self.prompt_tokens + self.made
            tail = "," + USAGE.format(prompt=self.prompt_tokens, total=total, completion=self.made)
        return (
            f'data: {{"id":"chatcmpl-{self.request_id}","object":"chat.completion.chunk","created":0,'
            f'"model":"{MODEL}","choices":{choices}{tail}}}\n\n'
        ).encode()

    def delta(self, delta: dict[str, str], finish: str) -> bytes:
        """An event carrying a delta of the answer."""
        choice = f'[{{"index":0,"delta":{json.dumps(delta)},"logprobs":null,"finish_reason":{finish}}}]'
        return self.chunk(choice, self.usage_every_event)


@dataclass
class Engine:
    """Steps every running stream forward `rate` times a second; an event per `interval` tokens."""

    rate: float
    interval: int
    running: list[Stream] = field(default_factory=list)
    started: int = 0
    finished: int = 0
    aborted: int = 0
    tokens: int = 0
    events: int = 0

    async def run(self) -> None:
        """Take steps on a fixed schedule (a late step does not shift the next ones)."""
        loop, step = asyncio.get_running_loop(), 0
        begun = loop.time()
        while True:
            step += 1
            await asyncio.sleep(max(0.0, begun + step / self.rate - loop.time()))
            for stream in list(self.running):
                self.advance(stream)

    def advance(self, stream: Stream) -> None:
        """One more token for the stream; write its event when one is due, and its end after the last."""
        stream.made += 1
        self.tokens += 1
        last = stream.made >= stream.max_tokens
        if not (last or stream.sent == 0 or stream.made - stream.sent >= self.interval):
            return
        body = stream.delta({"role": "assistant", "content": ""}, "null") if stream.sent == 0 else b""
        text = "".join(token(i) for i in range(stream.sent, stream.made))
        body += stream.delta({"content": text}, '"length"' if last else "null")
        stream.sent = stream.made
        self.events += 1
        if last:
            body += stream.chunk("[]", usage=True) + b"data: [DONE]\n\n"
        stream.writer.write(chunked(body) + (b"0\r\n\r\n" if last else b""))
        if last:
            self.finished += 1
            self.end(stream)

    def end(self, stream: Stream) -> None:
        """The stream is over (answered or aborted)."""
        if stream in self.running:
            self.running.remove(stream)
        stream.done.set()


def chunked(body: bytes) -> bytes:
    """One chunk of a chunked HTTP body."""
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


@dataclass
class GpuFake:
    """The HTTP side: requests read off each connection (kept alive), answered from the engine."""

    engine: Engine

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the connection's requests one after another until it closes."""
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                method, path = head.split(b" ", 2)[:2]
                length = content_length(head)
                body = json.loads(await reader.readexactly(length)) if length else {}
                if path == b"/v1/chat/completions" and body.get("stream"):
                    if not await self.stream(body, reader, writer):
                        break
                else:
                    status, answer = self.answer(method.decode(), path.decode(), body)
                    reply(writer, status, answer)
        writer.close()

    def answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """A plain JSON answer: the model, token counts, the fake's own figures."""
        if method == "GET" and path == "/v1/models":
            card = {"id": MODEL, "object": "model", "owned_by": "vllm", "max_model_len": WINDOW}
            return 200, {"object": "list", "data": [card]}
        if method == "GET" and path in ("/health", "/stats"):
            engine = self.engine
            figures = ("started", "finished", "aborted", "tokens", "events")
            return 200, {name: getattr(engine, name) for name in figures} | {"running": len(engine.running)}
        if method == "POST" and path == "/tokenize":
            text = rendered(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
            ids = list(text.encode())
            return 200, {"count": len(ids), "max_model_len": WINDOW, "tokens": ids}
        if method == "POST" and path == "/detokenize":
            return 200, {"prompt": bytes(body["tokens"]).decode(errors="replace")}
        return 404, {"error": {"message": f"no {method} {path} here", "code": 404}}

    async def stream(self, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Stream an answer; False if the client closed the connection first (the answer is aborted)."""
        options = body.get("stream_options") or {}
        engine = self.engine
        engine.started += 1
        stream = Stream(
            writer,
            request_id=str(engine.started),
            max_tokens=int(body.get("max_tokens") or 16),
            prompt_tokens=len(rendered(body["messages"]).encode()),
            usage_every_event=bool(options.get("include_usage") and options.get("continuous_usage_stats")),
        )
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        engine.running.append(stream)
        closed = asyncio.ensure_future(reader.read(1))  # a client says nothing more mid-answer: b"" is its close
        answered = asyncio.ensure_future(stream.done.wait())
        await asyncio.wait((closed, answered), return_when=asyncio.FIRST_COMPLETED)
        if answered.done():
            closed.cancel()  # and waited for: the connection's next request is read next
            with contextlib.suppress(asyncio.CancelledError):
                await closed
            return True
        answered.cancel()
        engine.aborted += 1
        engine.end(stream)
        return False


def content_length(head: bytes) -> int:
    """The length of a request's body, from its head (0: none)."""
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def reply(writer: asyncio.StreamWriter, status: int, answer: Any) -> None:
    """A JSON response on a kept-alive connection."""
    data = json.dumps(answer).encode()
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)


async def main(port: int, rate: float, interval: int) -> None:
    """Serve on 127.0.0.1:port until killed."""
    engine = Engine(rate, interval)
    server = await asyncio.start_server(GpuFake(engine).serve, "127.0.0.1", port, backlog=1024)
    async with server:
        await asyncio.gather(engine.run(), server.serve_forever())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=128.0, help="tokens per second of every stream")
    parser.add_argument("--interval", type=int, default=1, help="tokens per event (vLLM's --stream-interval)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.port, arguments.rate, arguments.interval))
