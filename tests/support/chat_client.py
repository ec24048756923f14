"""A Chainlit client speaking the browser's socket.io protocol, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import pytest
import socketio

from tests.support.servers import with_key

if TYPE_CHECKING:
    from tests.support.servers import VllmServer


@dataclass
class Reply:
    """One assistant message as the browser would see it."""

    id: str
    streamed: str = ""
    final: str | None = None
    first_token_at: float | None = None
    token_events: int = 0
    event_times: list[float] = field(default_factory=list)


@dataclass
class ChatClient:
    """One browser tab: a socket.io session against a running Chainlit app."""

    url: str
    language: str = "en-US"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. the Origin a browser would send
    transports: tuple[str, ...] = ("websocket",)  # the page starts with ("polling", "websocket")
    deflate: bool = False  # ask for permessage-deflate, as Chromium does
    # Password login (name, password); None: the local user where the app has one, else nobody.
    credentials: tuple[str, str] | None = None
    thread_id: str = ""  # a past chat to resume
    chat_profile: str = ""  # the preset picked for a new chat (Chainlit's chat profile)
    modes: dict[str, str] = field(default_factory=dict)  # the composer's picks sent with each message (e.g. History)
    cookies: dict[str, str] = field(default_factory=dict)
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, Reply] = field(default_factory=dict)
    settings_widgets: list[dict[str, Any]] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)
    sent: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # messages sent, at their event position
    arrivals: list[float] = field(default_factory=list)  # perf_counter() of each event, for benchmarks
    # Told of each event as it arrives, after the client recorded it (a benchmark's tab waits without polling).
    on_event: Callable[[str, Any], None] | None = None

    def __post_init__(self) -> None:
        self.sio = self._new_socket()

    def _new_socket(self) -> socketio.AsyncClient:
        compress = {"compress": 15} if self.deflate else {}  # aiohttp's ws_connect: permessage-deflate
        sio = socketio.AsyncClient(reconnection=False, websocket_extra_options=compress)
        sio.on("*", self._on_event)
        return sio

    async def _on_event(self, event: str, data: Any = None) -> None:
        self.events.append((event, data))
        self.arrivals.append(time.perf_counter())
        if event in ("new_message", "update_message"):
            self.messages[data["id"]] = data
            if data.get("type") == "assistant_message":
                reply = self.replies.setdefault(data["id"], Reply(data["id"]))
                reply.final = data.get("output", "")
        elif event == "stream_start":
            reply = self.replies.setdefault(data["id"], Reply(data["id"]))
            reply.streamed = data.get("output", "")
            reply.first_token_at = time.perf_counter()
            reply.event_times.append(reply.first_token_at)
            reply.token_events += 1
        elif event == "stream_token":
            reply = self.replies.setdefault(data["id"], Reply(data["id"]))
            reply.streamed += data["token"]
            reply.event_times.append(time.perf_counter())
            reply.token_events += 1
        elif event == "chat_settings":
            self.settings_widgets = data
        if self.on_event is not None:
            self.on_event(event, data)

    async def log_in(self) -> None:
        """Log in as the page does (password form, or the local user's header login) and keep the cookie."""
        async with aiohttp.ClientSession(headers=self.headers) as http:
            async with http.get(self.url + "/auth/config") as reply:
                login = await reply.json() if reply.status == 200 else {}  # a refused Host gets no login either
            if not login.get("requireLogin"):
                return
            if self.credentials is not None:
                form = {"username": self.credentials[0], "password": self.credentials[1]}
                request = http.post(self.url + "/login", data=form)
            else:
                request = http.post(self.url + "/auth/header", headers=await self.key_cookie(http))
            async with request as reply:
                if reply.status != 200:
                    raise PermissionError(f"login refused: {reply.status} {await reply.text()}")
                self.cookies = {name: morsel.value for name, morsel in reply.cookies.items()}

    async def key_cookie(self, http: aiohttp.ClientSession) -> dict[str, str]:
        """The cookie the local user's link sets, as the browser that opened it sends it (none without a link)."""
        link = with_key(self.url)
        if link == self.url:
            return {}
        async with http.get(link, allow_redirects=False) as reply:
            assert reply.status == 303, f"the key link answered {reply.status}"
            return {"Cookie": "; ".join(f"{name}={morsel.value}" for name, morsel in reply.cookies.items())}

    @property
    def cookie_header(self) -> dict[str, str]:
        """The Cookie header the browser would send."""
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}

    async def connect(self) -> None:
        """Log in if needed, open the socket and start (or resume) the chat."""
        if not self.cookies:
            await self.log_in()
        auth = {
            "clientType": "webapp",
            "sessionId": self.session_id,
            "threadId": self.thread_id,
            "userEnv": "{}",
            "chatProfile": quote(self.chat_profile),  # the page URL-encodes it
        }
        await self.sio.connect(
            self.url,
            socketio_path="/ws/socket.io",
            auth=auth,
            headers={"Accept-Language": self.language, **self.headers, **self.cookie_header},
            transports=list(self.transports),
            wait_timeout=20,  # the page's socket.io client waits 20 s (python-socketio's default: 1 s)
        )
        await self.sio.emit("connection_successful")

    async def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A REST call to the app with this client's login, as the page makes it: (status, JSON or text)."""
        async with (
            aiohttp.ClientSession(headers={**self.headers, **self.cookie_header}) as http,
            http.request(method, self.url + path, json=body) as reply,
        ):
            payload = await reply.text()
            try:
                return reply.status, json.loads(payload)
            except ValueError:
                return reply.status, payload

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 60) -> None:
        """Wait until predicate() is true."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met in {timeout} s; last events: {self.events[-5:]}")
            await asyncio.sleep(0.02)

    def events_since(self, mark: int, name: str) -> list[Any]:
        """Payloads of one event type received after position mark."""
        return [data for event, data in self.events[mark:] if event == name]

    async def greeting(self, timeout: float = 60) -> str:
        """The first assistant message of the session."""
        await self.wait_for(self.texts, timeout)
        return self.texts()[0]

    async def upload(self, name: str, data: bytes, mime: str = "text/plain") -> tuple[int, Any]:
        """Attach a file as the page does (POST to Chainlit's upload route): (status, {"id": ...} or the refusal)."""
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime)
        url = f"{self.url}/project/file?session_id={self.session_id}"
        async with (
            aiohttp.ClientSession(headers={**self.headers, **self.cookie_header}) as http,
            # Expect: 100-continue, as large uploads do: a refusal comes before the body is sent.
            http.post(url, data=form, expect100=True) as reply,
        ):
            payload = await reply.text()
            return reply.status, json.loads(payload) if "json" in reply.content_type else payload

    async def send(self, text: str, message_id: str | None = None, files: tuple[str, ...] = ()) -> str:
        """Send a user message as the composer does, with the ids of files uploaded for it; return its id."""
        message_id = message_id or str(uuid.uuid4())
        message = {
            "id": message_id,
            "threadId": "",
            "name": "User",
            "type": "user_message",
            "output": text,
            "createdAt": datetime.now(UTC).isoformat(),
            "metadata": {},
            **({"modes": dict(self.modes)} if self.modes else {}),
        }
        self.sent.append((len(self.events), message))
        await self.sio.emit("client_message", {"message": message, "fileReferences": [{"id": f} for f in files]})
        return message_id

    async def edit(self, message_id: str, text: str) -> None:
        """Edit a sent message, as the pencil under it does (what followed it is replaced)."""
        payload = {"message": {"id": message_id, "type": "user_message", "output": text}, "fileReferences": []}
        await self.sio.emit("edit_message", payload)

    @property
    def thread_id_started(self) -> str:
        """The id of the chat this session saved its first message to ("" before it)."""
        started = [data for event, data in self.events if event == "first_interaction"]
        return str(started[-1]["thread_id"]) if started else ""

    async def start_answer(self, text: str, timeout: float = 60) -> int:
        """Send a message and wait until its answer starts streaming; return the event mark before it."""
        mark = len(self.events)
        await self.send(text)
        await self.wait_for(lambda: self.events_since(mark, "stream_start"), timeout)
        return mark

    async def ask(
        self, text: str, timeout: float = 120, message_id: str | None = None, files: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """Send a message, wait for its task to end; return the messages it produced."""
        sent_at = len(self.events)

        def handler_started() -> int | None:
            return next(
                (
                    sent_at + i
                    for i, (e, d) in enumerate(self.events[sent_at:])
                    if e == "new_message" and d.get("name") == "on_message"
                ),
                None,
            )

        await self.send(text, message_id, files)
        await self.wait_for(lambda: handler_started() is not None, timeout)
        mark = handler_started() or sent_at
        await self.wait_for(lambda: self.events_since(mark, "task_end"), timeout)
        await asyncio.sleep(0.05)  # let the final update_message land
        ids = [d["id"] for d in self.events_since(mark, "new_message") + self.events_since(mark, "stream_start")]
        return [self.messages[i] for i in dict.fromkeys(ids) if i in self.messages]

    def page(self) -> list[dict[str, Any]]:
        """The messages the page shows now, oldest first, as the events left them (one put back goes last)."""
        shown: dict[str, dict[str, Any]] = {}
        # The page shows a message it sends at once, before any event about it.
        sent = [(at, ("sent_message", message)) for at, message in self.sent]
        received = [(at, event) for at, event in enumerate(self.events)]
        for _, (event, data) in sorted(sent + received, key=lambda item: item[0]):
            if event == "resume_thread":
                shown = {step["id"]: step for step in data["steps"] if "message" in step["type"]}
            elif event in ("sent_message", "new_message", "stream_start", "update_message"):
                if "message" in data.get("type", "") and (event != "update_message" or data["id"] in shown):
                    shown[data["id"]] = {**shown.get(data["id"], {}), **data}
            elif event == "delete_message":
                shown.pop(data["id"], None)
        return list(shown.values())

    def element(self, name: str, for_id: str) -> dict[str, Any] | None:
        """The props of the newest custom element of this name by a message (None: it has none)."""
        sent = [d for e, d in self.events if e == "element" and d.get("name") == name and d.get("forId") == for_id]
        return dict(sent[-1]["props"]) if sent else None

    def actions(self, for_id: str) -> list[dict[str, Any]]:
        """The buttons shown under a message, newest state (removed ones left out)."""
        shown: dict[str, dict[str, Any]] = {}
        for event, data in self.events:
            if event == "action" and data.get("forId") == for_id:
                shown[data["id"]] = data
            elif event == "remove_action":
                shown.pop(data.get("id"), None)
        return list(shown.values())

    async def click(self, action: dict[str, Any]) -> tuple[int, Any]:
        """Click an action button: the page posts it to /project/action."""
        return await self.rest("POST", "/project/action", {"sessionId": self.session_id, "action": action})

    async def click_and_wait(self, action: dict[str, Any], timeout: float = 60) -> tuple[int, Any]:
        """Click a button that starts an answer, wait for its end; the event mark before the click, the response."""
        mark = len(self.events)
        status, response = await self.click(action)
        assert status == 200, response
        await self.wait_for(lambda: self.events_since(mark, "task_end"), timeout)
        return mark, response

    async def change_settings(self, settings: Any) -> Any:
        """Submit the settings panel (or anything else, for hostile tests); wait until it is handled."""
        return await self.sio.call("chat_settings_change", settings, timeout=30)

    async def stop(self) -> None:
        """Press the stop button."""
        await self.sio.emit("stop")

    def texts(self, kind: str = "assistant_message") -> list[str]:
        """Outputs of all messages of one kind, in arrival order."""
        return [m.get("output", "") for m in self.messages.values() if m.get("type") == kind]

    async def close(self) -> None:
        """Leave the chat: an explicit socket.io disconnect."""
        if self.sio.connected:
            await self.sio.disconnect()

    async def new_chat(self) -> None:
        """The new chat button: the session is cleared, then this connection closes."""
        # Acknowledged, so it is not lost with the socket's queue (the browser sends it before closing).
        await self.sio.call("clear_session", timeout=10)
        await self.close()

    async def drop(self) -> None:
        """Lose the connection without a goodbye, as a closed tab or a network failure does."""
        await self.sio.eio.ws.close()  # a websocket close frame, no socket.io disconnect packet
        await self.wait_for(lambda: not self.sio.connected, 10)

    async def reconnect(self) -> None:
        """Come back on a new connection to the same session, as the page does after a drop."""
        self.sio = self._new_socket()
        await self.connect()


def widget_values(widgets: list[dict[str, Any]]) -> dict[str, Any]:
    """The initial values of settings widgets, by id."""
    return {w["id"]: w.get("initial") for w in widgets}


def dumps(value: Any) -> str:
    """Compact JSON, for assertion messages."""
    return json.dumps(value, ensure_ascii=False)[:500]


def errors(messages: list[dict[str, Any]]) -> list[str]:
    """The error lines among messages a question produced."""
    return [str(m["output"]) for m in messages if m.get("isError")]


async def start_long_answer(tab: ChatClient, vllm: VllmServer, text: str) -> int:
    """Send a message whose answer is still being generated in vLLM; return the event mark before it.

    vLLM on this CPU can deliver a tiny model's stream in one late burst, so the first token may
    arrive when the answer is already complete: such an attempt is finished and retried.
    """
    await tab.change_settings({"max_tokens": 4000})  # the whole window: seconds, even for the tiny model
    for attempt in range(3):
        mark = await tab.start_answer(f"{text} ({attempt})")
        if vllm.metric("vllm:num_requests_running") == 1:
            return mark
        await tab.wait_for(partial(tab.events_since, mark, "task_end"), 60)
    pytest.fail("vLLM finished three answers before their first token reached the app")
