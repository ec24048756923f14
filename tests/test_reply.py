"""One reply of the chat core, without Chainlit or an app: planned, streamed, stopped or failed (fake server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY

from app.chat.attachments import Attachment
from app.chat.backend import Backend
from app.chat.branches import ROOT, Branches
from app.chat.conversation import Ending
from app.chat.passages import INTRO, QUESTION, WEAKEST, Passage, cost
from app.chat.preferences import Preferences
from app.chat.reply import Reply
from app.chat.token_bound import content_bound
from app.config import DEFAULT_DOCUMENT_TOKENS, Settings
from app.errors import ChatError, Problem
from tests.support.fake_openai import FakeState, fake_openai_server


@dataclass
class Page:
    """What a page would draw of a reply: its words as they came, and when it counted as streaming."""

    words_seen: list[str] = field(default_factory=list)
    streaming_after: list[int] = field(default_factory=list)  # words seen when it was told

    async def words(self, text: str) -> None:
        self.words_seen.append(text)

    async def streaming(self) -> None:
        self.streaming_after.append(len(self.words_seen))


@pytest.fixture
async def fake() -> AsyncIterator[tuple[Backend, FakeState]]:
    with fake_openai_server() as (url, state):
        backend = Backend(Settings(vllm_base_url=url, request_timeout=2.0))
        yield backend, state
        await backend.aclose()


def asked(question: str, *earlier: tuple[str, str], left_out: int | None = None) -> Branches:
    """A branch of earlier questions and answers, then the question "q" (ids q0, a0, q1, a1, ..., q).

    `left_out`: the oldest turns the last answer's prompt left out, as its stats record it.
    """
    tree, parent = Branches(), ROOT
    for index, (user, assistant) in enumerate(earlier):
        stats: dict[str, object] | None = (
            {"dropped_turns": left_out} if left_out is not None and index == len(earlier) - 1 else None
        )
        tree.add({"id": f"q{index}", "type": "user_message", "output": user}, parent)
        tree.add(
            {
                "id": f"a{index}",
                "type": "assistant_message",
                "output": assistant,
                "metadata": answered(f"q{index}", stats),
            },
            f"q{index}",
        )
        parent = f"a{index}"
    tree.add({"id": "q", "type": "user_message", "output": question}, parent)
    return tree


def answered(question_id: str, stats: dict[str, object] | None = None) -> dict[str, object]:
    """An answer's record of the question it replies to, complete."""
    return {"turn": {"reply_to": question_id, "ending": "complete", "model": "fake-ernie", "stats": stats}}


def reply_of(backend: Backend, interval_s: float = 0.0, **preferences: object) -> Reply:
    defaults = Preferences.defaults(Settings()).model_dump()
    return Reply(backend, Preferences(**{**defaults, "max_tokens": 8, **preferences}), interval_s)


async def test_a_reply_streams_its_words_in_order_and_counts_them(fake):
    backend, _state = fake
    reply, page = reply_of(backend), Page()
    planned = await reply.plan(asked("hi", ("before", "earlier answer")), "q")
    replied = await reply.stream(planned, page)
    assert replied.text == "Hello, world!" == "".join(page.words_seen)
    assert replied.ending is Ending.COMPLETE and replied.failure is None
    assert (replied.prompt_tokens, replied.tokens) == (3, 4) and replied.stats.tokens == 4
    assert replied.stats.ttft_s is not None and not replied.stats.stopped


async def test_the_model_sees_the_branch_before_the_question_then_the_question(fake):
    backend, state = fake
    reply = reply_of(backend, system_prompt="be brief")
    planned = await reply.plan(asked("hi", ("before", "earlier answer")), "q")
    await reply.stream(planned, Page())
    sent = [r for r in state.requests if r["path"] == "/v1/chat/completions"][-1]
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "before"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "hi"},
    ]
    assert sent["max_tokens"] == 8


async def test_the_page_is_told_it_streams_after_its_second_update_once(fake):
    backend, state = fake
    state.mode, state.tokens_per_second = "paced", 100.0  # a read a token: an update a token
    page = Page()
    reply = reply_of(backend)
    await reply.stream(await reply.plan(asked("hi"), "q"), page)
    assert page.streaming_after == [2]


async def test_a_stopped_reply_keeps_what_it_said_and_closes_its_request(fake):
    backend, state = fake
    state.mode, state.tokens_per_second = "paced", 20.0
    page = Page()
    reply = reply_of(backend, max_tokens=200)
    planned = await reply.plan(asked("hi"), "q")
    running = asyncio.create_task(reply.stream(planned, page))
    while len(page.words_seen) < 3:
        await asyncio.sleep(0.01)
    running.cancel()  # the stop button
    replied = await running
    assert replied.ending is Ending.STOPPED and replied.stats.stopped and replied.failure is None
    assert replied.text == "".join(page.words_seen) and replied.text.startswith(" t0 t1 t2")
    for _ in range(100):  # the server notices the closed stream at its next token
        if state.streams_aborted:
            break
        await asyncio.sleep(0.05)
    assert state.streams_aborted == 1 and state.streams_open == 0


async def test_a_dropped_connection_ends_the_reply_with_what_it_said_and_why(fake):
    backend, state = fake
    state.mode = "drop"
    reply = reply_of(backend)
    replied = await reply.stream(await reply.plan(asked("hi"), "q"), Page())
    assert replied.ending is Ending.FAILED and replied.text == "Hello, "
    assert replied.failure is not None and replied.failure.problem is Problem.INTERRUPTED


async def test_a_failed_server_ends_the_reply_before_any_word(fake):
    backend, state = fake
    reply = reply_of(backend)
    planned = await reply.plan(asked("hi"), "q")
    state.mode, state.status = "status", 500
    page = Page()
    replied = await reply.stream(planned, page)
    assert replied.ending is Ending.FAILED and replied.text == "" and page.words_seen == []
    assert replied.failure is not None and replied.failure.problem is Problem.SERVER_ERROR
    assert replied.stats.ttft_s is None


async def test_a_question_too_long_for_the_window_is_refused_before_any_request(fake):
    backend, state = fake
    state.window = 40
    with pytest.raises(ChatError) as refused:
        await reply_of(backend).plan(asked("word " * 60), "q")
    assert refused.value.problem is Problem.MESSAGE_TOO_LONG and refused.value.details["limit"] == 32
    assert not [r for r in state.requests if r["path"] == "/v1/chat/completions"]


async def test_the_oldest_turns_are_left_out_when_the_window_is_full(fake):
    backend, state = fake
    state.window = 40
    earlier = [(f"question {i} " + "word " * 5, f"answer {i}") for i in range(4)]
    reply = reply_of(backend)
    planned = await reply.plan(asked("now", *earlier), "q")
    plan = planned.plan
    assert plan.dropped_turns > 0 and plan.messages[-1] == {"role": "user", "content": "now"}
    replied = await reply.stream(planned, Page())
    assert replied.stats.dropped_turns == plan.dropped_turns and replied.stats.window == 40


async def test_the_prompt_starts_where_the_previous_prompt_of_its_branch_started(fake):
    backend, state = fake
    state.window = 4096  # all of it would fit: the start is kept all the same, for the server's prefix cache
    reply = reply_of(backend, system_prompt="")
    earlier = [(f"question {i}", f"answer {i}") for i in range(4)]
    plan = (await reply.plan(asked("now", *earlier, left_out=2), "q")).plan
    assert plan.dropped_turns == 2
    assert plan.messages[0] == {"role": "user", "content": "question 2"}


async def test_the_prompt_tokens_the_server_had_cached_are_recorded_and_counted(fake):
    backend, state = fake
    state.cached_tokens = 2
    cached, computed = prompt_tokens("cached"), prompt_tokens("computed")
    reply = reply_of(backend)
    replied = await reply.stream(await reply.plan(asked("hi"), "q"), Page())
    assert (replied.stats.prompt_tokens, replied.stats.cached_tokens) == (3, 2)
    assert (prompt_tokens("cached"), prompt_tokens("computed")) == (cached + 2, computed + 1)


def prompt_tokens(source: str) -> float:
    """The operators' count of prompt tokens from this source so far."""
    return REGISTRY.get_sample_value("chat_prompt_tokens_total", {"source": source}) or 0.0


@dataclass
class Shelf:
    """A chat's documents as the chat core sees them: passages ranked for whatever is asked."""

    ranked: list[Passage]
    asked: list[list[str]] = field(default_factory=list)
    whole: dict[str, str] = field(default_factory=dict)  # the texts of the documents read whole, by id

    async def find(self, texts: Sequence[str], limit: int) -> list[Passage]:
        self.asked.append(list(texts))
        return self.ranked[:limit]

    async def passages(self, ids: Sequence[int]) -> dict[int, Passage]:
        return {passage.id: passage for passage in self.ranked if passage.id in ids}

    async def texts(self, documents: Sequence[str]) -> dict[str, str]:
        return {document: self.whole[document] for document in documents if document in self.whole}


def shelf_of(count: int, words: int = 30) -> Shelf:
    """Passages of one document, ranked best last-in-reading-order first: p{count-1} ... p0, each as strong as the
    best, each counted (one token a word, as the fake server counts)."""
    passages = [Passage(i, "manual.pdf", i + 1, "", f"passage{i} " + "word " * words, words + 1) for i in range(count)]
    return Shelf(list(reversed(passages)))


def budget_for(passages: Sequence[Passage]) -> int:
    """The tokens a question's passages need to take exactly these."""
    return content_bound(INTRO) + content_bound(QUESTION) + sum(cost(passage) for passage in passages)


async def test_a_question_is_sent_after_the_best_passages_its_budget_holds_in_reading_order(fake):
    backend, state = fake
    state.window = 4000  # room for all twelve: the budget decides
    shelf = shelf_of(12)
    reply = Reply(*reply_parts(backend), finder=shelf, document_tokens=budget_for(shelf.ranked[:5]) + 10)
    planned = await reply.plan(asked("what about pumps?"), "q")
    replied = await reply.stream(planned, Page())
    sent = [r for r in state.requests if r["path"] == "/v1/chat/completions"][-1]["messages"][-1]["content"]
    assert [passage.id for passage in planned.passages] == [7, 8, 9, 10, 11]  # the 5 best, as they read
    assert sent.index("passage7 ") < sent.index("passage11 ") < sent.index("Question: what about pumps?")
    assert "[1] manual.pdf, page 8" in sent and "passage6 " not in sent
    assert replied.ending is Ending.COMPLETE


@pytest.mark.parametrize("budget", [DEFAULT_DOCUMENT_TOKENS, 0])
async def test_passages_keep_to_the_prefill_budget_and_without_one_take_their_share_of_the_room(fake, budget):
    backend, state = fake
    state.window = 8000
    shelf = shelf_of(24, words=200)
    reply = Reply(*reply_parts(backend), finder=shelf, document_tokens=budget)
    passages = (await reply.plan(asked("pumps?"), "q")).passages
    taken = budget_for(passages)
    if budget:  # a CPU's: the first token is prefill time
        assert passages and taken <= budget < taken + cost(shelf.ranked[0])
    else:  # a GPU's: DOCUMENT_SHARE of the room, as before budgets
        assert len(passages) > 1 and taken <= 0.6 * 8000 < taken + 2 * cost(shelf.ranked[0])


async def test_weak_passages_and_a_second_copy_of_a_text_are_left_out(fake):
    backend, state = fake
    state.window = 4000
    best, copy, weak = (
        Passage(1, "a.pdf", 1, "", "The impeller is part ZX-4471."),
        Passage(2, "b.pdf", 9, "", "The  impeller is part\nZX-4471."),  # the same text in another document
        Passage(3, "a.pdf", 2, "", "Check the pump.", strength=WEAKEST / 2),
    )
    planned = await Reply(*reply_parts(backend), finder=Shelf([best, copy, weak])).plan(asked("impeller?"), "q")
    assert planned.passages == [best]


async def test_passages_are_sized_from_the_clamped_answer_and_none_fitting_is_said(fake):
    backend, state = fake
    state.window = 4000
    shelf = shelf_of(3)
    # max_tokens past the window: the passages still get their share of what half the window leaves.
    roomy = Reply(backend, prefs_with(max_tokens=8000), 0.0, finder=shelf)
    assert len((await roomy.plan(asked("pumps?"), "q")).passages) == 3
    crowded = await Reply(*reply_parts(backend), finder=shelf, document_tokens=budget_for([])).plan(asked("p?"), "q")
    assert crowded.passages == [] and crowded.crowded_out


async def test_a_follow_up_is_searched_with_the_question_before_it(fake):
    backend, _state = fake
    shelf = shelf_of(3)
    await Reply(*reply_parts(backend), finder=shelf).plan(asked("and the second?", ("list the pumps", "two")), "q")
    assert shelf.asked == [["and the second?", "list the pumps"]]


async def test_a_file_read_whole_is_fetched_from_the_server_for_every_turn_it_is_in(fake):
    backend, _state = fake
    tree = asked("and now?", ("read it", "done"))
    note = {"name": "note.txt", "type": "text/plain", "document": "d1", "whole": True}
    tree.steps["q0"] = {**tree.steps["q0"], "metadata": {"files": [note]}}  # the page kept the file's name only
    planned = await Reply(*reply_parts(backend), finder=Shelf([], whole={"d1": "The gate code is 4417."})).plan(
        tree, "q"
    )
    first = planned.plan.messages[0]["content"]
    assert first.startswith("File: note.txt\n```\nThe gate code is 4417.\n```") and first.endswith("read it")
    assert "text" not in tree.steps["q0"]["metadata"]["files"][0]  # the branch itself is left as it was


async def test_a_chat_without_documents_sends_the_question_alone(fake):
    backend, _state = fake
    planned = await Reply(*reply_parts(backend), finder=Shelf([])).plan(asked("hi"), "q")
    assert planned.passages == [] and planned.plan.messages[-1] == {"role": "user", "content": "hi"}


async def test_the_files_too_long_to_read_whole_are_the_longest_until_the_rest_fit(fake):
    backend, state = fake
    state.window = 200
    files = [Attachment(name, "text/plain", "word " * words) for name, words in (("a", 50), ("b", 400), ("c", 300))]
    reply = Reply(*reply_parts(backend))
    assert await reply.too_long_to_read(files, "summarise") == [1, 2]
    assert await reply.too_long_to_read(files[:1], "summarise") == []


def reply_parts(backend: Backend) -> tuple[Backend, Preferences, float]:
    return backend, prefs_with(max_tokens=8), 0.0


def prefs_with(**chosen: object) -> Preferences:
    """The default preferences with no system prompt and these changes."""
    defaults = Preferences.defaults(Settings()).model_dump()
    return Preferences(**{**defaults, "system_prompt": "", **chosen})
