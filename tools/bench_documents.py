"""`make bench-documents`: the first token of a question about a long document, from its passages and cut to fit.

Both sides ask the same questions against one model server, each for a needle sentence on another page, the pages
spread evenly from the first to the last of a long PDF. From passages: the app (history on) keeps the uploaded PDF as
a document and sends each question with the passages it finds best, at most DOCUMENT_SHARE of the prompt's room. Cut
to fit by hand: the same text cut to its first characters that fit the window whole with the question and the answer
(counted by vLLM's /tokenize), uploaded as a text file to an app with the history off, which refuses a file too long
rather than searching it, so the cut is read whole or not at all. Per question: the time to the first token the app
measured (from its request to vLLM: keeping the upload, the search and the token counts come before it), the
prompt's tokens, those the server found in its prefix cache, and whether the needle reached the model (in the prompt
vLLM logged).

Each question is asked in a new chat of its own with its file uploaded for it, under a system prompt of its own: each
is a first question about the document, and nothing of its prompt is in the server's cache (the cached column shows
it). In one chat the sides would not compare: the cut side's later questions would find the whole file in the cache
(the same thousands of tokens at the start of every prompt) where each passages question brings passages of its
own, and with the history off a second question does not fit beside the file, so the budget would leave the file out.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serving.machine import detect
from serving.plan import ServeSettings
from tests.support.chat_client import ChatClient, errors
from tests.support.documents import NEEDLES, english_pages
from tests.support.files import seen
from tests.support.pdfs import paged_pdf
from tests.support.servers import HERE, ChatApp, VllmServer
from tools.bench_long_chat import MODELS, ROOT, figure, stats_of
from tools.bench_retrieval import tree
from tools.bench_serve import cpu_name
from tools.reports import publish

PASSAGES = "from passages"
CUT = "cut to fit by hand"
# A printed manual's page (english_manual's default).
LINES_PER_PAGE = 40
# Short answers: the first token is what is measured.
ANSWER_TOKENS = 16
# The window `make serve` plans when MAX_MODEL_LEN is not set.
PLAN_WINDOW = int(ServeSettings.model_fields["max_model_len"].default)
# make serve's plan with the request log the tests' server has: the needle is looked for in the prompt it shows.
LOG_REQUESTS = {
    "VLLM_EXTRA_ARGS": "--enable-log-requests",
    "VLLM_LOGGING_CONFIG_PATH": str(HERE / "vllm_logging.json"),
}
# The CPU flags that decide vLLM-CPU's kernels and dtype (AVX2 only: float32).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class Side:
    """One way of asking about the document: the app's settings, and the file each question carries."""

    name: str
    file: str
    data: bytes
    mime: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """A question for the needle sentence on one page of the document."""

    page: int
    needle: str
    text: str


@dataclass(frozen=True)
class Asked:
    """What one question measured."""

    ttft_s: float | None
    prompt_tokens: int | None
    cached_tokens: int | None
    found: bool


def questions_for(pages: int, count: int) -> list[Question]:
    """One question a needle, the needles spread evenly from the first page to the last."""
    return [
        Question(1 + index * (pages - 1) // max(count - 1, 1), needle, text)
        for index, (needle, text) in enumerate(NEEDLES[:count])
    ]


def system_prompt(side: str, index: int) -> str:
    """The question's own system prompt: no prompt starts as another did, so none finds another's in the cache."""
    return f"Question {index + 1}, {side}."


def cut_to_fit(server: VllmServer, text: str, questions: list[Question], window: int) -> int:
    """The most characters from the text's start that fit the window whole with each question and its answer."""

    def fits(length: int) -> bool:
        # The message as the app lays out a file read whole (tools may not import the chat core; the tests check
        # that the app's prompt is this one).
        return all(
            server.count_chat_tokens(
                [
                    {"role": "system", "content": system_prompt(CUT, index)},
                    {"role": "user", "content": seen([("manual.txt", text[:length])], question.text)},
                ]
            )
            + ANSWER_TOKENS
            <= window
            for index, question in enumerate(questions)
        )

    if not fits(0):
        raise RuntimeError(f"the questions alone do not fit a window of {window} tokens")
    low, high = 0, len(text) + 1  # low fits, high does not (one past the text)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


async def ask(
    app: ChatApp, server: VllmServer, side: Side, settings: dict[str, Any], question: str
) -> tuple[dict[str, Any], str]:
    """The question in a new chat with the side's file: the figures the app recorded, and the prompt vLLM got."""
    tab = ChatClient(app.url)
    await tab.connect()
    try:
        await tab.greeting(timeout=600)
        await tab.change_settings(settings)
        status, reply = await tab.upload(side.file, side.data, side.mime)
        if status != 200:
            raise RuntimeError(f"{side.name}: the upload was refused: {reply}")
        before = len(server.logged_requests())
        produced = await tab.ask(question, timeout=1800, files=(str(reply["id"]),))
    finally:
        await tab.close()
    sent = server.logged_requests()[before:]
    if len(sent) != 1:
        raise RuntimeError(f"{side.name}: {len(sent)} requests reached the model; the app said {errors(produced)}")
    return stats_of(produced), sent[0]["prompt"]


async def measure(server: VllmServer, side: Side, questions: list[Question], tiny: bool) -> list[Asked]:
    """Each question asked on an app of the side's own, one after the other."""
    app = ChatApp(server, cpus={1} if tiny else None, extra_env=side.env)
    app.start()
    asked = []
    try:
        for index, question in enumerate(questions):
            settings = {"max_tokens": ANSWER_TOKENS, "temperature": 0, "system_prompt": system_prompt(side.name, index)}
            stats, prompt = await ask(app, server, side, settings, question.text)
            found = question.needle in prompt
            asked.append(Asked(stats.get("ttft_s"), stats.get("prompt_tokens"), stats.get("cached_tokens"), found))
            print(f"{side.name}: question {index + 1}/{len(questions)}", file=sys.stderr, flush=True)
    finally:
        app.stop()
    return asked


def start(server: VllmServer, model: str) -> None:
    """The model server: the tiny model as the tests serve it, the full one with make serve's plan; prompts logged."""
    if model == "full":  # every core, vLLM compiled
        server.serve(server.log_path, 1800, None, MODELS["full"], **LOG_REQUESTS)
    else:
        server.start(timeout=900)


def median(values: list[float | int | None]) -> float | None:
    """The median of the values measured (None: none was)."""
    measured = [value for value in values if value is not None]
    return statistics.median(measured) if measured else None


def summary(results: dict[str, list[Asked]]) -> str:
    """Per side: the median first token and prompt, and the needles that reached the model."""
    lines = [
        "| side | first token (median s) | prompt tokens (median) | needles in the prompt |",
        "|---|---|---|---|",
    ]
    for name, asked in results.items():
        ttft = figure(median([a.ttft_s for a in asked]), ".2f")
        tokens = figure(median([a.prompt_tokens for a in asked]), ".0f")
        lines.append(f"| {name} | {ttft} | {tokens} | {sum(a.found for a in asked)} of {len(asked)} |")
    return "\n".join(lines)


def table(questions: list[Question], asked: list[Asked]) -> str:
    """One side, per question: the needle's page, the first token, the prompt and its tokens cached, the needle."""
    lines = [
        "| question | needle's page | first token (s) | prompt tokens | cached | needle in the prompt |",
        "|---|---|---|---|---|---|",
    ]
    for index, (question, a) in enumerate(zip(questions, asked, strict=True), start=1):
        cells = [figure(a.ttft_s, ".2f"), figure(a.prompt_tokens, "d"), figure(a.cached_tokens, "d")]
        lines.append(f"| {index} | {question.page} | " + " | ".join(cells) + f" | {'yes' if a.found else 'no'} |")
    return "\n".join(lines)


def header(args: argparse.Namespace, window: int, text: str, cut: int, questions: list[Question]) -> str:
    """What was measured, on which machine, when and on which tree."""
    machine = detect(os.environ.get("SERVER_VENV", ".venv-vllm"))
    flags = ", ".join(flag for flag in KERNEL_FLAGS if flag in machine.cpu_flags) or "no AVX2"
    pages = ", ".join(str(question.page) for question in questions)
    begun = text[:cut].count("\n\n") + 1  # pages are a blank line apart, their lines none
    served = "make serve's plan" if args.model == "full" else "the tests' server"
    return "\n".join(
        [
            f"# A question about a long document ({datetime.date.today().isoformat()}, the tree of {tree()})",
            "",
            f"- Model: {args.model} ({served}), window {window} tokens, answers of {ANSWER_TOKENS} tokens.",
            f"- CPU: {cpu_name()}, {machine.cpus} CPUs, flags {flags}.",
            f"- Document: a PDF of {args.pages} pages of {LINES_PER_PAGE} lines, {len(text)} characters; "
            f"needles on pages {pages}.",
            f"- Cut to fit: its first {cut} characters (pages 1-{begun}) as a text file, read whole.",
            "- Each question in a new chat of its own with its file, under a system prompt of its own.",
        ]
    )


async def run(args: argparse.Namespace) -> str:
    questions = questions_for(args.pages, args.questions)
    book = english_pages(args.pages, LINES_PER_PAGE, {question.page: question.needle for question in questions})
    text = "\n\n".join("\n".join(lines) for lines in book)  # the PDF's text as the app reads it: pages apart
    server = VllmServer("bench-documents", max_model_len=args.window, model=MODELS[args.model], cpus={0})
    start(server, args.model)
    try:
        window = int(server.post("/tokenize", {"prompt": "window"})["max_model_len"])
        passages = Side(PASSAGES, "manual.pdf", paged_pdf(book), "application/pdf")
        results = {PASSAGES: await measure(server, passages, questions, args.model == "tiny")}
        cut = cut_to_fit(server, text, questions, window)
        print(f"{CUT}: the first {cut} of {len(text)} characters", file=sys.stderr, flush=True)
        by_hand = Side(CUT, "manual.txt", text[:cut].encode(), "text/plain", {"HISTORY": "false"})
        results[CUT] = await measure(server, by_hand, questions, args.model == "tiny")
    finally:
        server.stop()
    sections = [header(args, window, text, cut, questions), summary(results)]
    for name, asked in results.items():
        sections += [f"## {name.capitalize()}", table(questions, asked)]
    return "\n\n".join(sections)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", choices=list(MODELS), default="full", help="the tiny test model or the full-size one"
    )
    parser.add_argument("--pages", type=int, default=100, help="pages of the PDF")
    parser.add_argument("--questions", type=int, default=5, help="questions, each for a needle on another page")
    parser.add_argument(
        "--window",
        type=int,
        default=PLAN_WINDOW,
        help="the server's MAX_MODEL_LEN (default: make serve's, %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args()
    if not 1 <= args.questions <= min(len(NEEDLES), args.pages):
        parser.error(f"--questions: from 1 to {min(len(NEEDLES), args.pages)} (one needle a page, {len(NEEDLES)} made)")
    return publish(asyncio.run(run(args)), args.out, "bench-documents")


if __name__ == "__main__":
    sys.exit(main())
