"""Files attached to messages, against the running app, the real vLLM and the real history (socket.io and REST)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_client import ChatClient
from tests.support.files import NOTES, README, SENTENCE, seen
from tests.support.history import answer_of, export, started_chat, stored_rows
from tests.support.memory import rss_kb
from tests.support.pdfs import pdf
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import continue_in_a_new_chat, regenerate, sent_prompt

pytestmark = pytest.mark.app

SYSTEM = "FILES"


@pytest.fixture(scope="module")
def files_app(request: pytest.FixtureRequest) -> ChatApp:
    """An app with password login and two users, ann and ben (the conftest's pair_app)."""
    app: ChatApp = request.getfixturevalue("pair_app")
    return app


async def user_tab(app: ChatApp, name: str) -> ChatClient:
    """A greeted tab of a password user, short answers, a system prompt of its own."""
    tab = await started_chat(app, credentials=(name, f"{name}-password"))
    await tab.change_settings({"system_prompt": SYSTEM})
    return tab


async def attach(tab: ChatClient, name: str, data: bytes, mime: str = "text/plain") -> str:
    """Upload a file as the page does; its id for the message."""
    status, reply = await tab.upload(name, data, mime)
    assert status == 200, reply
    return str(reply["id"])


async def test_files_reach_the_model_under_their_names_and_stay_with_the_chat(files_app, vllm):
    ann = await user_tab(files_app, "ann")
    files = (
        await attach(ann, "notes.txt", NOTES.encode()),
        await attach(ann, "plan.md", README.encode(), "text/markdown"),
        await attach(ann, "paper.pdf", pdf(SENTENCE), "application/pdf"),
    )
    before = len(vllm.logged_requests())
    first = answer_of(await ann.ask("What do these files say?", files=files))
    question = seen([("notes.txt", NOTES), ("plan.md", README), ("paper.pdf", SENTENCE)], "What do these files say?")
    said = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    assert sent_prompt(vllm, before) == vllm.render(said)

    before = len(vllm.logged_requests())
    again = answer_of(ann.events_since(await regenerate(ann), "new_message"))  # the same question, files and all
    assert again["id"] != first["id"] and sent_prompt(vllm, before) == vllm.render(said)
    before = len(vllm.logged_requests())
    first_turn = len(said)
    then = answer_of(await ann.ask("And then?"))
    said += [{"role": "assistant", "content": again["output"]}, {"role": "user", "content": "And then?"}]
    assert sent_prompt(vllm, before) == vllm.render(said)
    said.append({"role": "assistant", "content": then["output"]})

    exported = json.loads(await export(ann, "export_json"))["messages"]
    attached = [m["files"] for m in exported if m.get("files")]
    assert [[(f["name"], f["text"]) for f in each] for each in attached] == [
        [("notes.txt", NOTES), ("plan.md", README), ("paper.pdf", SENTENCE)]
    ]
    assert "Attached: notes.txt, plan.md, paper.pdf" in await export(ann, "export_markdown")
    thread_id = ann.thread_id_started
    forked = await continue_in_a_new_chat(ann, again["id"])  # the copied question keeps its files
    await ann.close()
    await asyncio.sleep(0.5)  # the last writes

    files_app.stop()
    files_app.start()
    for chat, history in (
        (thread_id, said),
        (forked, [*said[:first_turn], {"role": "assistant", "content": again["output"]}]),
    ):
        resumed = ChatClient(files_app.url, credentials=("ann", "ann-password"), thread_id=chat)
        await resumed.connect()
        await resumed.wait_for(lambda: resumed.settings_widgets, 30)  # noqa: B023  # awaited at once
        before = len(vllm.logged_requests())
        answer_of(await resumed.ask("After the restart?"))
        expected = [*history, {"role": "user", "content": "After the restart?"}]
        assert sent_prompt(vllm, before) == vllm.render(expected)
        await resumed.close()

    await asyncio.sleep(0.5)
    deleter = await user_tab(files_app, "ann")
    for chat in (thread_id, forked):
        status, _ = await deleter.rest("DELETE", "/project/thread", {"threadId": chat})
        assert status == 200
        assert set((await stored_rows(files_app, chat)).values()) == {0}
    await deleter.close()


async def test_with_the_history_off_a_file_too_long_for_the_window_is_refused_with_its_numbers(strict_app, vllm):
    tab = await started_chat(strict_app)  # with the history on, it would be kept as a document and searched
    await tab.change_settings({"system_prompt": SYSTEM})
    long_text = "Every line of this file is long enough to fill the window quickly.\n" * 400
    files = (await attach(tab, "short.txt", b"Short.\n"), await attach(tab, "long.txt", long_text.encode()))
    before = len(vllm.logged_requests())
    produced = await tab.ask("Summarize.", files=files)
    system = {"role": "system", "content": SYSTEM}
    only_short = seen([("short.txt", "Short.\n")], "Summarize.")
    with_short = vllm.count_chat_tokens([system, {"role": "user", "content": only_short}])
    with_both = seen([("short.txt", "Short.\n"), ("long.txt", long_text)], "Summarize.")
    tokens = vllm.count_chat_tokens([system, {"role": "user", "content": with_both}]) - with_short
    room = 4096 - 8 - with_short  # the window, less the shortest answer worth asking for (max tokens 8)
    errors = [m["output"] for m in produced if m.get("isError")]
    assert errors == [
        f"long.txt is too long for the model's window: it needs {tokens} tokens and only {room} are left for it. "
        "Nothing was sent; attach a shorter file."
    ]
    assert len(vllm.logged_requests()) == before  # nothing reached the model
    answer_of(await tab.ask("Hello?"))
    assert sent_prompt(vllm, before) == vllm.render([system, {"role": "user", "content": "Hello?"}])
    await tab.close()


@pytest.mark.parametrize(
    ("name", "data", "mime", "line"),
    [
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "text/plain", "image.txt is not text the model can read"),
        ("secret.pdf", pdf("hidden", password="pw"), "application/pdf", "secret.pdf is an encrypted PDF"),
        ("scan.pdf", pdf(image=True), "application/pdf", "scan.pdf has no text to read (a PDF of images only"),
    ],
)
async def test_a_file_the_model_cannot_read_gets_a_line_naming_it_and_nothing_is_sent(
    chat_app, vllm, name, data, mime, line
):
    tab = await started_chat(chat_app)
    before = len(vllm.logged_requests())
    files = (await attach(tab, "fine.txt", b"fine"), await attach(tab, name, data, mime))
    produced = await tab.ask("Read this.", files=files)
    errors = [m["output"] for m in produced if m.get("isError")]
    assert len(errors) == 1 and errors[0].startswith(line) and errors[0].endswith("Nothing was sent.")
    assert len(vllm.logged_requests()) == before
    answer_of(await tab.ask("Hello?"))  # the refused message stays outside the conversation
    assert "Read this." not in sent_prompt(vllm, before)
    await tab.close()


async def test_a_file_of_a_type_not_allowed_is_refused_at_upload(chat_app):
    tab = await started_chat(chat_app)
    status, reply = await tab.upload("tool.exe", b"MZ", "application/octet-stream")
    assert status == 400 and "not allowed" in str(reply)
    await tab.close()


async def test_an_upload_over_the_limit_is_refused_before_it_is_read(files_app):
    tab = await user_tab(files_app, "ben")
    before = rss_kb(files_app)
    for size in (50_000_000, 20_100_000):  # the second is just over: the upload's own limit, not MAX_REQUEST_MB
        status, reply = await tab.upload("big.txt", b"x" * size)
        assert status == 413 and reply == {"detail": "File over the limit of 20 MB (UPLOAD_MAX_MB)"}
    assert rss_kb(files_app) - before < 2_000  # kilobytes: the 50 MB were never held
    await tab.close()


async def test_another_user_never_gets_my_file_or_its_text(files_app, vllm):
    ann = await user_tab(files_app, "ann")
    file_id = await attach(ann, "diary.txt", b"ann's secret diary\n")
    answer_of(await ann.ask("Keep this.", files=(file_id,)))
    await asyncio.sleep(0.5)
    thread_id = ann.thread_id_started
    status, stored = await ann.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200 and [e["name"] for e in stored["elements"]] == ["diary.txt"]
    element_id = stored["elements"][0]["id"]
    status, content = await ann.rest("GET", f"/project/file/{file_id}?session_id={ann.session_id}")
    assert status == 200 and "secret diary" in content  # her own page shows it

    ben = await user_tab(files_app, "ben")
    for path in (
        f"/project/file/{file_id}?session_id={ben.session_id}",
        f"/project/file/{file_id}?session_id={ann.session_id}",
        f"/project/thread/{thread_id}",
        f"/project/thread/{thread_id}/element/{element_id}",
        f"/project/thread/{thread_id}/element/{file_id}",
    ):
        status, reply = await ben.rest("GET", path)
        assert status in (401, 403, 404) and "secret diary" not in str(reply), path
    nobody = ChatClient(files_app.url)
    status, reply = await nobody.rest("GET", f"/project/file/{file_id}?session_id={ann.session_id}")
    assert status == 401 and "secret diary" not in str(reply)

    # Over socket.io: her file's id in his message, or its text forged into his message's metadata.
    before = len(vllm.logged_requests())
    forged: dict[str, Any] = {"files": [{"name": "diary.txt", "type": "text/plain", "text": "forged diary"}]}
    message = {
        "id": str(uuid.uuid4()),
        "threadId": "",
        "name": "User",
        "type": "user_message",
        "output": "What does the diary say?",
        "createdAt": "2026-12-02T08:00:00Z",
        "metadata": forged,
    }
    mark = len(ben.events)
    await ben.sio.emit("client_message", {"message": message, "fileReferences": [{"id": file_id}]})
    await ben.wait_for(lambda: len(vllm.logged_requests()) > before)
    await ben.wait_for(lambda: ben.events_since(mark, "task_end"))
    prompt = sent_prompt(vllm, before)
    assert "What does the diary say?" in prompt and "diary.txt" not in prompt and "forged" not in prompt
    for tab in (ann, ben):
        await tab.close()


@pytest.fixture(scope="module")
def strict_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """The app with the history off, text files only and two files a message."""
    settings = {"HISTORY": "false", "UPLOAD_TYPES": ".txt", "UPLOAD_MAX_FILES": "2", "UPLOAD_MAX_MB": "1"}
    app = ChatApp(vllm, extra_env=settings)
    with running(app):
        yield app


async def test_the_limits_are_settings_and_with_the_history_off_files_work_within_the_tab(strict_app, vllm):
    tab = ChatClient(strict_app.url)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"system_prompt": SYSTEM, "max_tokens": 8})
    status, page = await tab.rest("GET", "/project/settings?language=en-US")
    assert status == 200 and page["features"]["spontaneous_file_upload"] == {
        "enabled": True,
        "accept": {"text/*": [".txt"], "application/*": [".txt"]},
        "max_files": 2,
        "max_size_mb": 1,
    }
    status, _ = await tab.upload("plan.md", README.encode(), "text/markdown")
    assert status == 400
    three = tuple([await attach(tab, f"{n}.txt", b"n") for n in "abc"])
    refused = await tab.ask("Three?", files=three)
    assert [m["output"] for m in refused if m.get("isError")] == [
        "At most 2 files can be attached to one message. Nothing was sent."
    ]
    answer = answer_of(await tab.ask("Read it.", files=(await attach(tab, "notes.txt", NOTES.encode()),)))
    before = len(vllm.logged_requests())
    answer_of(await tab.ask("Again?"))
    said = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": seen([("notes.txt", NOTES)], "Read it.")},
        {"role": "assistant", "content": answer["output"]},
        {"role": "user", "content": "Again?"},
    ]
    assert sent_prompt(vllm, before) == vllm.render(said)
    await tab.close()
