"""GET /v1/models and POST /v1/chat/completions for people's scripts: a personal API key (Bearer) only, answered
like the page's questions (the same fair shares, daily tokens, usage, metrics and exact window budget) in vLLM's
shapes, streamed or not.

No cookie counts here, so another site's page cannot borrow a login: a browser sends the Authorization header only
when a script sets it, and to another origin only after a CORS preflight the app grants its own origins alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app import metrics
from app.api.kept import Chat, Keeper
from app.api.request import Asked, asked
from app.api.shapes import Completion, event, models, refusal_of
from app.chat.answering import Answering
from app.chat.backend import Backend
from app.chat.preferences import Preferences
from app.chat.quotas import Quotas
from app.chat.reply import Planned, Replied, Reply
from app.config import Settings
from app.errors import ChatError, HistoryUnavailable
from app.history.api_keys import ApiKeys
from app.history.team import Team
from app.i18n import language_of
from app.page import seam
from app.web.openai_errors import CHAT_COMPLETIONS, MODELS, ApiRefusal

log = logging.getLogger(__name__)
CHAT_HEADER = "X-Chat-Id"


def refused_key(status: int, message: str, why: str, code: str) -> ApiRefusal:
    """A request whose key is not one to answer: logged (never the key) and counted."""
    log.warning("API: refused a request: %s", why)
    metrics.REFUSALS.labels("api_key").inc()
    return ApiRefusal(status, message, code=code)


class Words:
    """A reply's words handed to the response that streams them (None: the reply has ended)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def words(self, text: str) -> None:
        self.queue.put_nowait(text)

    async def streaming(self) -> None:
        """Nothing to draw: the words go out as they come."""


class Released(StreamingResponse):
    """A streamed answer whose hold on the user's share is let go however the response ends, even unstarted."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], Any], headers: dict[str, str]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@dataclass(frozen=True)
class Api:
    """The /v1 routes' work: who calls, whether they may, their answer."""

    settings: Settings
    backend: Backend
    quotas: Quotas
    answering: Answering
    keys: ApiKeys
    team: Team
    keeper: Keeper

    async def caller(self, request: Request) -> str:
        """The user whose key the request presents (an ApiRefusal for no key, a wrong or revoked one, keys off)."""
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            raise refused_key(
                401,
                "You didn't provide an API key: send it as 'Authorization: Bearer ek-…'.",
                "no Bearer key",
                "missing_api_key",
            )
        try:
            on = bool((await self.team.defaults())["api_keys"])
            holder = await self.keys.holder(key) if on else None
        except HistoryUnavailable:
            raise ApiRefusal(
                503,
                "The history database does not answer just now: try again in a moment.",
                "server_error",
                code="history_unavailable",
            ) from None
        if not on:
            raise refused_key(
                403, "Personal API keys are turned off here (an admin's choice).", "keys are off", "api_keys_off"
            )
        if holder is None:
            raise refused_key(
                401,
                "Incorrect API key provided: make one on your account page (/account).",
                "an unknown or revoked key",
                "invalid_api_key",
            )
        return holder.user

    def language(self, request: Request) -> str:
        """The language of the page's own sentences in a refusal: the setting, else the caller's Accept-Language."""
        return language_of(self.settings.language or request.headers.get("accept-language"))

    async def models(self, request: Request) -> Response:
        """The model answering, as vLLM lists it."""
        try:
            await self.caller(request)
            return JSONResponse(models(await self.backend.model()))
        except ApiRefusal as refusal:
            return refusal.response()
        except ChatError as error:
            return refusal_of(error, self.language(request)).response()

    async def completions(self, request: Request) -> Response:
        """A chat completion, streamed or whole; kept in a chat of the caller's if the call names one."""
        lang = self.language(request)
        hold = contextlib.ExitStack()
        try:
            user = await self.caller(request)
            call = asked(await request.body())
            model = await self.backend.model()
            if call.model != model.name:
                raise ApiRefusal(
                    404,
                    f"The model `{call.model}` does not exist: this server answers with `{model.name}`.",
                    code="model_not_found",
                    param="model",
                )
            chat = await self.keeper.chat_for(user, call.chat_id) if call.chat_id else None
            reply = Reply(
                self.backend,
                preferences(self.settings, call, model.max_model_len),
                0.0,
                chat_key=chat.id if chat else "",
                seed=call.seed,
            )
            if (refusal := await self.quotas.reason_to_refuse(user)) is not None:
                metrics.REFUSALS.labels(refusal.problem.value).inc()
                raise refusal
            hold.enter_context(self.quotas.answering(user))  # at once: no await between the check and the hold
            planned = await reply.plan_given([said.as_message() for said in call.messages])
        except ApiRefusal as refusal:
            hold.close()
            return refusal.response()
        except ChatError as error:
            hold.close()
            return refusal_of(error, lang).response()
        except HistoryUnavailable:
            hold.close()
            return ApiRefusal(
                503,
                "The history database does not answer just now: try again in a moment.",
                "server_error",
                code="history_unavailable",
            ).response()
        turn = Turn(self, user, call, chat, reply, planned)
        headers = {CHAT_HEADER: chat.id} if chat is not None else {}
        if call.stream:
            return Released(turn.events(lang), hold.close, headers)
        with hold:
            replied = await turn.answer(Words())
        if replied.failure is not None and not replied.text:
            return refusal_of(replied.failure, lang).response()
        extra = {"chat_id": chat.id} if chat is not None else {}
        return JSONResponse(turn.completion.whole(replied) | extra, headers=headers)


@dataclass
class Turn:
    """One call's answer: streamed to its caller, counted toward their day, kept in their chat if named."""

    api: Api
    user: str
    call: Asked
    chat: Chat | None
    reply: Reply
    planned: Planned

    def __post_init__(self) -> None:
        self.completion = Completion(self.planned.model.name)

    async def answer(self, words: Words) -> Replied:
        """Stream the reply to `words`; count it, keep it; a cancel (the caller gone) ends it with what was said."""
        try:
            with self.api.answering.answer():  # the history's commits let it go first; a stopping app stops it
                replied = await self.reply.stream(self.planned, words)
        finally:
            words.queue.put_nowait(None)
        self.api.quotas.used(self.user, replied.prompt_tokens, replied.tokens)
        if self.chat is not None:
            question = next((m.as_message()["content"] for m in reversed(self.call.messages) if m.role == "user"), "")
            with contextlib.suppress(HistoryUnavailable):  # logged by the store; the caller has the answer
                await self.api.keeper.keep(self.user, self.chat, question, replied, self.planned.model.name)
        return replied

    async def events(self, lang: str) -> AsyncIterator[bytes]:
        """The answer as vLLM streams it: the role, the words, the end (or an error event), the usage, [DONE]."""
        words = Words()
        answering = asyncio.create_task(self.answer(words))
        try:
            yield event(self.completion.chunk({"role": "assistant", "content": ""}))
            while (text := await words.queue.get()) is not None:
                yield event(self.completion.chunk({"content": text}))
            replied = await answering
            if replied.failure is not None:
                yield event(refusal_of(replied.failure, lang).body())
            else:
                yield event(self.completion.chunk({}, replied.finish_reason or "stop"))
                if self.call.stream_options is not None and self.call.stream_options.include_usage:
                    yield event(self.completion.usage_chunk(replied))
            yield event("[DONE]")
        finally:
            if not answering.done():  # the caller went away: the reply stops (vLLM's request with it)
                answering.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await answering


def preferences(settings: Settings, call: Asked, window: int) -> Preferences:
    """The call's sampling over the app's defaults; its longest answer, else as long as the window allows."""
    defaults = Preferences.defaults(settings)
    asked_for = {
        "temperature": call.temperature,
        "top_p": call.top_p,
        "repetition_penalty": call.repetition_penalty,
        "max_tokens": call.most_tokens or window or defaults.max_tokens,
        "system_prompt": "",
    }
    try:
        return Preferences.model_validate(defaults.model_dump() | {k: v for k, v in asked_for.items() if v is not None})
    except ValidationError as invalid:
        problem = invalid.errors()[0]
        param = str(problem["loc"][0]) if problem["loc"] else None
        raise ApiRefusal(400, f"Invalid request: {param}: {problem['msg']}", param=param) from None


def install(api: Api) -> None:
    """Serve the routes (bearer keys only: Chainlit's login plays no part)."""
    seam.add_route(MODELS, api.models)
    seam.add_route(CHAT_COMPLETIONS, api.completions, "POST")
