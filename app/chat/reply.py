"""One reply to a question, without Chainlit: plan the request, stream it, count it; stopped or failed."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol

from app import metrics
from app.chat.attachments import Attachment, as_seen, attachments_of, compose, overflowing, read_in
from app.chat.backend import Backend, ModelInfo, Sampling
from app.chat.branches import NOT_SENT, Branches, Step, conversation_before, kept_from
from app.chat.coalesce import Coalescer
from app.chat.conversation import Conversation, Ending, Message, Plan, answer_room, plan_messages, plan_request
from app.chat.passages import CANDIDATES, Finder, Passage, asked_before, chosen, given_before, with_passages
from app.chat.preferences import Preferences
from app.chat.stats import AnswerStats
from app.chat.token_bound import content_bound
from app.config import DEFAULT_DOCUMENT_SHARE, DEFAULT_DOCUMENT_TOKENS, DEFAULT_LOW_WATER
from app.errors import ChatError, Problem

# The page update of an answer after which it counts as streaming (the first one is its first words).
STREAMING_FROM_UPDATE = 2
# Refusals of the budget: no request was sent for these, so the model saw nothing.
NOT_SENT_PROBLEMS = (Problem.MESSAGE_TOO_LONG, Problem.FILE_TOO_LONG)
# Whether a file fits whole is first counted on its first characters, this many per token of the limit: a text
# averages fewer (English about 4, code 3, Chinese under 2), so the cut alone is already past a limit it is past.
CUT_CHARACTERS_PER_TOKEN = 6


class Listener(Protocol):
    """What the page does with a reply's events."""

    async def words(self, text: str) -> None:
        """More of the answer, to show after what came before (several tokens joined)."""

    async def streaming(self) -> None:
        """The answer is past its first updates: not among the requests and first words of a burst of questions."""


@dataclass(frozen=True)
class Replied:
    """How a reply ended: what it said, how it ended, its figures, and the failure that ended it, if one did."""

    text: str
    ending: Ending
    stats: AnswerStats
    failure: ChatError | None = None
    prompt_tokens: int | None = None
    tokens: int | None = None
    # Why the server ended it ("stop", "length"; None: it did not say, or the reply was stopped or failed).
    finish_reason: str | None = None


@dataclass(frozen=True)
class Planned:
    """A reply ready to stream: the model, the request, and the passages of the chat's documents it carries."""

    model: ModelInfo
    plan: Plan
    passages: list[Passage]
    # The chat's documents had passages for the question, and none fit the room its answer leaves.
    crowded_out: bool = False


def seen_with(given: Mapping[str, Sequence[Passage]], step: Step) -> str:
    """A question as the model read it: after the passages it was given, as its prompt held them."""
    return with_passages(given.get(str(step["id"]), ()), as_seen(step))


def held_from(conversation: Conversation, given: Mapping[str, Sequence[Passage]], start: int) -> list[Passage]:
    """The passages the prompt already holds when it starts at turn `start`: those its questions were given."""
    return [passage for turn in conversation.turns[start:] for passage in given.get(turn.message_id, ())]


@dataclass(frozen=True)
class Reply:
    """Answers one question of a branch through the backend; the task running `stream` is what a stop cancels."""

    backend: Backend
    preferences: Preferences
    # How often streamed text goes to the listener (tokens in between are joined).
    stream_interval_s: float
    # The share of the prompt's room a full chat steps down to (CONTEXT_LOW_WATER).
    low_water: float = DEFAULT_LOW_WATER
    # The chat's documents (None: it has none to search).
    finder: Finder | None = None
    # The share of the prompt's room a question's passages may fill (DOCUMENT_SHARE); earlier turns get the rest.
    document_share: float = DEFAULT_DOCUMENT_SHARE
    # The most tokens a question's passages take, the server's prefill budget (DOCUMENT_TOKENS; 0: the share alone).
    document_tokens: int = DEFAULT_DOCUMENT_TOKENS
    # The chat's id, sent with its requests: a router keeps the chat on the server that holds its prefix.
    chat_key: str = ""
    # The sampling seed a client asked for (None: the server's own randomness).
    seed: int | None = None

    async def plan(self, branches: Branches, question_id: str) -> Planned:
        """The model, and the request for the branch up to the question; ChatError when none can be sent.

        Each earlier question is sent with the passages it was given, where they were, so the prompt begins with the
        previous one (the server's prefix cache holds it); the question gets the strong passages the prompt does not
        hold yet. When the budget leaves out older turns, the passages they held may be given again.
        """
        with counted_if_refused():
            branches = await self._read_in(branches, question_id)
            model = await self.backend.model()
            given = await self._given(branches, question_id)
            conversation = conversation_before(branches, question_id, functools.partial(seen_with, given))
            candidates, room = await self._candidates(branches, question_id, model)
            start = kept_from(branches, question_id)
            choice = chosen(candidates, room, held_from(conversation, given, start))
            question = branches.steps[question_id]
            plan = await self._fit(conversation, question, model, choice.passages, start=start)
            if candidates and plan.dropped_turns > start:
                choice = chosen(candidates, room, held_from(conversation, given, plan.dropped_turns))
                plan = await self._fit(conversation, question, model, choice.passages, start=plan.dropped_turns)
            return Planned(model, plan, choice.passages, choice.crowded_out)

    async def plan_given(self, messages: list[Message]) -> Planned:
        """The model, and the request for messages a client gave (an API call), fitted to the window as they are."""
        with counted_if_refused():
            model, backend = await self.backend.model(), self.backend
            plan = await plan_messages(
                messages,
                max_tokens=self.preferences.max_tokens,
                window=model.max_model_len,
                count=backend.count_prompt_tokens,
                bound=backend.prompt_bound,
            )
            return Planned(model, plan, [])

    async def _read_in(self, branches: Branches, question_id: str) -> Branches:
        """The branch with the text of each document read whole fetched into its question (a copy)."""
        if self.finder is None:
            return branches
        path = branches.up_to(question_id)
        wanted = {
            file.document
            for message_id in path
            for file in branches.read(message_id, attachments_of)
            if file.document is not None and file.whole
        }
        if not wanted:
            return branches
        texts = await self.finder.texts(sorted(wanted))
        steps = {i: read_in(step, texts) if i in path else step for i, step in branches.steps.items()}
        return dataclasses.replace(branches, steps=steps)

    async def _given(self, branches: Branches, question_id: str) -> dict[str, list[Passage]]:
        """The passages each earlier question on the branch was given, by question (one since deleted left out)."""
        if self.finder is None:  # a chat without documents: no walk of its branch for passages
            return {}
        recorded = given_before(branches, question_id)
        if not recorded:
            return {}
        found = await self.finder.passages(sorted({passage for ids in recorded.values() for passage in ids}))
        return {question: [found[i] for i in ids if i in found] for question, ids in recorded.items()}

    async def too_long_to_read(self, files: Sequence[Attachment], typed: str) -> list[int]:
        """Which files to keep as documents and search: the longest first, until the rest fit the window whole.

        Whole, the message leaves room for a real answer (max_tokens, at most half the window). A message is
        counted only where the bound leaves it in doubt, and first with each file cut to a few times the limit's
        characters: a file that long is surely too long (a cut text has no more tokens), which a count of the whole
        file (tens of thousands of tokens) would only confirm.
        """
        model, prefs, count = await self.backend.model(), self.preferences, self.backend.count_prompt_tokens
        limit = model.max_model_len - answer_room(prefs.max_tokens, model.max_model_len)
        whole = list(range(len(files)))
        while whole and model.max_model_len > 0:
            message = Conversation().messages(prefs.system_prompt, compose([files[i] for i in whole], typed))
            at_most = await self.backend.prompt_bound(message)
            if at_most is not None and at_most <= limit:
                break
            most = CUT_CHARACTERS_PER_TOKEN * limit
            cut = [dataclasses.replace(files[i], text=files[i].text[:most]) for i in whole]
            at_least = await count(Conversation().messages(prefs.system_prompt, compose(cut, typed)))
            if at_least <= limit and (cut == [files[i] for i in whole] or await count(message) <= limit):
                break
            whole.remove(max(whole, key=lambda i: len(files[i].text)))
        return [i for i in range(len(files)) if i not in whole]

    async def _candidates(self, branches: Branches, question_id: str, model: ModelInfo) -> tuple[list[Passage], int]:
        """The best-ranked passages of the chat's documents for the question (and the one before it), and the tokens
        its passages may take: the server's prefill budget, within DOCUMENT_SHARE of the room the answer leaves."""
        question = branches.steps[question_id]
        if self.finder is None:
            return [], 0
        typed = str(question.get("output") or "")
        candidates = await self.finder.find([typed, asked_before(branches, question_id)], CANDIDATES)
        if not candidates:
            return [], 0
        prefs, window, budget = self.preferences, model.max_model_len, self.document_tokens or sys.maxsize
        if window <= 0:  # an unknown window: no room to take a share of
            return candidates, budget
        alone = Conversation().messages(prefs.system_prompt, as_seen(question))
        asked = await self.backend.prompt_bound(alone) or sum(content_bound(m["content"]) for m in alone)
        room = int(self.document_share * (window - answer_room(prefs.max_tokens, window))) - asked
        return candidates, min(budget, room)

    async def _fit(
        self, conversation: Conversation, question: Step, model: ModelInfo, passages: list[Passage], *, start: int
    ) -> Plan:
        """The branch fitted into the window, starting at turn `start` if it can; a question too long names its file."""
        prefs = self.preferences
        try:
            return await plan_request(
                conversation,
                system_prompt=prefs.system_prompt,
                user_text=with_passages(passages, as_seen(question)),
                max_tokens=prefs.max_tokens,
                window=model.max_model_len,
                count=self.backend.count_prompt_tokens,
                bound=self.backend.prompt_bound,
                kept_from=start,
                low_water=self.low_water,
            )
        except ChatError as error:
            limit, files = error.details.get("limit"), attachments_of(question)
            if error.problem is not Problem.MESSAGE_TOO_LONG or not isinstance(limit, int) or not files:
                raise
            typed = str(question.get("output") or "")
            count = self.backend.count_prompt_tokens
            raise await overflowing(files, typed, prefs.system_prompt, limit, count) or error from None

    async def stream(self, planned: Planned, listener: Listener) -> Replied:
        """Stream the planned request to the listener; a cancel (stop) or a failure ends it with what was said."""
        prefs, model, plan = self.preferences, planned.model, planned.plan
        sampling = Sampling(
            temperature=prefs.temperature,
            top_p=prefs.top_p,
            max_tokens=plan.max_tokens,
            repetition_penalty=prefs.repetition_penalty,
            seed=self.seed,
        )
        said: list[str] = []

        async def show(text: str) -> None:
            said.append(text)
            await listener.words(text)

        ending, failure, opened = Ending.COMPLETE, None, None
        batcher = Coalescer(show, self.stream_interval_s)
        started = first_token_at = time.perf_counter()
        got_token, told_streaming = False, False
        try:
            async with (
                self.backend.stream_chat(plan.messages, sampling, self.chat_key) as stream,
                aclosing(stream.__aiter__()) as deltas,
            ):
                opened = stream
                # Per piece of text read: nothing here may cost per token (the stream counts them as it parses).
                async for delta in deltas:
                    if not got_token:
                        got_token, first_token_at = True, time.perf_counter()
                    await batcher.add(delta)
                    if not told_streaming and batcher.sends == STREAMING_FROM_UPDATE:
                        told_streaming = True
                        await listener.streaming()
        except asyncio.CancelledError:
            ending = Ending.STOPPED
        except ChatError as error:
            ending, failure = Ending.FAILED, error
        await batcher.flush()
        # The counts of what was read, the cache's only of an answer that ended well.
        tokens = opened.completion_tokens if opened else None
        prompt_tokens = opened.prompt_tokens if opened else None
        cached = opened.cached_tokens if opened and ending is Ending.COMPLETE else None
        stats = AnswerStats(
            ttft_s=first_token_at - started if got_token else None,
            tokens=tokens,
            decode_s=time.perf_counter() - first_token_at,
            dropped_turns=plan.dropped_turns,
            window=model.max_model_len,
            stopped=ending is Ending.STOPPED,
            prompt_tokens=prompt_tokens,
            cached_tokens=cached,
        )
        measure(stats, ending)
        finish = opened.finish_reason if opened else None
        return Replied("".join(said), ending, stats, failure, prompt_tokens, tokens, finish)


@contextlib.contextmanager
def counted_if_refused() -> Iterator[None]:
    """A plan's refusal counted among the answers: not sent (the budget's), or failed."""
    try:
        yield
    except ChatError as error:
        metrics.ANSWERS.labels(NOT_SENT if error.problem in NOT_SENT_PROBLEMS else Ending.FAILED.value).inc()
        raise


def measure(stats: AnswerStats, ending: Ending) -> None:
    """An answer in the operators' metrics."""
    metrics.ANSWERS.labels(ending.value).inc()
    if stats.ttft_s is not None:
        metrics.FIRST_TOKEN.observe(stats.ttft_s)
    if stats.tokens and stats.decode_s > 0:
        metrics.SPEED.observe(stats.tokens / stats.decode_s)
    if stats.prompt_tokens:
        cached = min(stats.cached_tokens or 0, stats.prompt_tokens)
        metrics.PROMPT_TOKENS.labels("cached").inc(cached)
        metrics.PROMPT_TOKENS.labels("computed").inc(stats.prompt_tokens - cached)
