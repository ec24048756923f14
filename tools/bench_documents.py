"""`make bench-documents`: the first token of a question about a long document, by how many passages it gets.

Every side asks the same questions against one model server, each for a needle sentence on another page, the pages
spread evenly from the first to the last of a long PDF. From passages, one side per passage budget: the app (history
on) keeps the uploaded PDF as a document and sends each question with the strong passages that budget holds
(DOCUMENT_TOKENS), the app's default among them, then a follow-up in the same chat; "share 0.6, as before" gives
the passages DOCUMENT_SHARE of the room and nothing less, as the app did before it had budgets. Cut to fit by hand:
the same text cut to its first characters that fit the window whole with the question and the answer (counted by
vLLM's /tokenize), uploaded as a text file to an app with the history off, which refuses a file too long rather than
searching it, so the cut is read whole or not at all. Per question: the time to the first token the app measured
(from its request to vLLM: keeping the upload, the search and the token counts come before it), the passages, the
prompt's tokens, those the server found in its prefix cache, and whether the needle reached the model (in the prompt
vLLM logged). Last, a chat streams a long answer while another keeps a PDF of --keep-pages pages: its tokens/s
before and while the PDF is kept (until the line saying its passages are searched), and its longest wait between
two updates meanwhile.

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
import functools
import itertools
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import DEFAULT_DOCUMENT_TOKENS
from serving.machine import detect
from serving.plan import ServeSettings
from tests.support.chat_client import ChatClient, errors
from tests.support.documents import FOLLOW_UP, NEEDLES, english_pages
from tests.support.files import seen
from tests.support.pdfs import paged_pdf
from tests.support.servers import HERE, ChatApp, VllmServer
from tools.bench_long_chat import MODELS, ROOT, figure, stats_of
from tools.bench_retrieval import tree
from tools.bench_serve import cpu_name
from tools.reports import publish

PASSAGES = "from passages"
DEFAULT = "default budget"
AS_BEFORE = "share 0.6, as before"
CUT = "cut to fit by hand"
# A printed manual's page (english_manual's default).
LINES_PER_PAGE = 40
# Short answers: the first token is what is measured.
ANSWER_TOKENS = 16
# The streaming chat's answer while a long PDF is kept: long enough to outlast keeping it (then stopped); streaming
# alone first.
STREAM_TOKENS = 4000
STREAM_ALONE_S = 5.0
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
    # A follow-up in the same chat after each question (a side from passages: the history holds the chat).
    follow_up: bool = False


@dataclass(frozen=True)
class Question:
    """A question for the needle sentence on one page of the document."""

    page: int
    needle: str
    text: str


@dataclass(frozen=True)
class Asked:
    """What one question measured (its follow-up's figures too, where it had one)."""

    ttft_s: float | None
    prompt_tokens: int | None
    cached_tokens: int | None
    found: bool
    passages: int = 0
    follow_up: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Streamed:
    """A chat's stream before and while another chat kept a long PDF."""

    pages: int
    keep_s: float
    before_tps: float
    during_tps: float
    longest_gap_s: float


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


async def ask(app: ChatApp, server: VllmServer, side: Side, settings: dict[str, Any], question: Question) -> Asked:
    """The question in a new chat with the side's file, then its follow-up if the side has one: what each measured."""
    tab = ChatClient(app.url)
    await tab.connect()
    try:
        await tab.greeting(timeout=600)
        await tab.change_settings(settings)
        status, reply = await tab.upload(side.file, side.data, side.mime)
        if status != 200:
            raise RuntimeError(f"{side.name}: the upload was refused: {reply}")
        stats, prompt, sources = await asked_once(tab, server, side, question.text, (str(reply["id"]),))
        follow_up: dict[str, Any] = {}
        if side.follow_up:
            follow_up, _, _ = await asked_once(tab, server, side, FOLLOW_UP, ())
    finally:
        await tab.close()
    found = question.needle in prompt
    tokens, cached = stats.get("prompt_tokens"), stats.get("cached_tokens")
    return Asked(stats.get("ttft_s"), tokens, cached, found, sources, follow_up)


async def asked_once(
    tab: ChatClient, server: VllmServer, side: Side, text: str, files: tuple[str, ...]
) -> tuple[dict[str, Any], str, int]:
    """One question: the figures the app recorded, the prompt vLLM got, and the passages the answer names."""
    before = len(server.logged_requests())
    produced = await tab.ask(text, timeout=1800, files=files)
    sent = server.logged_requests()[before:]
    if len(sent) != 1:
        raise RuntimeError(f"{side.name}: {len(sent)} requests reached the model; the app said {errors(produced)}")
    answers = [step for step in produced if (step.get("metadata") or {}).get("turn")]  # not the lines beside it
    sources = (answers[-1]["metadata"].get("sources") or []) if answers else []
    return stats_of(produced), sent[0]["prompt"], len(sources)


async def measure(server: VllmServer, side: Side, questions: list[Question], tiny: bool) -> list[Asked]:
    """Each question asked on an app of the side's own, one after the other."""
    app = ChatApp(server, cpus={1} if tiny else None, extra_env=side.env)
    app.start()
    asked = []
    try:
        for index, question in enumerate(questions):
            settings = {"max_tokens": ANSWER_TOKENS, "temperature": 0, "system_prompt": system_prompt(side.name, index)}
            asked.append(await ask(app, server, side, settings, question))
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
    """Per side: the median passages, first token and prompt, the needles that reached the model, and the medians of
    the follow-ups (first token, and the share of their prompt the server found in its prefix cache)."""
    lines = [
        "| side | passages (median) | first token (median s) | prompt tokens (median) | needles in the prompt "
        "| follow-up: first token (median s) | follow-up: prompt cached (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, asked in results.items():
        passages = figure(median([a.passages for a in asked]), ".0f")
        ttft = figure(median([a.ttft_s for a in asked]), ".2f")
        tokens = figure(median([a.prompt_tokens for a in asked]), ".0f")
        later = [a.follow_up for a in asked if a.follow_up]
        later_ttft = figure(median([f.get("ttft_s") for f in later]), ".2f")
        cached = figure(median([share_cached(f) for f in later]), ".0%")
        found = f"{sum(a.found for a in asked)} of {len(asked)}"
        lines.append(f"| {name} | {passages} | {ttft} | {tokens} | {found} | {later_ttft} | {cached} |")
    return "\n".join(lines)


def share_cached(stats: dict[str, Any]) -> float | None:
    """The share of a prompt the server found in its prefix cache (None: not said)."""
    prompt, cached = stats.get("prompt_tokens"), stats.get("cached_tokens")
    return cached / prompt if prompt and cached is not None else None


def table(questions: list[Question], asked: list[Asked]) -> str:
    """One side, per question: the needle's page, the passages, the first token, the prompt and its tokens cached,
    the needle."""
    lines = [
        "| question | needle's page | passages | first token (s) | prompt tokens | cached | needle in the prompt |",
        "|---|---|---|---|---|---|---|",
    ]
    for index, (question, a) in enumerate(zip(questions, asked, strict=True), start=1):
        cells = [str(a.passages), figure(a.ttft_s, ".2f"), figure(a.prompt_tokens, "d"), figure(a.cached_tokens, "d")]
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
            f"- From passages: each budget is the app's DOCUMENT_TOKENS, its default {DEFAULT_DOCUMENT_TOKENS} "
            f"(a CPU's); {AS_BEFORE}: DOCUMENT_TOKENS=0, DOCUMENT_SHARE of the room alone. Each question is "
            f'followed in its chat by "{FOLLOW_UP}", which names nothing of its own.',
            f"- Cut to fit: its first {cut} characters (pages 1-{begun}) as a text file, read whole.",
            "- Each question in a new chat of its own with its file, under a system prompt of its own.",
        ]
    )


def passage_sides(manual: bytes, budgets: list[int]) -> list[Side]:
    """A side per passage budget, the app's default among them, then the share alone as before."""
    pdf = functools.partial(Side, file="manual.pdf", data=manual, mime="application/pdf", follow_up=True)
    sides = [pdf(f"{PASSAGES}, budget {budget}", env={"DOCUMENT_TOKENS": str(budget)}) for budget in budgets]
    return [*sides, pdf(f"{PASSAGES}, {DEFAULT}"), pdf(f"{PASSAGES}, {AS_BEFORE}", env={"DOCUMENT_TOKENS": "0"})]


async def keep_while_streaming(server: VllmServer, pages: int, tiny: bool) -> Streamed:
    """A chat streams a long answer; once it has for a while, another chat keeps a PDF of `pages` pages.

    The keeping ends with the line saying the document's passages are searched; the question's own prefill comes
    after (it shares the server's steps with the streaming answer, as any question does) and is not counted.
    """
    book = english_pages(pages, LINES_PER_PAGE, {1: NEEDLES[0][0]})
    app = ChatApp(server, cpus={1} if tiny else None)
    app.start()
    streaming, keeping = ChatClient(app.url), ChatClient(app.url)
    try:
        for tab in (streaming, keeping):
            await tab.connect()
            await tab.greeting(timeout=600)
        await streaming.change_settings({"max_tokens": STREAM_TOKENS, "temperature": 0})
        answer = asyncio.create_task(streaming.ask("Tell me a long story.", timeout=1800))
        await streaming.wait_for(lambda: streamed(streaming), 600)
        await asyncio.sleep(STREAM_ALONE_S)
        began = time.perf_counter()
        status, reply = await keeping.upload("manual.pdf", paged_pdf(book), "application/pdf")
        if status != 200:
            raise RuntimeError(f"the {pages}-page PDF was refused: {reply}")
        question = asyncio.create_task(keeping.ask(NEEDLES[0][1], timeout=1800, files=(str(reply["id"]),)))
        await keeping.wait_for(lambda: indexed_at(keeping), 1800)
        ended = indexed_at(keeping) or time.perf_counter()
        await streaming.stop()
        await asyncio.gather(question, answer)
    finally:
        for tab in (streaming, keeping):
            await tab.close()
        app.stop()
    words = streamed(streaming)
    during = [(at, count) for at, count in words if began <= at <= ended]
    gaps = [
        later - earlier for (earlier, _), (later, _) in itertools.pairwise(words) if later >= began and earlier <= ended
    ]
    before = [(at, count) for at, count in words if at < began]
    return Streamed(pages, ended - began, rate(before), rate(during), max(gaps, default=0.0))


def streamed(tab: ChatClient) -> list[tuple[float, int]]:
    """When each of the tab's streamed updates arrived, and the words (the random model's tokens) it carried."""
    return [
        (at, len(str(data.get("token", "")).split()))
        for (event, data), at in zip(tab.events, tab.arrivals, strict=True)
        if event == "stream_token"
    ]


def indexed_at(tab: ChatClient) -> float | None:
    """When the tab was told its file's passages are searched (None: not yet)."""
    return next(
        (
            at
            for (event, data), at in zip(tab.events, tab.arrivals, strict=True)
            if event in ("new_message", "update_message") and "too long to read whole: its" in str(data.get("output"))
        ),
        None,
    )


def rate(words: list[tuple[float, int]]) -> float:
    """Words a second over a span of streamed updates (the first update's words arrived before the span)."""
    span = words[-1][0] - words[0][0] if len(words) > 1 else 0.0
    return sum(count for _, count in words[1:]) / span if span > 0 else 0.0


async def run(args: argparse.Namespace) -> str:
    server = VllmServer("bench-documents", max_model_len=args.window, model=MODELS[args.model], cpus={0})
    start(server, args.model)
    try:
        return await report(server, args)
    finally:
        server.stop()


async def report(server: VllmServer, args: argparse.Namespace) -> str:
    """The report, measured on a running server."""
    tiny = args.model == "tiny"
    if args.keep_only:
        title = f"# A chat streaming while another keeps a long PDF ({args.model} model, the tree of {tree()})"
        return "\n\n".join([title, streaming_table(await keep_while_streaming(server, args.keep_pages, tiny))])
    questions = questions_for(args.pages, args.questions)
    book = english_pages(args.pages, LINES_PER_PAGE, {question.page: question.needle for question in questions})
    text = "\n\n".join("\n".join(lines) for lines in book)  # the PDF's text as the app reads it: pages apart
    window = int(server.post("/tokenize", {"prompt": "window"})["max_model_len"])
    results = {}
    for side in passage_sides(paged_pdf(book), args.budgets):
        results[side.name] = await measure(server, side, questions, tiny)
    cut = cut_to_fit(server, text, questions, window)
    print(f"{CUT}: the first {cut} of {len(text)} characters", file=sys.stderr, flush=True)
    by_hand = Side(CUT, "manual.txt", text[:cut].encode(), "text/plain", {"HISTORY": "false"})
    results[CUT] = await measure(server, by_hand, questions, tiny)
    streamed = await keep_while_streaming(server, args.keep_pages, tiny) if args.keep_pages else None
    sections = [header(args, window, text, cut, questions), summary(results)]
    for name, asked in results.items():
        sections += [f"## {name[0].upper()}{name[1:]}", table(questions, asked)]
    if streamed is not None:
        sections += ["## A chat streaming while another keeps a long PDF", streaming_table(streamed)]
    return "\n\n".join(sections)


def streaming_table(streamed: Streamed) -> str:
    """The streaming chat's tokens a second alone and while the PDF was kept, and its longest wait."""
    return "\n".join(
        [
            "| PDF pages | kept in (s) | tokens/s before | tokens/s while kept | longest wait between updates (s) |",
            "|---|---|---|---|---|",
            f"| {streamed.pages} | {streamed.keep_s:.1f} | {streamed.before_tps:.1f} | {streamed.during_tps:.1f} "
            f"| {streamed.longest_gap_s:.2f} |",
        ]
    )


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options, checked."""
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
    parser.add_argument(
        "--budgets",
        type=lambda value: [int(budget) for budget in value.split(",") if budget],
        default=[1000, 3000, 4000],
        help="DOCUMENT_TOKENS of the sides from passages, comma-separated (the default's and the share's come too)",
    )
    parser.add_argument(
        "--keep-pages", type=int, default=1000, help="pages of a PDF kept while a chat streams (0: not measured)"
    )
    parser.add_argument(
        "--keep-only", action="store_true", help="only the chat streaming while a PDF of --keep-pages pages is kept"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args(argv)
    if args.keep_only and args.keep_pages < 1:
        parser.error("--keep-only: --keep-pages must be at least 1")
    if not 1 <= args.questions <= min(len(NEEDLES), args.pages):
        parser.error(f"--questions: from 1 to {min(len(NEEDLES), args.pages)} (one needle a page, {len(NEEDLES)} made)")
    return args


def main() -> int:
    args = options()
    return publish(asyncio.run(run(args)), args.out, "bench-documents")


if __name__ == "__main__":
    sys.exit(main())
