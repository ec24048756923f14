"""One turn of a chat: fit the conversation into the window, stream the reply from vLLM, record the turn."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass

import chainlit as cl

from app import chainlit_seam as seam
from app import metrics
from app.backend import Backend, Sampling
from app.coalesce import Coalescer
from app.conversation import Ending, Turn, plan_request
from app.errors import ChatError, Problem
from app.history.transcript import NOT_SENT, Answer
from app.session import ChatSession
from app.shares import Shares
from app.stats import AnswerStats
from app.ui.answer_controls import offer_regenerate, show_stats
from app.ui.notices import say_error


@dataclass(frozen=True)
class Pipeline:
    """Answers a session's messages through the backend, one answer at a time per session."""

    backend: Backend
    # How often streamed text is sent to the page (tokens in between are sent together).
    stream_interval_s: float
    # Whether answers carry the export buttons (the history is on).
    exports: bool
    shares: Shares

    async def refused_while_busy(self, chat: ChatSession) -> bool:
        """Tell the user an answer is still streaming; True if so."""
        if chat.generating:
            await self.refuse(chat, ChatError(Problem.BUSY))
        return chat.generating

    async def refuse(self, chat: ChatSession, refusal: ChatError) -> None:
        """Say why no answer is written now, and count it."""
        metrics.REFUSALS.labels(refusal.problem.value).inc()
        await say_error(chat, refusal)

    async def take_turn(self, chat: ChatSession, user_text: str, message_id: str) -> None:
        """Answer one user message; one answer at a time per session, the user's fair share across sessions."""
        if await self.refused_while_busy(chat):
            return
        if (refusal := await self.shares.refusal(chat.user)) is not None:
            await self.refuse(chat, refusal)
            return
        chat.conversation.truncate_at(message_id)  # an edited or regenerated turn replaces what followed
        chat.generation = asyncio.current_task()
        try:
            with self.shares.answering(chat.user):
                await self.answer(chat, user_text, message_id)
        finally:
            chat.generation = None

    def take_turn_in_background(self, chat: ChatSession, user_text: str, message_id: str) -> None:
        """Run a turn as Chainlit's current task (so the stop button shows), outside the action's request."""

        async def run() -> None:
            await seam.task_started()
            try:
                await self.take_turn(chat, user_text, message_id)
            finally:
                await seam.task_ended()

        seam.run_as_current_task(asyncio.create_task(run()))

    async def answer(self, chat: ChatSession, user_text: str, message_id: str) -> None:
        """Fit the conversation into the window, stream the reply, and record the turn."""
        if not user_text.strip():
            await say_error(chat, ChatError(Problem.EMPTY_MESSAGE))
            return
        prefs = chat.preferences
        try:
            model = await self.backend.model()
            plan = await plan_request(
                chat.conversation,
                system_prompt=prefs.system_prompt,
                user_text=user_text,
                max_tokens=prefs.max_tokens,
                window=model.max_model_len,
                count=self.backend.count_prompt_tokens,
                bound=self.backend.prompt_bound,
            )
        except ChatError as error:
            sent = error.problem is not Problem.MESSAGE_TOO_LONG
            metrics.ANSWERS.labels(Ending.FAILED.value if sent else NOT_SENT).inc()
            if sent:
                chat.conversation.add(Turn(user_text, "", Ending.FAILED, message_id))
            await say_error(chat, error, Answer(message_id, Ending.FAILED if sent else NOT_SENT))
            return

        sampling = Sampling(
            temperature=prefs.temperature,
            top_p=prefs.top_p,
            max_tokens=plan.max_tokens,
            repetition_penalty=prefs.repetition_penalty,
        )
        reply = cl.Message(content="")
        ending, failure, tokens, prompt_tokens = Ending.COMPLETE, None, None, None
        batcher = Coalescer(reply.stream_token, self.stream_interval_s)
        started = first_token_at = time.perf_counter()
        got_token = False
        try:
            async with self.backend.stream_chat(plan.messages, sampling) as stream:
                async for delta in stream:
                    if not got_token:
                        got_token, first_token_at = True, time.perf_counter()
                    await batcher.add(delta)
                    tokens, prompt_tokens = stream.completion_tokens, stream.prompt_tokens
                tokens, prompt_tokens = stream.completion_tokens, stream.prompt_tokens
        except asyncio.CancelledError:
            ending = Ending.STOPPED
        except ChatError as error:
            ending, failure = Ending.FAILED, error
        await batcher.flush()
        finished = time.perf_counter()

        chat.conversation.add(Turn(user_text, reply.content, ending, message_id))
        self.shares.used(chat.user, prompt_tokens, tokens)
        stats = AnswerStats(
            ttft_s=first_token_at - started if got_token else None,
            tokens=tokens,
            decode_s=finished - first_token_at,
            dropped_turns=plan.dropped_turns,
            window=model.max_model_len,
            stopped=ending is Ending.STOPPED,
        )
        record = Answer(message_id, ending, model.name, dataclasses.asdict(stats))
        measure(stats, ending)
        if reply.content or failure is None:
            reply.metadata = record.as_metadata()
            await reply.send()
            await show_stats(chat, reply.id, stats, exports=self.exports)
            await offer_regenerate(chat, reply.id)
        if failure is not None:
            await say_error(chat, failure, None if reply.content else record)


def measure(stats: AnswerStats, ending: Ending) -> None:
    """An answer in the operators' metrics."""
    metrics.ANSWERS.labels(ending.value).inc()
    if stats.ttft_s is not None:
        metrics.FIRST_TOKEN.observe(stats.ttft_s)
    if stats.tokens and stats.decode_s > 0:
        metrics.SPEED.observe(stats.tokens / stats.decode_s)
