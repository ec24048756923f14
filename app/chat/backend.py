"""The vLLM client: model discovery, token counting, streaming, and error conversion."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import aiohttp
import httpx2
import openai
from openai import AsyncOpenAI

from app import json_codec
from app.chat.token_bound import TemplateCost, learn_template_cost, probe
from app.chat.transport import Arriving, Streams, http_client
from app.config import Settings
from app.errors import ChatError, Problem

log = logging.getLogger(__name__)

Message = dict[str, str]


# The engines the app knows the own endpoints of (both serve OpenAI's chat completions).
VLLM = "vllm"
LLAMA_CPP = "llama.cpp"
# Texts counted at once when many are (a document's passages, once, when it is kept).
COUNTS_AT_ONCE = 4
# Every request of a chat carries its id in this header: vLLM's router (consistent_hash) sends all of a chat's
# turns to one server, the one holding its prefix in its cache. A lone server ignores it.
CHAT_KEY_HEADER = "X-Session-ID"
# Statuses from here on are the server's refusal of a request.
FIRST_ERROR_STATUS = 400
# Tries after the first of a lookup (the model, token counts). Behind a router, a server that just died stays in
# its rotation until the next health check (a second); the SDK's backoff (about 0.5 s, then 1 s) outlasts that, so
# a lookup it refused meanwhile reaches another server. The streamed answer is never sent twice.
LOOKUP_RETRIES = 2


def system_in_question(messages: list[Message]) -> list[Message]:
    """The messages for a template without a system role: the system text opens the first question instead.

    Gemma's and some Mistral templates raise an error for a system message; the model then reads it where their own
    documentation puts instructions, before the first user message.
    """
    leading = 0
    while leading < len(messages) and messages[leading]["role"] == "system":
        leading += 1
    if not leading:
        return messages
    system, rest = "\n\n".join(m["content"] for m in messages[:leading]), messages[leading:]
    if rest and rest[0]["role"] == "user":
        return [{"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}, *rest[1:]]
    return [{"role": "user", "content": system}, *rest]


@dataclass(frozen=True)
class ModelInfo:
    """The model the server serves, its context window, and which engine serves it."""

    name: str
    max_model_len: int
    engine: str = VLLM


class ServerCount(NamedTuple):
    """How many of the vLLM servers behind a router answer its health checks."""

    answering: int
    total: int


def server_count(body: Any) -> ServerCount | None:
    """The count in vllm-router's /readiness answer (None: not a router's answer)."""
    answering = count_at(body, "healthy_workers")
    return ServerCount(answering, count_at(body, "total_workers") or 0) if answering is not None else None


def servers_now(settings: Settings) -> ServerCount | None:
    """The router's count asked now, from any thread (a metrics scrape); None: no router answered."""
    try:
        # Read whatever the status: the router answers 503 with the count when no server answers.
        reply = httpx2.get(f"{settings.server_root}/readiness", timeout=settings.connect_timeout)
        return server_count(reply.json())
    except (httpx2.HTTPError, ValueError):
        return None


@dataclass(frozen=True)
class Sampling:
    """Per-request sampling parameters."""

    temperature: float
    top_p: float
    max_tokens: int
    repetition_penalty: float = 1.0
    seed: int | None = None


def unreadable(server: str, path: str) -> ChatError:
    """An answer that is not what the path answers: a proxy's page, another web server at the model server's address."""
    return ChatError(Problem.SERVER_ERROR, server=server, status=f"an answer from {path} the app cannot read")


def to_chat_error(exc: BaseException, server: str) -> ChatError:
    """Map an OpenAI SDK or transport error to a ChatError a person can act on."""
    if isinstance(exc, ChatError):
        return exc
    # aiohttp's timeouts (connecting, or no byte for too long) are TimeoutErrors.
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException | TimeoutError):
        return ChatError(Problem.TIMEOUT, server=server)
    if isinstance(exc, openai.APIConnectionError | httpx2.ConnectError | aiohttp.ClientConnectorError):
        return ChatError(Problem.UNREACHABLE, server=server)
    if isinstance(exc, httpx2.TransportError | openai.APIResponseValidationError | aiohttp.ClientError):
        return ChatError(Problem.INTERRUPTED, server=server)
    if isinstance(exc, openai.APIStatusError):
        return by_status(exc.status_code, _reason(exc.body, exc.message), server)
    if isinstance(exc, openai.APIError):
        # vLLM reports errors raised mid-stream as an error event in the stream.
        return ChatError(Problem.SERVER_ERROR, server=server, status=_reason(exc.body, exc.message))
    log.exception("unexpected error talking to vLLM at %s", server, exc_info=exc)
    return ChatError(Problem.SERVER_ERROR, server=server, status=type(exc).__name__)


def by_status(status: int, reason: str, server: str) -> ChatError:
    """The server's refusal of a request, by its HTTP status."""
    if status in (401, 403):
        return ChatError(Problem.UNAUTHORIZED, server=server)
    if status == 404:
        return ChatError(Problem.MODEL_MISSING, server=server, reason=reason)
    if status in (400, 422):
        return ChatError(Problem.REJECTED, reason=reason)
    return ChatError(Problem.SERVER_ERROR, server=server, status=status)


def _reason(body: object, fallback: str) -> str:
    """The server's own explanation in its answer's body (OpenAI's error shape or vLLM's), else the fallback."""
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return fallback


async def refusal(response: aiohttp.ClientResponse, server: str) -> ChatError:
    """A streamed request's refusal, with the reason the server gave in its body."""
    text = await response.text(errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return by_status(response.status, _reason(body, f"Error code: {response.status} - {text[:200]}"), server)


def cached_tokens(usage: dict[str, Any], timings: Any) -> int | None:
    """The prompt tokens the server reused from its cache: vLLM's prompt_tokens_details, llama-server's timings."""
    cached = count_at(usage.get("prompt_tokens_details"), "cached_tokens")
    return cached if cached is not None else count_at(timings, "cache_n")


def count_at(body: Any, key: str) -> int | None:
    """The whole number a server's answer holds at this key (None: it is no object, or holds none there)."""
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ChatStream:
    """Text deltas of one streamed completion; usage and finish reason once it ends."""

    def __init__(self, chunks: AsyncIterable[bytes], server: str) -> None:
        self._chunks = chunks
        self._server = server
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        # Prompt tokens the server found in its cache (None: it does not say).
        self.cached_tokens: int | None = None
        self.finish_reason: str | None = None
        self._failure: ChatError | None = None  # the server's error event, once read

    async def __aiter__(self) -> AsyncGenerator[str, None]:
        """The answer's text, a piece per chunk of the response (the text of all the events it holds, joined)."""
        # The server-sent events are parsed here from the response's bytes, rather than by the SDK (building its
        # models for every event was the app's largest CPU cost per token) or its line iterator (three generators
        # more per event): a chunk is one pass whatever it holds, and its events' usage is read once.
        try:
            partial = b""
            async for data in self._chunks:
                *lines, partial = (partial + data).split(b"\n")
                if text := self._read(lines):
                    yield text
                if self._failure:  # raised once the text that came before it is shown
                    raise self._failure
            if text := self._read([partial]):  # a last line without its line break
                yield text
        except ValueError as exc:  # not JSON: the stream was cut in the middle of an event
            raise ChatError(Problem.INTERRUPTED, server=self._server) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = to_chat_error(exc, self._server)
            if error.problem is Problem.UNREACHABLE:  # it was reachable: the answer was cut off
                error = ChatError(Problem.INTERRUPTED, server=self._server)
            raise error from exc
        if self._failure:  # the error event was the stream's last line
            raise self._failure
        if self.finish_reason is None:
            # The stream ended without saying why: the server went away mid-answer.
            raise ChatError(Problem.INTERRUPTED, server=self._server)

    def _read(self, lines: list[bytes]) -> str:
        """The text these complete lines' events carry; the newest usage and the finish reason kept."""
        texts, usage, timings = [], None, None
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":  # read on to the stream's end: the HTTP client's generators finish too
                continue
            chunk = json_codec.decoded(data)
            try:
                if chunk.get("error"):  # vLLM reports failures during generation as an event
                    error = chunk["error"]
                    reason = error.get("message") if isinstance(error, dict) else str(error)
                    self._failure = ChatError(Problem.SERVER_ERROR, server=self._server, status=reason)
                    break
                if chunk.get("usage"):
                    usage, timings = chunk["usage"], chunk.get("timings")
                for choice in chunk.get("choices") or ():
                    if choice.get("finish_reason"):
                        self.finish_reason = choice["finish_reason"]
                    if text := (choice.get("delta") or {}).get("content"):
                        texts.append(text)
            except (AttributeError, TypeError):  # JSON of another shape than a completion's events
                self._failure = unreadable(self._server, "/chat/completions")
                break
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            self.prompt_tokens = prompt if isinstance(prompt, int) else None
            self.completion_tokens = completion if isinstance(completion, int) else None
            if (cached := cached_tokens(usage, timings)) is not None:
                self.cached_tokens = cached
        try:
            return "".join(texts)
        except TypeError:  # a content that is no text: what came before it is shown, then the failure
            self._failure = unreadable(self._server, "/chat/completions")
            return "".join(itertools.takewhile(lambda text: isinstance(text, str), texts))


class Backend:
    """An OpenAI-compatible vLLM server, reached with one AsyncOpenAI client."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.server = settings.server_root
        self._client = AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key.get_secret_value() or "none",
            timeout=openai.Timeout(settings.request_timeout, connect=settings.connect_timeout),
            max_retries=0,
            http_client=http_client(),
        )
        self._lookups = self._client.with_options(max_retries=LOOKUP_RETRIES)
        # The answers, streamed past the SDK (docs/scaling.md), with its timeouts and the same key.
        self._streams = Streams(settings.connect_timeout, settings.request_timeout)
        self._stream_headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {settings.api_key.get_secret_value() or 'none'}",
        }
        self._model: ModelInfo | None = None
        self._template: TemplateCost | None = None
        # The model's template has no system role: the system prompt goes into the first question.
        self._system_in_question = False
        self._template_learned = False
        self._learning = asyncio.Lock()  # many sessions' first messages arrive together

    async def model(self) -> ModelInfo:
        """The served model (configured name or the first one listed), cached once found."""
        if self._model is None:
            served = await self._served(self._lookups)
            wanted = self._settings.model_name or next(iter(served), "")
            card = served.get(wanted)
            if card is None:
                raise ChatError(
                    Problem.MODEL_MISSING, server=self.server, reason=f"{wanted or 'no model'} is not served"
                )
            extra = card.model_extra or {}
            engine = LLAMA_CPP if card.owned_by == "llamacpp" else VLLM
            # llama-server's window is a slot's context (meta.n_ctx); vLLM's is max_model_len; 0: not known.
            slot = count_at(extra.get("meta"), "n_ctx") if engine == LLAMA_CPP else None
            max_len = slot or count_at(extra, "max_model_len") or 0
            self._model = ModelInfo(name=card.id, max_model_len=max_len, engine=engine)
        return self._model

    async def serving(self) -> bool:
        """Whether vLLM answers now (a request of its own, not the cached model)."""
        try:
            await self._served(self._client.with_options(timeout=self._settings.connect_timeout))
        except ChatError:
            return False
        return True

    async def _served(self, client: openai.AsyncOpenAI) -> dict[str, Any]:
        """The models the server lists, by id; ChatError when it cannot be asked or its answer is no list of them."""
        try:
            page = await client.models.list()
            return {card.id: card for card in page.data if isinstance(card.id, str)}
        except openai.OpenAIError as exc:
            raise to_chat_error(exc, self.server) from exc
        except (AttributeError, TypeError) as exc:  # the SDK's reading of a page that is no list of models
            raise unreadable(self.server, "/models") from exc

    async def servers(self) -> ServerCount | None:
        """How many vLLM servers answer behind the router (None: the server is vLLM itself, or it is down)."""
        return await asyncio.to_thread(servers_now, self._settings)

    def forget_model(self) -> None:
        """Drop the cached model, e.g. after vLLM went away (it may come back with another)."""
        self._model = None
        self._template, self._system_in_question, self._template_learned = None, False, False

    async def count_prompt_tokens(self, messages: list[Message]) -> int:
        """Tokens of the chat prompt as vLLM renders it (chat template included)."""
        return int((await self._tokenize(messages))["count"])

    async def count_text_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens by the server's tokenizer, alone, without special tokens (a few requests at once)."""
        at_once = asyncio.Semaphore(COUNTS_AT_ONCE)

        async def one(text: str) -> int:
            async with at_once:
                if (await self.model()).engine == VLLM:
                    counted = await self._post("/tokenize", {"prompt": text, "add_special_tokens": False}, count=int)
                    return int(counted["count"])
                return len(
                    (await self._post("/tokenize", {"content": text, "add_special": False}, tokens=list))["tokens"]
                )

        return list(await asyncio.gather(*(one(text) for text in texts)))

    async def prompt_bound(self, messages: list[Message]) -> int | None:
        """An upper bound on the prompt's tokens, without a request once the model's template is known."""
        await self._learned()
        return self._template.prompt_bound(messages) if self._template else None

    async def _learned(self) -> None:
        """What the model's template takes, learned once: a system message or not, and its token bound's costs."""
        if not self._template_learned:  # no lock per message once it is known
            async with self._learning:
                if not self._template_learned:
                    await self._learn()

    async def _learn(self) -> None:
        """Learn the template now (a server that cannot say leaves it unknown: every prompt is then counted)."""
        system_in_question = False
        try:
            system_in_question = self._system_in_question = await self._refuses_system_role()
            self._template = await learn_template_cost(self._probe_cost)
        except (ChatError, KeyError, TypeError, ValueError):  # e.g. a server without /detokenize
            log.info("No token bound for this server's model: every prompt is counted", exc_info=True)
            self._template = None
        # Kept though a failed probe made the backend forget the model meanwhile (a 404 from /detokenize).
        self._system_in_question, self._template_learned = system_in_question, True

    async def _refuses_system_role(self) -> bool:
        """Whether the model's template refuses a system message that it renders without one."""
        try:
            await self._render(probe(system=True, turns=0))
            return False
        except ChatError as refused:
            if refused.problem not in (Problem.REJECTED, Problem.SERVER_ERROR):  # no answer: nothing learned
                raise
            await self._render(probe(system=False, turns=0))  # raises too where the server renders none
        name = (await self.model()).name
        log.warning("%s's chat template takes no system message: the system prompt opens the first question", name)
        return True

    def _as_taken(self, messages: list[Message]) -> list[Message]:
        """The messages as the model's template takes them."""
        return system_in_question(messages) if self._system_in_question else messages

    async def _probe_cost(self, messages: list[Message]) -> int:
        """Tokens of a rendered prompt plus the bytes of its text (see app.chat.token_bound)."""
        ids = [int(token) for token in (await self._render(self._as_taken(messages)))["tokens"]]
        text = await self._post("/detokenize", {"tokens": ids})
        return len(ids) + len(str(text.get("prompt", text.get("content", ""))).encode())

    async def _tokenize(self, messages: list[Message]) -> dict[str, Any]:
        """The prompt's tokens as the server renders the messages ({"count", "tokens"})."""
        await self._learned()
        return await self._render(self._as_taken(messages))

    async def _render(self, messages: list[Message]) -> dict[str, Any]:
        """The tokens of these very messages as the server renders them with the model's template."""
        if (await self.model()).engine == VLLM:
            return await self._post("/tokenize", {"messages": messages, "add_generation_prompt": True}, count=int)
        # llama-server renders the template and tokenizes in two steps, as it does for a chat completion.
        prompt = (await self._post("/apply-template", {"messages": messages}, prompt=str))["prompt"]
        tokens = (await self._post("/tokenize", {"content": prompt, "add_special": True}, tokens=list))["tokens"]
        return {"count": len(tokens), "tokens": tokens}

    async def _post(self, path: str, body: dict[str, Any], **expected: type) -> dict[str, Any]:
        """A request to one of the server's own endpoints for the served model: a JSON object with the `expected`
        fields of their types, else SERVER_ERROR (a proxy's page, another server's answer)."""
        model = await self.model()
        try:
            result: object = await self._lookups.post(
                f"{self.server}{path}", body={"model": model.name, **body}, cast_to=dict[str, Any]
            )
        except openai.OpenAIError as exc:
            raise self._failed(exc) from exc
        if not isinstance(result, dict) or not all(isinstance(result.get(k), t) for k, t in expected.items()):
            raise unreadable(self.server, path)
        return result

    @asynccontextmanager
    async def stream_chat(
        self, messages: list[Message], sampling: Sampling, chat_key: str = ""
    ) -> AsyncIterator[ChatStream]:
        """Open a streamed completion for the chat chat_key; leaving the block closes it, which aborts it in vLLM."""
        model = await self.model()
        await self._learned()
        extra: dict[str, Any] = {}
        if sampling.repetition_penalty != 1.0:
            name = "repetition_penalty" if model.engine == VLLM else "repeat_penalty"
            extra[name] = sampling.repetition_penalty
        body = {
            "model": model.name,
            "messages": self._as_taken(messages),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "seed": sampling.seed,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            **extra,
        }
        headers = (self._stream_headers | {CHAT_KEY_HEADER: chat_key}) if chat_key else self._stream_headers
        url = f"{self._settings.base_url.rstrip('/')}/chat/completions"
        try:
            response = await self._streams.post(url, json_codec.encoded(body), headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failed(exc) from exc
        # Leaving the block releases the connection, or closes it if the answer was not read to its end.
        async with response:
            if response.status >= FIRST_ERROR_STATUS:
                raise self._failed(await refusal(response, self.server))
            arriving = Arriving(response, self._streams.read_s)
            try:
                yield ChatStream(arriving, self.server)
            except ChatError as exc:
                if exc.problem in (Problem.UNREACHABLE, Problem.INTERRUPTED, Problem.MODEL_MISSING):
                    self.forget_model()
                raise
            finally:
                arriving.close()

    def _failed(self, exc: BaseException) -> ChatError:
        error = to_chat_error(exc, self.server)
        if error.problem in (Problem.UNREACHABLE, Problem.MODEL_MISSING):
            self.forget_model()
        return error

    async def aclose(self) -> None:
        """Close the HTTP connection pools."""
        await self._client.close()
        await self._streams.aclose()
