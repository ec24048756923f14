"""Versions of messages: the tree, the branch shown, what the model sees and what is exported (no server)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from app.chat.attachments import attachments_of
from app.chat.branches import (
    FOLLOWS,
    NOT_SENT,
    ROOT,
    Answer,
    Branches,
    answer_of,
    branches_of,
    conversation_before,
    conversation_of,
    is_question,
)
from app.chat.conversation import Ending, Turn
from app.chat.preferences import Preferences
from app.history.rows import step_dict, step_row
from app.history.transcript import SHOWN_KEY, export_json, export_markdown, on_screen

PREFS = Preferences(temperature=0.5, top_p=1.0, max_tokens=64, repetition_penalty=1.0, system_prompt="")


def question(step_id: str, text: str, **metadata: Any) -> dict[str, Any]:
    """A question as stored; `follows` in metadata says where it stands (absent: stored before versions)."""
    return {"id": step_id, "type": "user_message", "output": text, "metadata": metadata, "createdAt": step_id}


def answer(step_id: str, reply_to: str, text: str, ending: str = "complete", error: bool = False) -> dict[str, Any]:
    """An answer of ours (or the error that took its place) as stored."""
    metadata = Answer(reply_to, ending).as_metadata()
    return {
        "id": step_id,
        "type": "assistant_message",
        "output": text,
        "isError": error,
        "metadata": metadata,
        "createdAt": step_id,
    }


def notice(step_id: str, text: str) -> dict[str, Any]:
    """A message shown but outside the conversation (Chainlit's stop notice, a refusal)."""
    return {"id": step_id, "type": "assistant_message", "output": text, "metadata": {}, "createdAt": step_id}


# Oldest first: q2 answered, regenerated twice (a2, a2b, a2c), continued after a2b, then edited (q2x).
CHAT = [
    question("01-q1", "one", follows=ROOT),
    answer("02-a1", "01-q1", "first"),
    question("03-q2", "two", follows="02-a1"),
    answer("04-a2", "03-q2", "second"),
    notice("05-stop", "Task manually stopped."),
    answer("06-a2b", "03-q2", "second again", "stopped"),
    question("07-q3", "three", follows="06-a2b"),
    answer("08-a3", "07-q3", "third"),
    answer("09-a2c", "03-q2", "", "failed", error=True),
    question("10-refused", "while busy", follows=None),
    notice("11-busy", "Still answering"),
    question("12-q2x", "two, edited", follows="02-a1"),
    answer("13-a2x", "12-q2x", "second, edited"),
]


def test_a_new_version_is_shown_and_each_keeps_what_followed_it():
    tree = Branches()
    for step, parent in (
        (question("q1", "one"), ROOT),
        (answer("a1", "q1", "first"), "q1"),
        (question("q2", "two"), "a1"),
        (answer("a2", "q2", "second"), "q2"),
        (question("q3", "three"), "a2"),
        (answer("a2b", "q2", "second again"), "q2"),
    ):
        tree.add(step, parent)
    assert tree.path() == ["q1", "a1", "q2", "a2b"] and tree.leaf() == "a2b"
    assert tree.versions("a2") == ["a2", "a2b"] and tree.versions("q2") == ["q2"]
    assert tree.select("a2") and tree.path() == ["q1", "a1", "q2", "a2", "q3"] and tree.shown == {"q2": "a2"}
    assert not tree.select("a2")  # already shown
    tree.add(question("q2x", "two, edited"), "a1")
    assert tree.select("q2x") is False and tree.path() == ["q1", "a1", "q2x"]  # the newest needs no choice
    assert tree.versions("q2") == ["q2", "q2x"] and tree.last_question() == "q2x"
    assert tree.select("q2") and tree.path() == ["q1", "a1", "q2", "a2", "q3"]  # a2 was chosen there before
    assert tree.select("a2b") and tree.shown == {"a1": "q2"}  # back to the newest: no choice kept for it
    assert tree.up_to("q3") == ["q1", "a1", "q2", "a2", "q3"] and tree.up_to(ROOT) == []


def test_a_live_chat_holds_its_text_as_the_history_keeps_it_so_a_resumed_one_sends_the_same_prompt():
    live = Branches()
    live.add(question("q1", "Hel\x00lo"), ROOT)  # an API client may send a NUL, a tiny model emits one
    live.add(answer("a1", "q1", "the\x00re\x00"), "q1")
    live.add(question("q2", "again"), "a1")
    stored = [step_dict({**step_row(live.steps[i]), "feedback_id": None}) for i in live.path()]  # type: ignore[arg-type]
    resumed = branches_of(stored, {})
    assert conversation_before(live, "q2") == conversation_before(resumed, "q2")
    assert [live.steps[i]["output"] for i in live.path()] == ["Hello", "there", "again"]


def test_a_stored_chat_opens_on_the_branch_chosen_with_each_notice_where_it_was_said():
    newest = branches_of(CHAT, {})
    assert newest.path() == ["01-q1", "02-a1", "12-q2x", "13-a2x"]
    assert newest.versions("03-q2") == ["03-q2", "12-q2x"]
    assert newest.versions("04-a2") == ["04-a2", "06-a2b", "09-a2c"]
    assert "10-refused" not in newest.steps and "05-stop" not in newest.steps
    chosen = {"02-a1": "03-q2", "03-q2": "06-a2b"}
    assert [s["id"] for s in on_screen(CHAT, chosen)] == ["01-q1", "02-a1", "03-q2", "06-a2b", "07-q3", "08-a3"]
    # The stop notice was said after a2 (not shown), the refusal after a2c: each is shown with its branch.
    assert [s["id"] for s in on_screen(CHAT, {"02-a1": "03-q2", "03-q2": "04-a2"})] == [
        "01-q1",
        "02-a1",
        "03-q2",
        "04-a2",
        "05-stop",
    ]
    assert [s["id"] for s in on_screen(CHAT, {"02-a1": "03-q2"})][-3:] == ["09-a2c", "10-refused", "11-busy"]


def test_the_model_sees_the_branch_leading_to_the_question():
    tree = branches_of(CHAT, {"02-a1": "03-q2", "03-q2": "06-a2b"})
    assert conversation_before(tree, "07-q3").turns == [
        Turn("one", "first", Ending.COMPLETE, "01-q1"),
        Turn("two", "second again", Ending.STOPPED, "03-q2"),
    ]
    assert conversation_before(tree, "12-q2x").turns == [Turn("one", "first", Ending.COMPLETE, "01-q1")]
    failed = branches_of(CHAT, {"02-a1": "03-q2"})  # the newest answer to q2 is the failed one
    last = conversation_of([failed.steps[i] for i in failed.path()]).turns[-1]
    assert last == Turn("two", "", Ending.FAILED, "03-q2")


def test_an_answer_cut_off_by_the_app_stopping_is_seen_by_the_model_next_as_a_stopped_one_is():
    said = [question("1", "one", follows=ROOT), answer("2", "1", "half an", "cut_off"), question("3", "two")]
    stopped = [*said[:1], answer("2", "1", "half an", "stopped"), *said[2:]]
    cut, kept = conversation_before(branches_of(said, {}), "3"), conversation_before(branches_of(stopped, {}), "3")
    assert cut.turns == [Turn("one", "half an", Ending.CUT_OFF, "1")]
    assert cut.messages("", "two") == kept.messages("", "two")


def test_exports_say_an_answer_was_cut_off():
    steps = [question("1", "one", follows=ROOT), answer("2", "1", "half an", "cut_off")]
    thread = {"id": "t", "name": "Cut", "createdAt": "00", "metadata": {}, "steps": steps}
    assert json.loads(export_json(thread, PREFS))["messages"][1]["ending"] == "cut_off"
    assert "## ERNIE (2, cut off)" in export_markdown(thread, PREFS, {"user": "You", "assistant": "ERNIE"})


def test_a_chat_stored_before_versions_is_one_line_as_it_was():
    old = [
        question("1", "one"),
        answer("2", "1", "first"),
        question("3", "cut by a crash"),
        question("4", "two"),
        notice("5", "Task manually stopped."),
        answer("6", "4", "second", "stopped"),
        question("7", "names a message that is gone", follows="no-such-message"),
    ]
    tree = branches_of(old, {})
    assert tree.path() == ["1", "2", "3", "4", "6", "7"]
    assert [s["id"] for s in on_screen(old, {})] == ["1", "2", "3", "4", "5", "6", "7"]


def test_json_export_holds_every_version_with_its_parent_and_markdown_the_branch_shown():
    thread = {"id": "t", "name": "Versions", "createdAt": "00", "steps": CHAT, "metadata": {}}
    chosen = {**thread, "metadata": {SHOWN_KEY: {"02-a1": "03-q2", "03-q2": "04-a2"}}}
    messages = json.loads(export_json(chosen, PREFS))["messages"]
    assert [(m["id"], m["parent"], m["shown"]) for m in messages] == [
        ("01-q1", None, True),
        ("02-a1", "01-q1", True),
        ("03-q2", "02-a1", True),
        ("04-a2", "03-q2", True),
        ("06-a2b", "03-q2", False),
        ("07-q3", "06-a2b", False),
        ("08-a3", "07-q3", False),
        ("09-a2c", "03-q2", False),
        ("12-q2x", "02-a1", False),
        ("13-a2x", "12-q2x", False),
    ]
    assert messages[7]["content"] == "" and messages[7]["ending"] == "failed"
    markdown = export_markdown(chosen, PREFS, {"user": "You", "assistant": "ERNIE"})
    said = ("one", "first", "two", "second")
    positions = [markdown.index(f"\n\n{text}\n") for text in said]
    assert positions == sorted(positions)
    assert "again" not in markdown and "edited" not in markdown and "three" not in markdown
    assert "edited" in export_markdown(thread, PREFS, {"user": "You", "assistant": "ERNIE"})


def test_a_question_stored_outside_the_conversation_stays_out():
    refused = question("r", "while busy", **{FOLLOWS: None})
    tree = branches_of([question("1", "one", follows=ROOT), refused, question("2", "two")], {})
    assert tree.path() == ["1", "2"]


def test_the_exports_name_the_chats_project():
    thread = {"id": "t1", "name": "Tomatoes", "createdAt": "2026-12-04", "steps": [], "metadata": {}}
    assert json.loads(export_json(thread, PREFS, "Garden"))["project"] == "Garden"
    assert '- project: "Garden"' in export_markdown(thread, PREFS, {"user": "You", "assistant": "ERNIE"}, "Garden")
    assert json.loads(export_json(thread, PREFS))["project"] is None


class GrowingChat(RuleBasedStateMachine):
    """Messages added and versions chosen in any order: what a tree remembers is what it would find afresh."""

    def __init__(self) -> None:
        super().__init__()
        self.tree = Branches()
        self.questions: list[str] = []

    @rule(parent=st.integers(min_value=0), text=st.text(max_size=3))
    def ask(self, parent: int, text: str) -> None:
        answers = [i for i in self.tree.steps if not is_question(self.tree.steps[i])]
        follows = answers[parent % len(answers)] if answers and parent % (len(answers) + 1) else ROOT
        step_id = f"q{len(self.tree.steps)}"
        self.tree.add(question(step_id, text, follows=follows), follows)
        self.questions.append(step_id)

    @precondition(lambda self: self.questions)
    @rule(which=st.integers(min_value=0), ending=st.sampled_from(["complete", "stopped", "failed", NOT_SENT]))
    def reply(self, which: int, ending: str) -> None:
        reply_to = self.questions[which % len(self.questions)]
        self.tree.add(answer(f"a{len(self.tree.steps)}", reply_to, "said", ending), reply_to)

    @precondition(lambda self: self.tree.steps)
    @rule(which=st.integers(min_value=0))
    def choose(self, which: int) -> None:
        self.tree.select(list(self.tree.steps)[which % len(self.tree.steps)])

    @invariant()
    def remembers_what_it_would_find_afresh(self) -> None:
        afresh = Branches(dict(self.tree.steps), dict(self.tree.parents), dict(self.tree.shown))
        for step_id, step in self.tree.steps.items():
            afresh._children.setdefault(self.tree.parents[step_id], []).append(step_id)
            assert self.tree.answer(step_id) == answer_of(step)
            assert self.tree.read(step_id, attachments_of) == attachments_of(step)
        assert self.tree.path() == afresh.path()
        for question_id in self.questions:
            branch = [self.tree.steps[i] for i in self.tree.up_to(self.tree.parents[question_id])]
            assert conversation_before(self.tree, question_id) == conversation_of(branch)


GrowingChat.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_a_growing_chat_remembers_what_it_would_find_afresh = GrowingChat.TestCase
