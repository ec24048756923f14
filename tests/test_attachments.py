"""Attached files read into text for the model: text, PDF, and every file it cannot read, named (no server)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from app.chat.attachments import (
    FILES_KEY,
    Attachment,
    Upload,
    UploadLimits,
    as_seen,
    compose,
    overflowing,
    read_all,
    with_files,
)
from app.chat.workers import in_worker
from app.errors import ChatError, Problem
from tests.support.fake_openai import counted
from tests.support.pdfs import paged_pdf, pdf

LIMITS = UploadLimits(frozenset({".txt", ".md", ".csv", ".json", ".py", ".pdf"}), max_files=3, max_bytes=1000)


def upload(tmp_path: Path, name: str, data: bytes, mime: str = "text/plain") -> Upload:
    path = tmp_path / name
    path.write_bytes(data)
    return Upload(name, mime, path)


def refusal(uploads: list[Upload]) -> ChatError:
    with pytest.raises(ChatError) as refused:
        read_all(uploads, LIMITS)
    return refused.value


def test_text_files_are_read_as_utf8(tmp_path):
    files = read_all(
        [
            upload(tmp_path, "notes.txt", "café ☕\n".encode()),
            upload(tmp_path, "bom.md", b"\xef\xbb\xbf# Title\n", "text/markdown"),
            upload(tmp_path, "data.csv", b"a,b\n1,2\n", "text/csv"),
        ],
        LIMITS,
    )
    assert [(f.name, f.text) for f in files] == [
        ("notes.txt", "café ☕\n"),
        ("bom.md", "# Title\n"),
        ("data.csv", "a,b\n1,2\n"),
    ]


def test_a_pdf_gives_the_text_of_its_pages(tmp_path):
    made = pdf("The quokka sleeps at noon (mostly).")
    [file] = read_all([upload(tmp_path, "paper.pdf", made, "application/pdf")], LIMITS)
    assert file.text == "The quokka sleeps at noon (mostly)." and file.type == "application/pdf"


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", Problem.FILE_NOT_TEXT),
        ("latin1.txt", "café".encode("latin-1"), Problem.FILE_NOT_TEXT),
        ("tool.exe", b"MZ", Problem.FILE_TYPE),
        ("big.txt", b"x" * 1001, Problem.FILE_TOO_BIG),
        ("secret.pdf", pdf("hidden", password="pw"), Problem.FILE_ENCRYPTED),
        ("scan.pdf", pdf(image=True), Problem.FILE_NO_TEXT),
        ("fake.pdf", b"%PDF-1.7 nothing else", Problem.FILE_NOT_PDF),
    ],
)
def test_a_file_the_model_cannot_read_is_refused_by_name(tmp_path, name, data, problem):
    refused = refusal([upload(tmp_path, "fine.txt", b"fine"), upload(tmp_path, name, data)])
    assert refused.problem is problem and refused.details["name"] == name


async def test_a_file_past_the_page_or_character_limit_is_refused_by_the_worker_with_the_limit(tmp_path):
    limits = UploadLimits(frozenset({".txt", ".pdf"}), max_files=1, max_bytes=100_000, max_pages=2, max_characters=50)
    book = paged_pdf([["page one"], ["page two"], ["page three"]])
    with pytest.raises(ChatError) as pages:  # read in a worker process, as the app reads uploads
        await in_worker(read_all, [upload(tmp_path, "book.pdf", book, "application/pdf")], limits)
    assert (pages.value.problem, pages.value.details) == (
        Problem.FILE_TOO_MANY_PAGES,
        {"name": "book.pdf", "pages": 3, "limit": 2},
    )
    with pytest.raises(ChatError) as text:
        read_all([upload(tmp_path, "long.txt", b"x" * 51)], limits)
    assert (text.value.problem, text.value.details) == (Problem.FILE_TOO_MUCH_TEXT, {"name": "long.txt", "limit": 50})


async def test_a_worker_that_dies_reading_is_said_and_the_next_file_is_read_by_a_new_one(tmp_path):
    with pytest.raises(ChatError) as stopped:
        await in_worker(os._exit, 1)  # what the kernel's OOM killer leaves behind
    assert stopped.value.problem is Problem.READER_STOPPED
    [note] = await in_worker(read_all, [upload(tmp_path, "note.txt", b"fine")], LIMITS)
    assert note.text == "fine"


def test_more_files_than_allowed_are_refused(tmp_path):
    refused = refusal([upload(tmp_path, f"{i}.txt", b"x") for i in range(4)])
    assert refused.problem is Problem.TOO_MANY_FILES and refused.details == {"limit": 3}


def test_each_file_is_under_its_name_in_a_fence_nothing_in_it_closes():
    files = [Attachment("a.md", "text/markdown", "```\nnot the end\n````"), Attachment("b\nFile: x.txt", "", "b")]
    seen = compose(files, "What is in them?")
    assert seen == (
        "File: a.md\n`````\n```\nnot the end\n````\n`````\n\nFile: b File: x.txt\n```\nb\n```\n\nWhat is in them?"
    )
    assert compose(files[:1], "") == "File: a.md\n`````\n```\nnot the end\n````\n`````"


def test_a_question_carries_exactly_its_files():
    forged = {"follows": "x", FILES_KEY: [{"name": "forged", "text": "forged"}]}
    assert with_files(forged, []) == {"follows": "x"}
    kept = with_files(forged, [Attachment("a.txt", "text/plain", "A")])
    assert kept == {"follows": "x", FILES_KEY: [{"name": "a.txt", "type": "text/plain", "text": "A"}]}
    assert as_seen({"output": "Q", "metadata": kept}) == "File: a.txt\n```\nA\n```\n\nQ"
    assert as_seen({"output": "Q", "metadata": {FILES_KEY: "garbage"}}) == "Q"


def test_the_file_that_does_not_fit_is_named_with_its_tokens_and_the_room_it_had():
    files = [Attachment("small.txt", "", "w " * 10), Attachment("large.txt", "", "w " * 100)]
    alone = asyncio.run(counted([{"role": "user", "content": "Q"}]))
    with_small = asyncio.run(counted([{"role": "user", "content": compose(files[:1], "Q")}]))
    with_both = asyncio.run(counted([{"role": "user", "content": compose(files, "Q")}]))
    refused = asyncio.run(overflowing(files, "Q", "", with_both - 1, counted))
    assert refused is not None and refused.problem is Problem.FILE_TOO_LONG
    assert refused.details == {
        "name": "large.txt",
        "tokens": with_both - with_small,
        "room": with_both - 1 - with_small,
    }
    assert asyncio.run(overflowing(files, "Q", "", alone - 1, counted)) is None  # the typed text alone is too long
