"""Exports read into chats, built as each app documents its format: ChatGPT's conversations.json and its 2026 ZIP of
conversations-NNN.json files, Open WebUI's chat list, this app's own JSON; foreign, damaged, oversized files and ZIP
bombs refused with a sentence and nothing read."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import ImportRefused, Problem
from app.i18n import error_text
from app.imports.model import ImportedMessage, moment
from app.imports.read import Reason, Source, read_export
from app.imports.tree import ROOT, Node, build
from tests.support.exports import (
    START,
    ChatGPTConversation,
    branched_chatgpt,
    chatgpt_zip,
    message,
    open_webui_chat,
)

MB = 1_000_000


def read(tmp_path: Path, data: bytes | str, name: str = "export.json", most: int = 10 * MB):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return read_export(path, name, most)


def refused(tmp_path: Path, data: bytes | str, name: str = "export.json", most: int = 10 * MB) -> ImportRefused:
    with pytest.raises(ImportRefused) as caught:
        read(tmp_path, data, name, most)
    return caught.value


def outline(chat) -> list[tuple[str, str | None, str]]:
    return [(m.key, m.parent, m.content) for m in chat.messages]


def test_chatgpts_single_file_becomes_chats_with_their_versions_times_and_the_version_shown(tmp_path):
    conversation = branched_chatgpt()
    conversation.mapping["system"]["children"].insert(0, "context")  # custom instructions: hidden, never a message
    context = message("context", "user", {"content_type": "user_editable_context", "user_profile": "gardener"}, None)
    context["metadata"]["is_visually_hidden_from_conversation"] = True
    conversation.mapping["context"] = {"id": "context", "message": context, "parent": "system", "children": []}
    export = read(tmp_path, json.dumps([conversation.document()]), "conversations.json")
    assert export.source is Source.CHATGPT and export.skipped == []
    (chat,) = export.chats
    assert chat.name == "Tomatoes on a balcony"
    assert moment(chat.created_at).timestamp() == START and moment(chat.updated_at).timestamp() == START + 300
    assert outline(chat) == [
        ("q1", None, "How often should I water tomatoes on a balcony?"),
        ("a1", "q1", "Water them every morning (first version)."),
        ("a1b", "q1", "Water them when the top soil is dry (second version)."),
        ("q2", "a1", "And in a heat wave?"),
        ("a2", "q2", "Twice a day, early and late."),
    ]
    assert dict(chat.shown) == {"q1": "a1"}  # the current node follows the first version: it is shown, not the newest
    assert chat.versions == 1
    assert {m.model for m in chat.messages if m.role == "assistant"} == {"gpt-5"}  # 2026: no model_slug, the default
    assert [moment(m.created_at).timestamp() for m in chat.messages] == [START + 60 * n for n in range(1, 6)]


def test_chatgpts_2026_zip_of_split_files_is_read_in_order_whatever_else_it_holds(tmp_path):
    conversations = [branched_chatgpt(f"Chat {n}").document() for n in range(5)]
    export = read(tmp_path, chatgpt_zip(conversations, per_file=2, folder="export-2026/"), "chatgpt.zip")
    assert export.source is Source.CHATGPT
    assert [chat.name for chat in export.chats] == [f"Chat {n}" for n in range(5)]


def test_chatgpts_attachments_images_and_tool_calls(tmp_path):
    chat = ChatGPTConversation("Leaves")
    upload = message(
        "q1",
        "user",
        {
            "content_type": "multimodal_text",
            "parts": [
                {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-leaf1", "width": 640},
                {"content_type": "image_asset_pointer", "asset_pointer": "sediment://file_0002", "width": 640},
                "What is wrong with these leaves?",
            ],
        },
        START + 60,
    )
    upload["metadata"]["attachments"] = [
        {"id": "file-leaf1", "name": "leaf.jpg", "mime_type": "image/jpeg", "size": 5000},
        {"id": "file-notes", "name": "notes.pdf", "mime_type": "application/pdf", "size": 9000},
    ]
    chat.add("q1", "system", upload)
    call = message(
        "call", "assistant", {"content_type": "code", "language": "python", "text": "look(leaf)"}, START + 61
    )
    call["recipient"] = "python"  # a tool call: not an answer
    chat.add("call", "q1", call)
    tool = message("tool", "tool", {"content_type": "execution_output", "text": "spots"}, START + 62)
    chat.add("tool", "call", tool)
    chat.say("a1", "tool", "assistant", "Early blight.", model_slug="gpt-4o")
    chat.say("a1more", "a1", "assistant", "Remove the spotted leaves.")  # the answer goes on in a second node
    (imported,) = read(tmp_path, json.dumps([chat.document()])).chats
    question, answer = imported.messages
    assert question.content == "What is wrong with these leaves?"
    assert [(f.name, f.type) for f in question.files] == [
        ("leaf.jpg", "image/jpeg"),
        ("notes.pdf", "application/pdf"),
        ("image file_0002", "image"),
    ]
    assert imported.missing_files == ("leaf.jpg", "notes.pdf", "image file_0002")
    assert (answer.parent, answer.content) == ("q1", "Early blight.\n\nRemove the spotted leaves.")
    assert answer.model == "gpt-4o"


def test_open_webui_chats_with_branches_files_and_reasoning_left_out(tmp_path):
    turns = [
        {
            "id": "u1",
            "role": "user",
            "content": "Plan a week of dinners",
            "at": 1_700_000_000,
            "files": [
                {"type": "file", "name": "pantry.csv", "url": "/api/v1/files/abc"},
                {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="},
            ],
        },
        {
            "id": "b1",
            "parent": "u1",
            "role": "assistant",
            "at": 1_700_000_010,
            "model": "llama3.1:8b",
            "content": '<details type="reasoning" done="true"><summary>Thought</summary>hmm</details>\nMonday: soup.',
        },
        {"id": "b2", "parent": "u1", "role": "assistant", "at": 1_700_000_020, "content": "Monday: pasta."},
        {"id": "u2", "parent": "b1", "role": "user", "content": "Vegetarian please", "at": 1_700_000_030},
        {"id": "b3", "parent": "u2", "role": "assistant", "at": 1_700_000_040, "content": "Monday: lentils."},
    ]
    items = [open_webui_chat("Dinners", turns, current="b3"), open_webui_chat("Broken", turns, "b3", "w-2")]
    del items[1]["chat"]["history"]["messages"]
    export = read(tmp_path, json.dumps(items), "chat-export-1700000000.json")
    assert export.source is Source.OPEN_WEBUI
    assert [(s.name, s.reason) for s in export.skipped] == [("Broken", Reason.MALFORMED)]
    (chat,) = export.chats
    assert outline(chat) == [
        ("u1", None, "Plan a week of dinners"),
        ("b1", "u1", "Monday: soup."),
        ("b2", "u1", "Monday: pasta."),
        ("u2", "b1", "Vegetarian please"),
        ("b3", "u2", "Monday: lentils."),
    ]
    assert dict(chat.shown) == {"u1": "b1"} and chat.messages[1].model == "llama3.1:8b"
    assert [f.name for f in chat.messages[0].files] == ["pantry.csv", "image"]
    assert moment(chat.created_at).timestamp() == 1_700_000_000


def test_this_apps_own_export_is_read_with_files_stats_sources_and_errors(tmp_path):
    document: dict[str, Any] = {
        "id": "chat-1",
        "name": "Pumps",
        "project": "Garden",
        "created_at": "2026-02-01T10:00:00.000001Z",
        "settings": {
            "temperature": 0.3,
            "top_p": 0.9,
            "max_tokens": 64,
            "repetition_penalty": 1.0,
            "system_prompt": "",
        },
        "messages": [
            {
                "id": "q",
                "parent": None,
                "shown": True,
                "role": "user",
                "content": "Read this",
                "created_at": "2026-02-01T10:00:01.000001Z",
                "files": [{"name": "a.txt", "type": "text/plain", "text": "A"}],
            },
            {
                "id": "a",
                "parent": "q",
                "shown": False,
                "role": "assistant",
                "content": "",
                "created_at": "2026-02-01T10:00:02.000001Z",
                "ending": "failed",
                "model": "ernie",
                "stats": None,
                "error": "vLLM went away",
            },
            {
                "id": "b",
                "parent": "q",
                "shown": True,
                "role": "assistant",
                "content": "It says A [1]",
                "created_at": "2026-02-01T10:00:03.000001Z",
                "ending": "complete",
                "model": "ernie",
                "stats": {"tokens": 5},
                "sources": [{"passage": 1, "document": "a.txt", "page": None, "heading": ""}],
            },
        ],
    }
    export = read(tmp_path, json.dumps(document))
    (chat,) = export.chats
    assert export.source is Source.OWN and chat.project == "Garden" and chat.settings["temperature"] == 0.3
    question, failed, answer = chat.messages
    assert question.files[0].text == "A" and failed.error == "vLLM went away" and failed.ending == "failed"
    assert answer.stats == {"tokens": 5} and answer.sources[0]["document"] == "a.txt"
    assert [m.created_at for m in chat.messages] == [m["created_at"] for m in document["messages"]]  # as written
    assert dict(chat.shown) == {}  # the newest answer is the one shown: no choice to keep


def zipped(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "name", "problem"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "report.pdf", Problem.IMPORT_FOREIGN),
        ('{"model": "gpt-4", "temperature": 1}', "settings.json", Problem.IMPORT_FOREIGN),
        ('[{"question": "hi"}]', "list.json", Problem.IMPORT_FOREIGN),
        (zipped({"photos/cat.jpg": b"\xff\xd8\xff", "notes.txt": b"hi"}), "photos.zip", Problem.IMPORT_FOREIGN),
        ('[{"title": "cut', "conversations.json", Problem.IMPORT_DAMAGED),
        (chatgpt_zip([branched_chatgpt().document()])[:-40], "cut.zip", Problem.IMPORT_DAMAGED),
        ("[]", "conversations.json", Problem.IMPORT_EMPTY),
    ],
    ids=["pdf", "other-json", "other-list", "zip-without-conversations", "cut-json", "cut-zip", "empty"],
)
def test_a_foreign_damaged_or_empty_file_is_refused_with_a_sentence(tmp_path, data, name, problem):
    error = refused(tmp_path, data, name)
    assert error.problem is problem
    sentence = error_text("en", error)
    assert name in sentence and "Nothing was imported" in sentence
    assert "未导入任何内容" in error_text("zh", error)


def test_a_zip_bomb_stops_at_the_limit_whatever_the_zip_says_of_its_size(tmp_path):
    bomb = zipped({"conversations.json": b"[" + b" " * (50 * MB) + b"]"})
    assert len(bomb) < 100_000
    error = refused(tmp_path, bomb, "bomb.zip", most=MB)
    assert error.problem is Problem.IMPORT_TOO_BIG and "1 MB" in error_text("en", error)
    lying = bytearray(bomb)  # the central directory's size of the member says 10 bytes
    entry = lying.rfind(b"PK\x01\x02")
    lying[entry + 24 : entry + 28] = (10).to_bytes(4, "little")
    assert refused(tmp_path, bytes(lying), "bomb.zip", most=MB).problem in (
        Problem.IMPORT_TOO_BIG,
        Problem.IMPORT_DAMAGED,
    )


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path):
    conversations = json.dumps([branched_chatgpt().document()] * 40)
    assert refused(tmp_path, conversations, most=len(conversations) - 1).problem is Problem.IMPORT_TOO_BIG
    assert len(read(tmp_path, conversations, most=len(conversations)).chats) == 40


def test_a_conversation_without_its_tree_or_messages_is_skipped_by_name_and_the_rest_read(tmp_path):
    empty = ChatGPTConversation("Only a system prompt").document()
    broken = {"title": "Corrupted entry", "create_time": START}
    export = read(tmp_path, json.dumps([broken, branched_chatgpt().document(), empty]))
    assert [chat.name for chat in export.chats] == ["Tomatoes on a balcony"]
    assert [(s.name, s.reason) for s in export.skipped] == [
        ("Corrupted entry", Reason.MALFORMED),
        ("Only a system prompt", Reason.EMPTY),
    ]


# A random export tree: each node's parent among the nodes before it (or none), its role, its time (or none).
trees = st.lists(
    st.tuples(
        st.integers(min_value=-1, max_value=30),
        st.sampled_from(["user", "assistant", None]),
        st.one_of(st.none(), st.integers(min_value=0, max_value=50)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(trees, st.integers(min_value=0, max_value=30))
def test_any_tree_becomes_one_this_app_can_show(shape, current):
    parents = {f"n{i}": f"n{above % i}" if i and above >= 0 else None for i, (above, _, _) in enumerate(shape)}
    nodes = {
        key: Node(key, parents[key], [child for child, parent in parents.items() if parent == key], said)
        for index, (_, role, at) in enumerate(shape)
        for key in [f"n{index}"]
        for time in ["" if at is None else f"2026-01-01T00:00:{at:02d}.000000Z"]
        for said in [ImportedMessage(key, None, role, f"text {index}", time) if role else None]
    }
    tree = build(nodes, f"n{current}", "2026-01-01T00:00:00.000000Z")
    seen: dict[str, ImportedMessage] = {}
    for kept in tree.messages:
        if kept.parent is not None:
            assert kept.parent in seen  # what it follows comes first, earlier
            assert moment(seen[kept.parent].created_at) < moment(kept.created_at)
        if kept.role == "assistant":
            assert kept.parent is not None and seen[kept.parent].role == "user"  # an answer answers a question
        seen[kept.key] = kept
    times = [moment(m.created_at) for m in tree.messages]
    assert times == sorted(times) and len(set(times)) == len(times)  # the database reads them back in this order
    for parent, child in tree.shown.items():
        assert child in seen and (seen[child].parent or ROOT) == parent
    assert len(tree.messages) + tree.left_out <= sum(1 for _, role, _ in shape if role)
