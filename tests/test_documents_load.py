"""Documents and what they cost the server and other chats: the real app and history, a fake OpenAI server that
counts the requests and paces its answers."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from app.chat.passages import CANDIDATES
from tests.support.documents import ENGLISH_NEEDLE, ENGLISH_QUESTION, FOLLOW_UP, english_manual
from tests.support.fake_openai import FakeState, fake_openai_server
from tests.support.history import answer_of, started_chat
from tests.support.servers import ChatApp, VllmServer, running

# The fake server's answers while a long PDF is kept: a minute of words at this pace, longer than keeping it takes.
PACED_TOKENS_PER_SECOND = 50.0
STREAMED_TOKENS = 3000
# Waiting this long between two updates of a streaming answer is a stall a person sees.
STALL_S = 1.0


@pytest.fixture(scope="module")
def counting_app() -> Iterator[tuple[ChatApp, FakeState]]:
    """The app, its history on, in front of a fake OpenAI server with a 4096-token window."""
    with fake_openai_server() as (url, state):
        state.window = 4096
        app = ChatApp(VllmServer("documents-load", port=urlparse(url).port or 0, api_key=""))
        with running(app):
            yield app, state


def counted_messages(state: FakeState, since: int) -> list[str]:
    """The bodies of the requests since `since` that asked for a chat prompt's token count."""
    return [
        json.dumps(request)
        for request in state.requests[since:]
        if request["path"] == "/tokenize" and "messages" in request
    ]


async def test_a_question_about_a_document_asks_for_one_prompt_count_at_most(counting_app):
    app, state = counting_app
    tab = await started_chat(app)
    answer_of(await tab.ask("Hello?"))  # the app learns the server's chat template once
    status, reply = await tab.upload("manual.pdf", english_manual(), "application/pdf")
    assert status == 200
    mark = len(state.requests)
    answer_of(await tab.ask(ENGLISH_QUESTION, files=(str(reply["id"]),)))
    upload = counted_messages(state, mark)
    # Whether the file fits whole is counted on its first characters, never on its whole text; then the prompt.
    assert len(upload) <= 2 and all("Chapter 30" not in body for body in upload)
    for question in (FOLLOW_UP, "And the spare thermostat?"):
        mark = len(state.requests)
        answer_of(await tab.ask(question))
        assert len(counted_messages(state, mark)) <= 1
    await tab.close()


def counted_texts(state: FakeState, since: int) -> list[str]:
    """The texts (passages) whose tokens alone were asked for since `since`."""
    return [
        str(request["prompt"])
        for request in state.requests[since:]
        if request["path"] == "/tokenize" and "prompt" in request
    ]


async def test_a_documents_passages_are_counted_when_a_question_first_finds_them_and_only_those(counting_app):
    app, state = counting_app
    tab = await started_chat(app)
    mark = len(state.requests)
    status, reply = await tab.upload("manual.pdf", english_manual(pages=40), "application/pdf")  # 80 passages
    assert status == 200
    answer_of(await tab.ask(ENGLISH_QUESTION, files=(str(reply["id"]),)))
    first = counted_texts(state, mark)
    # Kept uncounted; then the question's candidates counted, the passage that answers among them.
    assert 0 < len(first) <= CANDIDATES and any(ENGLISH_NEEDLE in text for text in first)
    mark = len(state.requests)
    answer_of(await tab.ask(ENGLISH_QUESTION))
    assert counted_texts(state, mark) == []  # the same passages found again: their counts were kept
    await tab.close()


async def test_a_thousand_page_pdf_is_kept_while_another_chat_streams_without_a_stall(counting_app):
    app, state = counting_app
    book = english_manual(pages=1000)
    streaming, keeping = await started_chat(app), await started_chat(app)
    await streaming.change_settings({"max_tokens": STREAMED_TOKENS})
    state.mode, state.tokens_per_second = "paced", PACED_TOKENS_PER_SECOND
    try:
        mark = await streaming.start_answer("A long story, please.")
        status, reply = await keeping.upload("manual.pdf", book, "application/pdf")
        assert status == 200
        produced = await keeping.ask(ENGLISH_QUESTION, timeout=280, files=(str(reply["id"]),))
        assert answer_of(produced)["metadata"]["sources"]  # kept, split and searched
        [started] = streaming.events_since(mark, "stream_start")
        times = streaming.replies[started["id"]].event_times
        assert len(times) > 10  # it streamed all along
        assert max(later - earlier for earlier, later in itertools.pairwise(times)) < STALL_S
        await streaming.stop()
    finally:
        state.mode = "ok"
    for tab in (streaming, keeping):
        await tab.close()
