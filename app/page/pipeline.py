"""A turn on the page: place the question, run its reply (the chat core's Reply), draw its events, record it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chainlit as cl

from app import metrics
from app.chat.answering import Answering
from app.chat.attachments import Attachment, Upload, UploadLimits, attachments_of, read_all, with_files
from app.chat.backend import Backend
from app.chat.branches import FOLLOWS, NOT_SENT, Answer, Step, is_question, placed
from app.chat.conversation import Ending
from app.chat.memory import recalled
from app.chat.pace import Pace
from app.chat.passages import SOURCES_KEY, Finder
from app.chat.quotas import Quotas
from app.chat.reply import NOT_SENT_PROBLEMS, Reply
from app.chat.tab import Tab
from app.chat.workers import in_worker
from app.config import DEFAULT_ANSWER_CHECKPOINT_S, DEFAULT_DOCUMENT_SHARE, DEFAULT_DOCUMENT_TOKENS
from app.documents.library import Library, Outcome
from app.errors import ChatError, HistoryUnavailable, Problem
from app.history.memories import Memories
from app.i18n import text
from app.page import seam
from app.page.answer_controls import offer_regenerate, show_line
from app.page.chat_history import History
from app.page.notices import say_error, show
from app.page.versions import cut


@dataclass(frozen=True)
class Pipeline:
    """Answers a session's messages through the backend, one answer at a time per session."""

    backend: Backend
    # How often streamed text is sent to the page (tokens in between are sent together).
    pace: Pace
    history: History
    quotas: Quotas
    uploads: UploadLimits
    # The answers being written now, the history's commits wait for.
    answering: Answering
    # The share of the prompt's room a full chat steps down to (CONTEXT_LOW_WATER).
    low_water: float
    # The users' documents (None with the history off: a file too long to read whole is refused).
    library: Library | None = None
    # The share of the prompt's room a question's passages may fill (DOCUMENT_SHARE).
    document_share: float = DEFAULT_DOCUMENT_SHARE
    # The most tokens a question's passages take, the server's prefill budget (DOCUMENT_TOKENS; 0: the share alone).
    document_tokens: int = DEFAULT_DOCUMENT_TOKENS
    # How often a streaming answer's text so far is written to the history (ANSWER_CHECKPOINT_SECONDS; 0: never).
    checkpoint_s: float = DEFAULT_ANSWER_CHECKPOINT_S
    # The users' memories (None with the history off), and the tokens one's memory may take (MEMORY_MAX_TOKENS).
    memories: Memories | None = None
    memory_tokens: int = 0

    async def told_busy(self, chat: Tab) -> bool:
        """Tell the user an answer is still streaming; True if so."""
        if chat.generating:
            await self.say_refused(chat, ChatError(Problem.BUSY))
        return chat.generating

    async def say_refused(self, chat: Tab, refusal: ChatError) -> None:
        """Say why no answer is written now, and count it."""
        metrics.REFUSALS.labels(refusal.problem.value).inc()
        await say_error(chat, refusal)

    async def reason_to_refuse(self, chat: Tab, text: str | None = None, *, attached: bool = False) -> ChatError | None:
        """Why no answer (to this new text, if any, or its files) may be written now (None: it may; counted)."""
        if chat.generating:
            return ChatError(Problem.BUSY)
        if text is not None and not text.strip() and not attached:
            return ChatError(Problem.EMPTY_MESSAGE)
        return await self.quotas.reason_to_refuse(chat.user)

    async def ask(self, chat: Tab, question: cl.Message, parent: str) -> None:
        """Answer a question the user sent, which follows `parent`; a refused one stays outside the conversation."""
        uploads, received = uploads_of(question), dict(question.metadata or {})
        question.metadata = with_files(question.metadata, [])  # the files are the ones uploaded, nothing else
        if (refusal := await self.reason_to_refuse(chat, question.content, attached=bool(uploads))) is not None:
            await place(question, None, received)
            await self.say_refused(chat, refusal)
            return
        with self.turn(chat):
            try:  # in the turn: a message sent meanwhile is refused as one sent while answering
                # Only files go to the readers' processes: a question alone pays no round trip (nor their start).
                files = await in_worker(read_all, uploads, self.uploads) if uploads else []
                files = await self.kept_as_documents(chat, files, question.content)
            except ChatError as unreadable:
                await place(question, None, received)
                await self.say_refused(chat, unreadable)
                return
            question.metadata = with_files(question.metadata, files)
            await place(question, parent, received, chat.branches.newest())
            self.settle(chat, question.to_dict(), parent)
            await self.answer_question(chat, question.id)

    def reply(self, chat: Tab) -> Reply:
        """The chat core's reply for this tab's chat, searching its documents."""
        finder: Finder | None = None
        thread_id = seam.thread_id()
        if self.library is not None and chat.user is not None:
            searches, project = chat.searches_documents, chat.project.id if chat.project is not None else None
            finder = self.library.finder(
                chat.user, thread_id, searches=searches, known=chat.file_texts, project_id=project
            )
        return Reply(
            self.backend,
            chat.answering_preferences(),
            self.pace.interval_for(self.answering.writing),
            self.low_water,
            finder,
            self.document_share,
            self.document_tokens,
            chat_key=thread_id,
        )

    async def kept_as_documents(self, chat: Tab, files: list[Attachment], typed: str) -> list[Attachment]:
        """Every file kept as a document of the user's (its text stays on the server); one too long is searched."""
        if self.library is None or chat.user is None or chat.temporary or not files:
            return (
                files  # read whole or refused by the budget, as with nowhere to keep it (a temporary chat keeps none)
            )
        searched = set(await self.reply(chat).too_long_to_read(files, typed))
        kept = []
        for index, file in enumerate(files):
            whole = index not in searched
            line = None if whole else await say_reading(chat, file)
            try:
                outcome = await self.library.keep(chat.user, seam.thread_id(), file, whole=whole)
            except HistoryUnavailable:  # logged by the store: read whole where it fits, as with no history
                if line is not None:
                    await seam.hide(line)
                kept.append(file)
                continue
            if line is not None and outcome.outcome is not Outcome.KEPT:
                await seam.hide(line)
            if outcome.outcome is Outcome.LIBRARY_FULL:
                raise ChatError(Problem.LIBRARY_FULL, name=file.name, limit=self.library.most_bytes // 1_000_000)
            if outcome.outcome is Outcome.CHAT_FULL:
                raise ChatError(Problem.CHAT_DOCUMENTS_FULL, name=file.name, limit=self.library.per_chat)
            if line is not None:
                line.content = text(chat.lang, "document_indexed", name=file.name, passages=outcome.passages)
                await show(line, redraw=True)
            chat.searches_documents |= not whole
            if whole and outcome.document_id is not None:
                chat.file_texts[outcome.document_id] = file.text
            kept.append(file if outcome.document_id is None else file.kept_as(outcome.document_id, whole=whole))
        return kept

    async def aside(self, message: cl.Message) -> None:
        """A message that is no question (a command): kept outside the conversation."""
        await place(message, None, dict(message.metadata or {}))

    async def edit(self, chat: Tab, question_id: str, text: str) -> None:
        """An edited question: a new version beside the old one, answered; the old one keeps what followed it."""
        old = chat.branches.steps.get(question_id)
        if old is None or not is_question(old) or question_id not in chat.branches.path():
            return  # not a question on this chat's page
        files = attachments_of(old)
        if (refusal := await self.reason_to_refuse(chat, text, attached=bool(files))) is not None:
            await self.say_refused(chat, refusal)
            return
        with self.turn(chat):
            parent = chat.branches.parents[question_id]
            await cut(chat, parent)  # the page took off what followed the question; the question goes too
            question = cl.Message(content=text, author=str(old.get("name") or "User"), type="user_message")
            question.metadata = with_files(placed(parent), files)  # the new version keeps the old one's files
            await question.send()
            self.settle(chat, question.to_dict(), parent)
            await self.answer_question(chat, question.id)

    async def regenerate(self, chat: Tab) -> None:
        """Answer the newest question shown again: a new version beside its answer, which keeps what followed it."""
        question_id = chat.branches.last_question()
        if question_id is None:
            return
        if (refusal := await self.reason_to_refuse(chat)) is not None:
            await self.say_refused(chat, refusal)
            return
        with self.turn(chat):
            await cut(chat, question_id)
            await self.answer(chat, question_id)

    def in_background(self, chat: Tab, work: Callable[[], Awaitable[None]]) -> None:
        """Run a turn as Chainlit's current task (so the stop button shows), outside the request that began it."""

        async def run() -> None:
            await seam.task_started()
            try:
                await work()
            finally:
                await seam.task_ended()

        seam.run_as_current_task(asyncio.create_task(run()))

    @contextlib.contextmanager
    def turn(self, chat: Tab) -> Iterator[None]:
        """The session's one answer, and one of the user's, while the block runs (taken at once: no await before)."""
        chat.generation = asyncio.current_task()
        try:
            with self.quotas.answering(chat.user), self.answering.answer():
                yield
        finally:
            chat.generation = None

    def settle(self, chat: Tab, step: Step, parent: str) -> None:
        """A new message in the tree, shown; the choice kept if it changed (an older version was shown there)."""
        chat.branches.add(step, parent)
        if chat.branches.select(str(step["id"])):
            self.history.keep_shown(chat.branches.shown)

    async def answer_question(self, chat: Tab, question_id: str) -> None:
        """Answer a new question, and draw its line while the answer streams (or once it ended without)."""
        drawn = False

        async def draw_line() -> None:
            nonlocal drawn
            if not drawn:
                drawn = True
                await show_line(chat, question_id, kept=self.history.kept)

        try:
            await self.answer(chat, question_id, while_streaming=draw_line)
        finally:  # stopped, failed or too short to get there
            await draw_line()

    async def answer(
        self, chat: Tab, question_id: str, while_streaming: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Fit the branch up to the question into the window, stream the reply, and record it as a new version.

        `while_streaming` runs once the reply is streaming, past its first page updates: not among the requests
        and first words of a burst of questions, nor among the endings of answers that end together.
        """
        await self.recall(chat)
        reply = self.reply(chat)
        try:
            planned = await reply.plan(chat.branches, question_id)
        except ChatError as error:
            sent = error.problem not in NOT_SENT_PROBLEMS
            shown = await say_error(chat, error, Answer(question_id, Ending.FAILED if sent else NOT_SENT))
            self.settle(chat, shown.to_dict(), question_id)
            await show_line(chat, shown.id, kept=self.history.kept)
            await offer_regenerate(chat)
            return

        if planned.crowded_out:
            await show(cl.Message(content=text(chat.lang, "passages_crowded_out")))
        message = cl.Message(content="")
        sources = {SOURCES_KEY: [passage.as_source() for passage in planned.passages]} if planned.passages else {}
        cut_off = Answer(question_id, Ending.CUT_OFF, planned.model.name, None).as_metadata() | sources
        replied = await reply.stream(planned, OnPage(message, while_streaming, self.checkpoints(cut_off)))
        self.quotas.used(chat.user, replied.prompt_tokens, replied.tokens)
        record = Answer(question_id, replied.ending, planned.model.name, dataclasses.asdict(replied.stats))
        if replied.text or replied.failure is None:
            message.metadata = record.as_metadata() | sources
            await message.send()
            self.settle(chat, message.to_dict(), question_id)
            await show_line(chat, message.id, kept=self.history.kept)
        if replied.failure is not None:
            shown = await say_error(chat, replied.failure, None if replied.text else record)
            if not replied.text:
                self.settle(chat, shown.to_dict(), question_id)
                await show_line(chat, shown.id, kept=self.history.kept)
        await offer_regenerate(chat)

    async def recall(self, chat: Tab) -> None:
        """The user's memory as the next answer reads it, read at each answer; none in a temporary chat.

        While the database or vLLM cannot say, the chat keeps the memory it had (and so its prompt's start).
        """
        if self.memories is None or chat.user is None:
            return
        if chat.temporary or self.history.temporaries.never_kept(seam.thread_id()):
            chat.memory, chat.remembered = "", ()
            return
        with contextlib.suppress(HistoryUnavailable, ChatError):  # logged by the store; said by the plan
            facts = tuple(await self.memories.for_answer(chat.user))
            if facts != chat.remembered or not chat.memory:
                heading, count = text(chat.lang, "memory_heading"), self.backend.count_text_tokens
                chat.memory = await recalled(heading, facts, self.memory_tokens, count)
                chat.remembered = facts

    def checkpoints(self, metadata: dict[str, Any]) -> Checkpoints | None:
        """An answer's checkpoints, stored with this metadata (None: the history is off, or so are they)."""
        if not self.history.kept or self.checkpoint_s <= 0:
            return None
        return Checkpoints(self.history, self.checkpoint_s, metadata)


@dataclass
class Checkpoints:
    """A streaming answer's text so far, written to the history now and then: a killed app keeps what was shown.

    Each is the answer's own message (its id), so the answer's final write replaces it, whatever its ending.
    """

    history: History
    interval_s: float
    # The answer's metadata until its final write: its turn, ended by the app stopping.
    metadata: dict[str, Any]
    # When the next one is due (None: the answer has shown nothing yet).
    due: float | None = None

    def shown(self, message: cl.Message) -> None:
        """The message shows more: write it as it stands if the interval passed since its first words or last write.

        A direct call from the answer's own task, not a timer: its write is queued before the final one, which
        is queued by a task started after it, and the store reads whom it is for from this task's context.
        """
        now = time.monotonic()
        if self.due is None:  # its first words start the clock
            self.due = now + self.interval_s
        elif now >= self.due:
            self.due = now + self.interval_s
            step = message.to_dict()
            step["metadata"] = self.metadata
            self.history.keep_unfinished(step)


@dataclass(frozen=True)
class OnPage:
    """A reply's events drawn on the page: its words streamed into its message, then the question's line."""

    message: cl.Message
    while_streaming: Callable[[], Awaitable[None]] | None
    # The answer's text so far kept in the history as it streams (None: not kept until it ends).
    checkpoints: Checkpoints | None = None

    async def words(self, text: str) -> None:
        await self.message.stream_token(text)
        if self.checkpoints is not None:
            self.checkpoints.shown(self.message)

    async def streaming(self) -> None:
        if self.while_streaming is not None:
            await self.while_streaming()


async def say_reading(chat: Tab, file: Attachment) -> cl.Message:
    """A line while a long file is read into passages (seconds for hundreds of pages); not stored."""
    line = cl.Message(content=text(chat.lang, "document_indexing", name=file.name, pages=len(file.pages) or 1))
    await show(line)
    return line


def uploads_of(question: cl.Message) -> list[Upload]:
    """The files Chainlit received with a message (its upload route keeps each in the session's folder)."""
    return [Upload(e.name, e.mime or "", Path(e.path)) for e in question.elements or [] if e.path]


async def place(
    question: cl.Message, parent: str | None, received: Mapping[str, Any], implied: str | None = None
) -> None:
    """Store the message a question follows (None: outside the conversation) and its files, if that changes it.

    `received`: the metadata it was stored with. A question following `implied` (the message stored just before
    it) needs no record of it: a question typed at the end of the newest branch costs no write more.
    """
    kept = {key: value for key, value in (question.metadata or {}).items() if key != FOLLOWS}
    question.metadata = kept if parent is not None and parent == implied else kept | placed(parent)
    if question.metadata != received:
        # Without its files: Chainlit's update would send (and store) each of them again.
        elements, question.elements = question.elements, []
        try:
            await question.update()
        finally:
            question.elements = elements
