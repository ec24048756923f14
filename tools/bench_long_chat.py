"""`make bench-long-chat`: one long chat through the app, well past the window, per turn, for each budget side by side.

Each budget is an app with its own CONTEXT_LOW_WATER against one model server: 0.5 (the default: once the window
is full, step down to half the room and keep the prompt's start until it is full again) and 1 (leave out only as
many turns as the next message needs, the budget before: the start moves every turn). Per turn: the prompt's
tokens, the share the server found in its prefix cache (from its usage figures), the turns left out, and the
time to the first token the app measured.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.chat_client import ChatClient
from tests.support.llama_cpp import LlamaServer
from tests.support.servers import ChatApp, VllmServer
from tools.reports import publish

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"tiny": "", "full": str(ROOT / ".cache/models/ernie-full-random")}
# Words the messages are made of: plain English, so that each takes about as many tokens as a person's would.
WORDS = (
    "the of and to in is was that for on with as by at from this have not are but had his they which one you "
    "were all her she there would their we him been has when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our "
    "over man me even most made after also did many before must through back years where much your way well "
    "down should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three"
)
# A turn counts as found in the cache from this share of its prompt on (the goal: most turns past the window).
MOSTLY_CACHED = 0.8


@dataclass(frozen=True)
class Turn:
    """What one turn of the chat measured."""

    prompt_tokens: int | None
    cached_tokens: int | None
    left_out: int
    ttft_s: float | None

    @property
    def cached_share(self) -> float | None:
        """The share of the prompt found in the server's cache (None: the server did not say)."""
        if not self.prompt_tokens or self.cached_tokens is None:
            return None
        return self.cached_tokens / self.prompt_tokens


def message(turn: int, words: int) -> str:
    """A user message of about `words` words, different for every turn."""
    rng, vocabulary = random.Random(turn), WORDS.split()
    return f"Turn {turn}. " + " ".join(rng.choice(vocabulary) for _ in range(words))


def stats_of(produced: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures the app recorded with the answer (empty if it has none: a failed turn)."""
    for step in produced:
        record = (step.get("metadata") or {}).get("turn")
        if step.get("type") == "assistant_message" and isinstance(record, dict) and record.get("stats"):
            return dict(record["stats"])
    return {}


async def long_chat(app: ChatApp, args: argparse.Namespace, tag: str) -> list[Turn]:
    """One chat of args.turns turns through the app; what each turn measured."""
    tab = ChatClient(app.url)
    await tab.connect()
    await tab.greeting(timeout=600)
    # A system prompt of its own: nothing this chat sends is in the server's cache from another budget's chat.
    await tab.change_settings({"max_tokens": args.answer_tokens, "temperature": 0, "system_prompt": f"Chat {tag}."})
    turns = []
    try:
        for index in range(args.turns):
            stats = stats_of(await tab.ask(message(index, args.words), timeout=1800))
            turns.append(
                Turn(
                    stats.get("prompt_tokens"),
                    stats.get("cached_tokens"),
                    stats.get("dropped_turns", 0),
                    stats.get("ttft_s"),
                )
            )
            print(f"{tag}: turn {index + 1}/{args.turns}", file=sys.stderr, flush=True)
    finally:
        await tab.close()
    return turns


def figure(value: float | int | None, form: str) -> str:
    """A table cell: the value in its form, or a dash."""
    return "–" if value is None else format(value, form)


def table(results: dict[str, list[Turn]]) -> str:
    """Per turn, each budget side by side: prompt tokens, found in the cache, turns left out, first token."""
    names = list(results)
    head = "| turn | " + " | ".join(f"{n}: prompt | cached | left out | first token (s)" for n in names) + " |"
    lines = [head, "|" + "---|" * (1 + 4 * len(names))]
    for index in range(max(len(turns) for turns in results.values())):
        cells = []
        for name in names:
            turn = results[name][index]
            share = turn.cached_share
            cached = f"{turn.cached_tokens} ({share:.0%})" if share is not None else "–"
            cells += [figure(turn.prompt_tokens, "d"), cached, str(turn.left_out), figure(turn.ttft_s, ".2f")]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(results: dict[str, list[Turn]]) -> str:
    """Per budget: turns past the window mostly found in the cache, and first-token times before and after."""
    lines = [
        "| budget | turns past the window | of them ≥ 80 % cached | first token before (median s) | after (median s) |",
        "|---|---|---|---|---|",
    ]
    for name, turns in results.items():
        full_at = next((i for i, turn in enumerate(turns) if turn.left_out), len(turns))
        before = [t.ttft_s for t in turns[1:full_at] if t.ttft_s is not None]  # the first turn has no cache to use
        after = turns[full_at:]
        cached = [t for t in after if (t.cached_share or 0) >= MOSTLY_CACHED]
        share = f"{len(cached)} ({len(cached) / len(after):.0%})" if after else "–"
        ttfts = [t.ttft_s for t in after if t.ttft_s is not None]
        before_s = figure(statistics.median(before), ".2f") if before else "–"
        after_s = figure(statistics.median(ttfts), ".2f") if ttfts else "–"
        lines.append(f"| {name} | {len(after)} | {share} | {before_s} | {after_s} |")
    return "\n".join(lines)


def model_server(args: argparse.Namespace) -> VllmServer | LlamaServer:
    """The model server the apps share, not started yet."""
    if args.engine == "llama.cpp":
        return LlamaServer("bench-long-chat", max_model_len=args.window, slots=4)  # make serve's slots
    return VllmServer("bench-long-chat", max_model_len=args.window, model=MODELS[args.model], cpus={0})


async def run(args: argparse.Namespace) -> str:
    server = model_server(args)
    if args.model == "full":  # make serve's plan: every core; vLLM compiled, llama.cpp with its 4 slots
        engine = {"ENGINE": "llama.cpp"} if isinstance(server, LlamaServer) else {}
        server.serve(server.log_path, 1800, None, MODELS["full"], **engine)
    else:
        server.start(timeout=900)
    try:
        return await report(server, args)
    finally:
        server.stop()


async def report(server: VllmServer | LlamaServer, args: argparse.Namespace) -> str:
    """The report, measured on a running server: an app per low water, one after the other."""
    results: dict[str, list[Turn]] = {}
    for low_water in args.low_water:
        name = f"low water {low_water:g}"
        app = ChatApp(
            server,
            cpus={1} if args.model == "tiny" else None,
            extra_env={"CONTEXT_LOW_WATER": str(low_water), "HISTORY": "false"},
        )
        app.start()
        try:
            results[name] = await long_chat(app, args, f"{name} {time.time_ns()}")
        finally:
            app.stop()
    return summary(results) + "\n\n" + table(results)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options, the window filled in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", choices=list(MODELS), default="tiny", help="the tiny test model or the full-size one"
    )
    parser.add_argument("--engine", choices=["vllm", "llama.cpp"], default="vllm")
    parser.add_argument("--window", type=int, help="the server's MAX_MODEL_LEN (2048 for tiny, 8192 for full)")
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--words", type=int, default=260, help="words per message")
    parser.add_argument("--answer-tokens", type=int, default=48, help="max tokens per answer")
    parser.add_argument(
        "--low-water",
        type=lambda text: [float(value) for value in text.split(",")],
        default=[0.5, 1.0],
        help="CONTEXT_LOW_WATER of each app, comma-separated (1: the fewest turns left out)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args(argv)
    args.window = args.window or (2048 if args.model == "tiny" else 8192)
    return args


def main() -> int:
    args = options()
    return publish(asyncio.run(run(args)), args.out, "bench-long-chat")


if __name__ == "__main__":
    sys.exit(main())
