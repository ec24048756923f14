"""Documents too long for the window, against the running app, the real vLLM and the real history (socket.io)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_client import ChatClient
from tests.support.documents import (
    CHINESE_NEEDLE,
    CHINESE_QUESTION,
    ENGLISH_NEEDLE,
    ENGLISH_QUESTION,
    FOLLOW_UP,
    NEEDLE_PAGE,
    chinese_manual,
    english_manual,
)
from tests.support.history import answer_of, reopened_after_a_restart, started_chat, stored_documents
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import sent_prompt

pytestmark = pytest.mark.app
INTRO = "Passages from the documents of this chat"


async def attach(tab: ChatClient, name: str, data: bytes, mime: str) -> str:
    """Upload a file as the page does; its id for the message."""
    status, reply = await tab.upload(name, data, mime)
    assert status == 200, reply
    return str(reply["id"])


async def asked(
    tab: ChatClient, vllm: VllmServer, question: str, files: tuple[str, ...] = ()
) -> tuple[str, dict[str, Any]]:
    """Ask; the prompt vLLM received for it, and the answer."""
    before = len(vllm.logged_requests())
    answer = answer_of(await tab.ask(question, files=files))
    return sent_prompt(vllm, before), answer


async def opened(tab: ChatClient, passage: int) -> str:
    """Click a source under an answer; the text the side view shows."""
    mark = len(tab.events)
    status, _ = await tab.click({"name": "open_source", "payload": {"passage": passage}})
    assert status == 200
    await tab.wait_for(lambda: tab.events_since(mark, "set_sidebar_elements"), 30)
    [element] = tab.events_since(mark, "set_sidebar_elements")[-1]["elements"]
    status, content = await tab.rest("GET", f"/project/file/{element['chainlitKey']}?session_id={tab.session_id}")
    assert status == 200
    return str(content)


async def test_a_document_too_long_for_the_window_is_answered_from_its_passages_with_sources(pair_app, vllm):
    ann = await started_chat(pair_app, credentials=("ann", "ann-password"))
    manual = await attach(ann, "manual.pdf", english_manual(), "application/pdf")
    mark = len(ann.events)
    prompt, answer = await asked(ann, vllm, ENGLISH_QUESTION, (manual,))
    assert INTRO in prompt and ENGLISH_NEEDLE in prompt and f"manual.pdf, page {NEEDLE_PAGE}" in prompt
    assert prompt.count("Chapter") < 15  # passages, not the 30 pages
    said = [data["output"] for event, data in ann.events[mark:] if event in ("new_message", "update_message")]
    assert any(line.startswith("manual.pdf is too long to read whole: its ") for line in said)
    sources = answer["metadata"]["sources"]
    assert any(source["page"] == NEEDLE_PAGE and source["document"] == "manual.pdf" for source in sources)
    line = ann.element("AnswerStats", answer["id"])
    assert line is not None and f"manual.pdf, p. {NEEDLE_PAGE}" in [item["label"] for item in line["sources"]["items"]]
    # The page gets the document's name, not its text: the question's record names the document it was kept as.
    question = next(m for m in ann.page() if m["type"] == "user_message")
    [record] = question["metadata"]["files"]
    assert set(record) == {"name", "type", "document", "whole"} and record["whole"] is False
    assert not any("Chapter 29" in str(data) for _event, data in ann.events[mark:])

    prompt, _ = await asked(ann, vllm, FOLLOW_UP)  # names nothing: the question before it finds the passage
    assert ENGLISH_NEEDLE in prompt
    needle = next(s["passage"] for s in sources if s["page"] == NEEDLE_PAGE)
    assert ENGLISH_NEEDLE in await opened(ann, needle)

    ben = await started_chat(pair_app, credentials=("ben", "ben-password"))
    prompt, _ = await asked(ben, vllm, ENGLISH_QUESTION)  # ann's passages never reach the model for ben
    assert INTRO not in prompt and ENGLISH_NEEDLE not in prompt
    assert ENGLISH_NEEDLE not in await opened(ben, needle)  # nor open for him

    kept = await stored_documents(pair_app)
    status, _ = await ann.rest("DELETE", "/project/thread", {"threadId": ann.thread_id_started})
    assert status == 200
    await asyncio.sleep(0.5)
    gone = await stored_documents(pair_app)
    assert kept["documents"] == gone["documents"] + 1 and kept["passages"] > gone["passages"]
    assert gone.get("passage_terms", gone["passages"]) == gone["passages"]  # no index row left behind
    for tab in (ann, ben):
        await tab.close()


async def test_a_preset_saved_in_a_chat_carries_its_documents_to_the_chats_it_starts(pair_app, vllm):
    ann = await started_chat(pair_app, credentials=("ann", "ann-password"))
    manual = await attach(ann, "manual.pdf", english_manual(), "application/pdf")
    await asked(ann, vllm, ENGLISH_QUESTION, (manual,))
    mark = len(ann.events)
    await ann.change_settings({"preset_save": "Pump work"})
    await ann.wait_for(lambda: ann.events_since(mark, "chat_settings"), 30)
    await ann.close()
    again = await started_chat(pair_app, credentials=("ann", "ann-password"), chat_profile="Pump work")
    prompt, _ = await asked(again, vllm, ENGLISH_QUESTION)
    assert ENGLISH_NEEDLE in prompt  # a new chat started with the preset searches its documents
    ben = await started_chat(pair_app, credentials=("ben", "ben-password"), chat_profile="Pump work")
    prompt, _ = await asked(ben, vllm, ENGLISH_QUESTION)  # a preset of that name is not his: nothing of hers
    assert INTRO not in prompt and ENGLISH_NEEDLE not in prompt
    for tab in (again, ben):
        await tab.close()


@pytest.mark.postgres
async def test_a_chinese_question_finds_its_passage_in_postgresql_and_after_a_restart(pg_app, vllm):
    tab = await started_chat(pg_app)
    manual = await attach(tab, "manual-zh.txt", chinese_manual(), "text/plain")
    prompt, answer = await asked(tab, vllm, CHINESE_QUESTION, (manual,))
    assert CHINESE_NEEDLE in prompt and "manual-zh.txt" in prompt
    assert answer["metadata"]["sources"][0]["document"] == "manual-zh.txt"
    again = await reopened_after_a_restart(pg_app, tab)
    prompt, _ = await asked(again, vllm, "保修卡要怎么处理？")
    assert CHINESE_NEEDLE in prompt
    await again.close()


async def test_a_file_that_fits_is_read_whole_and_its_text_never_reaches_the_page(pair_app, vllm):
    ann = await started_chat(pair_app, credentials=("ann", "ann-password"))
    note = await attach(ann, "note.txt", b"The gate code is 4417.", "text/plain")
    mark = len(ann.events)
    prompt, _ = await asked(ann, vllm, "What is the gate code?", (note,))
    assert "The gate code is 4417." in prompt and INTRO not in prompt
    question = next(m for m in ann.page() if m["type"] == "user_message")
    [record] = question["metadata"]["files"]
    assert set(record) == {"name", "type", "document", "whole"} and record["whole"] is True
    assert not any("4417" in str(data) for _event, data in ann.events[mark:])  # the text stays on the server
    files_sent = [data for event, data in ann.events[mark:] if event == "element" and data.get("name") == "note.txt"]
    assert len(files_sent) <= 1  # the file's element is not sent again with the question's update
    prompt, _ = await asked(ann, vllm, "Again?")  # a later turn reads it in the conversation, as before
    assert "The gate code is 4417." in prompt
    await ann.close()


@pytest.fixture(scope="module")
def embedding_stack(vllm: VllmServer) -> Iterator[tuple[ChatApp, VllmServer]]:
    """The app with an embedding model: a second vLLM serving the tiny model as one (random weights: its vectors
    rank by no meaning, but the requests, the vectors stored and the fusion are real)."""
    embedder = VllmServer("embed", max_model_len=2048, extra_args="--runner pooling --convert embed")
    app = ChatApp(vllm, extra_env={"EMBEDDINGS_URL": embedder.base_url, "EMBEDDINGS_API_KEY": embedder.api_key})
    with running(embedder, app):
        yield app, embedder


@pytest.mark.vllm
async def test_with_an_embedding_model_passages_are_ranked_by_both_and_keywords_still_win(embedding_stack, vllm):
    app, embedder = embedding_stack
    tab = await started_chat(app)
    manual = await attach(tab, "manual.pdf", english_manual(), "application/pdf")
    prompt, _ = await asked(tab, vllm, ENGLISH_QUESTION, (manual,))
    assert ENGLISH_NEEDLE in prompt  # the keyword search's best stays first in the fused ranking
    kept = await stored_documents(app)
    assert kept["embedded"] == kept["passages"] > 0  # every passage has its vector from the embedding model
    prompt, _ = await asked(tab, vllm, "Hallo?")  # no word of the manual: only the vectors find passages
    assert INTRO in prompt

    embedder.stop()  # the embedding model gone: the keyword search goes on alone
    prompt, _ = await asked(tab, vllm, ENGLISH_QUESTION)
    assert ENGLISH_NEEDLE in prompt
    await tab.close()


@pytest.fixture(scope="module")
def small_library_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """The app keeping 1 MB of documents a user, one a chat."""
    app = ChatApp(vllm, extra_env={"LIBRARY_MAX_MB": "1", "DOCUMENTS_PER_CHAT": "1"})
    with running(app):
        yield app


@pytest.mark.vllm
async def test_the_library_and_chat_limits_refuse_a_document_with_their_numbers(small_library_app, vllm):
    tab = await started_chat(small_library_app)
    before = len(vllm.logged_requests())
    big = await attach(tab, "big.txt", ("A line of a long file. " * 60_000).encode(), "text/plain")  # 1.4 MB
    refused = [m["output"] for m in await tab.ask("Summarize.", files=(big,)) if m.get("isError")]
    assert refused == [
        "big.txt would take your documents past 1 MB. Nothing was sent; delete documents you no longer need "
        "(the Documents button) and attach it again."
    ]
    assert len(vllm.logged_requests()) == before  # nothing reached the model
    manual = await attach(tab, "manual.pdf", english_manual(), "application/pdf")
    answer_of(await tab.ask(ENGLISH_QUESTION, files=(manual,)))
    second = await attach(tab, "second.pdf", english_manual(pages=20), "application/pdf")  # another text
    refused = [m["output"] for m in await tab.ask("And this one?", files=(second,)) if m.get("isError")]
    assert refused == [
        "second.pdf: this chat already searches 1 documents, as many as one chat may. Nothing was sent; start a "
        "new chat for it."
    ]
    await tab.close()


async def test_a_follow_up_prompt_begins_with_the_one_before_and_finds_it_in_the_cache(chat_app, vllm):
    tab = await started_chat(chat_app)
    manual = await attach(tab, "manual.pdf", english_manual(), "application/pdf")
    first, answer = await asked(tab, vllm, ENGLISH_QUESTION, (manual,))
    follow_up, later = await asked(tab, vllm, FOLLOW_UP)
    assert ENGLISH_NEEDLE in first and follow_up.startswith(first)  # its passages stay where they were
    assert follow_up.count(ENGLISH_NEEDLE) == 1  # and are not sent again
    before, after = answer["metadata"]["turn"]["stats"], later["metadata"]["turn"]["stats"]
    assert after["cached_tokens"] >= before["prompt_tokens"] // 2  # vLLM's usage: the previous prompt was reused
    await tab.close()
