"""Versions of answers and questions in the running app with the real vLLM: switched in place, prompted, kept."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest

from tests.support.chat_client import ChatClient, widget_values
from tests.support.history import answer_of, export, reopened_after_a_restart, started_chat
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import (
    as_prompt,
    branch,
    continue_in_a_new_chat,
    ids,
    newest_answer,
    position,
    regenerate,
    sent_prompt,
    switch,
)

pytestmark = pytest.mark.app


async def edit(tab: ChatClient, question_id: str, text: str) -> None:
    """Edit a question with the pencil; wait until its new answer is written."""
    mark = len(tab.events)
    await tab.edit(question_id, text)
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
    await asyncio.sleep(0.1)


async def test_regenerated_answers_are_versions_to_switch_between_and_continue_from(chat_app, vllm):
    tab = await started_chat(chat_app)
    await tab.change_settings({"temperature": 1.5, "system_prompt": "VERSIONS"})
    answer_of(await tab.ask("first question"))
    versions = [answer_of(await tab.ask("second question"))]
    for _ in range(2):
        versions.append(newest_answer(tab, await regenerate(tab)))
    assert len(set(ids(versions))) == 3
    assert ids(branch(tab))[-1] == versions[2]["id"] and len(branch(tab)) == 4
    assert position(tab, versions[2]["id"]) == (3, 3)
    line = tab.element("AnswerStats", versions[2]["id"])
    assert line is not None and line["versions"]["previous"] == versions[1]["id"] and "tokens" in line["text"]

    for at, version in ((2, versions[1]), (1, versions[0]), (3, versions[2]), (2, versions[1])):
        await switch(tab, version["id"])
        shown = branch(tab)
        assert len(shown) == 4 and shown[-1]["id"] == version["id"] and shown[-1]["output"] == version["output"]
        assert position(tab, version["id"]) == (at, 3)
        assert [a["name"] for a in tab.actions(version["id"])] == ["regenerate"]

    before = len(vllm.logged_requests())
    answer_of(await tab.ask("third question"))
    shown = branch(tab)
    assert ids(shown)[3] == versions[1]["id"]
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(shown[:-1], "VERSIONS"))

    # The history holds the branch shown, and every version for the JSON export.
    status, stored = await tab.rest("GET", f"/project/thread/{tab.thread_id_started}")
    assert status == 200 and ids([s for s in stored["steps"]]) == ids(shown)
    messages = json.loads(await export(tab, "export_json"))["messages"]
    second_question = shown[2]["id"]
    answers = [m for m in messages if m["parent"] == second_question]
    assert [m["id"] for m in answers] == ids(versions) and [m["shown"] for m in answers] == [False, True, False]
    await tab.close()


async def test_an_edited_question_is_a_version_beside_the_old_one_and_its_branch(chat_app, vllm):
    tab = await started_chat(chat_app)
    await tab.change_settings({"system_prompt": "EDITS"})
    edited = str(uuid.uuid4())
    for text, message_id in (("one", None), ("two", edited), ("three", None)):
        answer_of(await tab.ask(text, message_id=message_id))
    old = branch(tab)

    before = len(vllm.logged_requests())
    await edit(tab, edited, "two, edited")
    new = branch(tab)
    assert ids(new[:2]) == ids(old[:2]) and [m["output"] for m in new[2:3]] == ["two, edited"]
    assert len(new) == 4 and new[2]["id"] != edited
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(new[:3], "EDITS"))
    assert position(tab, new[2]["id"]) == (2, 2)

    await switch(tab, edited)
    assert ids(branch(tab)) == ids(old) and position(tab, edited) == (1, 2)
    before = len(vllm.logged_requests())
    answer_of(await tab.ask("four"))
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(branch(tab)[:-1], "EDITS"))
    await switch(tab, new[2]["id"])
    assert ids(branch(tab)) == ids(new)
    await tab.close()


def sent_after_the_answer_began(tab: ChatClient, question_id: str) -> bool:
    """Whether the question's line reached the page after its answer's first words, and only once."""
    events = list(enumerate(tab.events))
    lines = [at for at, (e, d) in events if e == "element" and d.get("forId") == question_id]
    answers = [d["id"] for _, (e, d) in events if e == "new_message" and (d.get("metadata") or {}).get("turn")]
    started = [at for at, (e, d) in events if e == "stream_start" and d["id"] in answers]
    return len(lines) == 1 and bool(started) and lines[0] > started[-1]


async def test_a_question_s_line_waits_until_its_answer_began_typed_or_edited(chat_app, vllm):
    """Nothing but the request to vLLM goes between a question and its answer's first token."""
    tab = await started_chat(chat_app)
    question = str(uuid.uuid4())
    answer_of(await tab.ask("one", message_id=question))
    line = tab.element("AnswerStats", question)
    assert line is not None and line["fork"]["payload"] == {"id": question}
    assert sent_after_the_answer_began(tab, question)
    await edit(tab, question, "one, edited")
    edited = branch(tab)[0]["id"]
    assert edited != question and position(tab, edited) == (2, 2)
    assert sent_after_the_answer_began(tab, edited)
    await tab.close()


async def test_a_stopped_version_is_what_the_model_sees_while_it_is_shown(chat_app, vllm):
    tab = await started_chat(chat_app)
    await tab.change_settings({"system_prompt": "STOPS"})
    first = answer_of(await tab.ask("tell me"))
    await tab.change_settings({"max_tokens": 2000})
    mark = await regenerate(tab, wait=False)
    await tab.wait_for(lambda: tab.events_since(mark, "stream_start"), 60)
    await tab.stop()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
    await asyncio.sleep(0.3)
    stopped = newest_answer(tab, mark)
    assert stopped["metadata"]["turn"]["ending"] == "stopped" and stopped["output"]
    await tab.change_settings({"max_tokens": 8})

    await switch(tab, first["id"])
    before = len(vllm.logged_requests())
    answer_of(await tab.ask("after the first version"))
    prompt = sent_prompt(vllm, before)
    assert prompt == vllm.render(as_prompt(branch(tab)[:-1], "STOPS")) and first["output"] in prompt

    await switch(tab, stopped["id"])
    assert ids(branch(tab)) == [branch(tab)[0]["id"], stopped["id"]]
    before = len(vllm.logged_requests())
    answer_of(await tab.ask("after the stopped one"))
    prompt = sent_prompt(vllm, before)
    assert prompt == vllm.render(as_prompt(branch(tab)[:-1], "STOPS")) and stopped["output"] in prompt
    await tab.close()


async def test_a_chat_reopens_after_a_restart_on_the_branch_last_shown_with_every_version(history_app, vllm):
    tab = await started_chat(history_app)
    await tab.change_settings({"system_prompt": "RESTARTS"})
    first_question = str(uuid.uuid4())
    answer_of(await tab.ask("one", message_id=first_question))
    older = answer_of(await tab.ask("two"))
    newer = newest_answer(tab, await regenerate(tab))
    await switch(tab, older["id"])  # an older version: the choice is stored
    answer_of(await tab.ask("three"))
    await edit(tab, first_question, "one, edited")
    await switch(tab, first_question)  # back to the old question: its branch as it was left
    shown = branch(tab)
    assert [m["output"] for m in shown[::2]] == ["one", "two", "three"] and shown[3]["id"] == older["id"]
    again = await reopened_after_a_restart(history_app, tab)
    assert ids(branch(again)) == ids(shown)
    await again.wait_for(lambda: position(again, older["id"]) is not None, 10)
    assert position(again, first_question) == (1, 2) and position(again, older["id"]) == (1, 2)
    assert "tokens" in (again.element("AnswerStats", older["id"]) or {}).get("text", "")

    await switch(again, newer["id"])  # every version is still there
    assert ids(branch(again)) == [*ids(shown[:3]), newer["id"]]
    before = len(vllm.logged_requests())
    answer_of(await again.ask("four"))
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(branch(again)[:-1], "RESTARTS"))
    await again.close()


async def test_nobody_else_can_switch_the_versions_of_my_chat(pair_app):
    ann = await started_chat(pair_app, credentials=("ann", "ann-password"))
    older = answer_of(await ann.ask("ann's question"))
    newer = newest_answer(ann, await regenerate(ann))
    thread_id = ann.thread_id_started
    await asyncio.sleep(0.3)
    ben = await started_chat(pair_app, credentials=("ben", "ben-password"))
    choice = {"name": "show_version", "payload": {"id": older["id"]}}
    # Through her tab (REST): her session is not his.
    assert (await ben.rest("POST", "/project/action", {"sessionId": ann.session_id, "action": choice}))[0] == 404
    # Through his own tab: her messages are not in his chat.
    assert (await ben.click(choice))[0] == 200
    await asyncio.sleep(0.3)
    status, stored = await ann.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200 and [s["id"] for s in stored["steps"]][-1] == newer["id"]
    assert f"Refused to show version {older['id']}: not a message of this chat" in pair_app.log_path.read_text()
    # Through a socket.io session of his own on her chat: it is refused at connect.
    ben.thread_id, ben.sio = thread_id, ben._new_socket()
    with pytest.raises(Exception, match=r"(?i)connect|refused|authori"):
        await ben.connect()
    await ann.close()


async def test_a_branch_continues_in_a_new_chat_with_its_settings_and_the_chat_stays_as_it_was(chat_app, vllm):
    tab = await started_chat(chat_app)
    await tab.change_settings({"system_prompt": "FORKS", "temperature": 0.3})
    answer_of(await tab.ask("one"))
    older = answer_of(await tab.ask("two"))
    newest_answer(tab, await regenerate(tab))
    await switch(tab, older["id"])
    answer_of(await tab.ask("three"))  # the chat goes on after the message it is continued from
    line = tab.element("AnswerStats", older["id"])
    assert line is not None and line["fork"]["payload"] == {"id": older["id"]}
    shown = branch(tab)
    await asyncio.sleep(0.3)  # the chat's last writes

    forked = await continue_in_a_new_chat(tab, older["id"])
    status, copy = await tab.rest("GET", f"/project/thread/{forked}")
    assert status == 200 and [s["output"] for s in copy["steps"]] == [m["output"] for m in shown[:4]]
    assert copy["metadata"]["chat_settings"]["system_prompt"] == "FORKS" and copy["name"] == "one (continued)"
    status, original = await tab.rest("GET", f"/project/thread/{tab.thread_id_started}")
    assert status == 200 and ids(original["steps"]) == ids(shown)
    from_question = await continue_in_a_new_chat(tab, shown[2]["id"])
    status, copy = await tab.rest("GET", f"/project/thread/{from_question}")
    assert status == 200 and [s["output"] for s in copy["steps"]] == ["one", shown[1]["output"], "two"]

    again = ChatClient(chat_app.url, thread_id=forked)  # the link opens the new chat, which goes on from there
    await again.connect()
    # Chainlit sends the chat after on_chat_resume (which sends the settings): what is asked before it lands
    # would vanish from the client's page.
    await again.wait_for(lambda: again.settings_widgets and any(e == "resume_thread" for e, _ in again.events), 30)
    assert widget_values(again.settings_widgets)["system_prompt"] == "FORKS"
    before = len(vllm.logged_requests())
    answer_of(await again.ask("four"))
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(branch(again)[:-1], "FORKS"))
    assert vllm.logged_requests()[-1]["temperature"] == "0.3"
    for open_tab in (tab, again):
        await open_tab.close()


@pytest.fixture(scope="module")
def no_history_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """The app with HISTORY=false."""
    app = ChatApp(vllm, extra_env={"HISTORY": "false"})
    with running(app):
        yield app


async def test_with_the_history_off_versions_live_in_the_tab_and_a_new_chat_says_it_needs_the_history(
    no_history_app, vllm
):
    tab = await started_chat(no_history_app)
    await tab.change_settings({"system_prompt": "NO-HISTORY"})
    first = answer_of(await tab.ask("one"))
    second = newest_answer(tab, await regenerate(tab))
    assert position(tab, second["id"]) == (2, 2)
    line = tab.element("AnswerStats", second["id"])
    assert line is not None and line["exports"] == [] and line["fork"] is None  # no history: no such buttons
    await switch(tab, first["id"])
    before = len(vllm.logged_requests())
    answer_of(await tab.ask("two"))
    assert sent_prompt(vllm, before) == vllm.render(as_prompt(branch(tab)[:-1], "NO-HISTORY"))
    mark = len(tab.events)
    status, _ = await tab.click({"name": "fork", "payload": {"id": first["id"]}})
    assert status == 200
    await tab.wait_for(lambda: any("HISTORY=false" in m["output"] for m in tab.events_since(mark, "new_message")), 10)
    await tab.close()
