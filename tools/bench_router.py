"""`make bench-router`: two vLLM servers behind vLLM's router, by routing policy, against one server alone.

Multi-turn chats, each sending its whole conversation every turn with its id in X-Session-ID as the app does, go
to the router (one run per policy) and to one server alone. Per run: the share of prompt tokens the servers found
in their prefix caches (vllm:prefix_cache_hits / vllm:prefix_cache_queries, summed over the servers), completion
tokens per second and the median time to the first token, at each number of chats at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.support.servers import RouterServer, VllmServer
from tools.bench_long_chat import WORDS
from tools.reports import publish

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PROMPT = "You are ERNIE, a helpful, concise and honest assistant."


@dataclass(frozen=True)
class Run:
    """What one side measured at one number of chats."""

    chats: int
    cached_share: float
    tokens_per_s: float
    ttft_s: float


def text(rng: random.Random, words: int) -> str:
    """Words of plain English, different for every chat and turn."""
    vocabulary = WORDS.split()
    return " ".join(rng.choice(vocabulary) for _ in range(words))


async def first_token_and_answer(
    http: aiohttp.ClientSession, url: str, api_key: str, chat_key: str, messages: list[dict[str, str]], *, tokens: int
) -> tuple[float, str, int]:
    """Stream one turn: the time to its first token, the answer, and its completion tokens."""
    body = {
        "model": "ernie-tiny",
        "messages": messages,
        "max_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"Authorization": f"Bearer {api_key}", "X-Session-ID": chat_key}
    started, first, answer, completion = time.perf_counter(), None, [], 0
    async with http.post(url + "/chat/completions", json=body, headers=headers) as reply:
        reply.raise_for_status()
        async for line in reply.content:
            data = line.decode().strip().removeprefix("data:").strip()
            if not data or data == "[DONE]":
                continue
            chunk = json.loads(data)
            for choice in chunk.get("choices") or ():
                if content := (choice.get("delta") or {}).get("content"):
                    first = first or time.perf_counter()
                    answer.append(content)
            if usage := chunk.get("usage"):
                completion = int(usage.get("completion_tokens") or 0)
    return (first or time.perf_counter()) - started, "".join(answer), completion


async def chats_at_once(url: str, api_key: str, chats: int, args: argparse.Namespace) -> tuple[int, list[float]]:
    """`chats` chats of args.turns turns each, at once: completion tokens and every turn's first-token time."""
    firsts: list[float] = []
    tokens = 0

    async def chat(index: int, http: aiohttp.ClientSession) -> None:
        nonlocal tokens
        rng, key = random.Random(f"{index}-{uuid.uuid4()}"), str(uuid.uuid4())
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        for turn in range(args.turns):
            words = args.first_words if turn == 0 else args.words
            messages.append({"role": "user", "content": f"Chat {key}, turn {turn}. {text(rng, words)}"})
            ttft, answer, completion = await first_token_and_answer(
                http, url, api_key, key, messages, tokens=args.answer_tokens
            )
            messages.append({"role": "assistant", "content": answer})
            firsts.append(ttft)
            tokens += completion

    timeout = aiohttp.ClientTimeout(total=1800)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        await asyncio.gather(*(chat(index, http) for index in range(chats)))
    return tokens, firsts


def cache_figures(servers: list[VllmServer]) -> tuple[float, float]:
    """Prefix-cache hits and queries, summed over the servers."""
    hits = sum(server.metric("vllm:prefix_cache_hits_total") for server in servers)
    queries = sum(server.metric("vllm:prefix_cache_queries_total") for server in servers)
    return hits, queries


async def measure(url: str, api_key: str, servers: list[VllmServer], args: argparse.Namespace) -> list[Run]:
    """One side at each number of chats at once."""
    runs = []
    for chats in args.chats:
        hits_before, queries_before = cache_figures(servers)
        started = time.perf_counter()
        tokens, firsts = await chats_at_once(url, api_key, chats, args)
        elapsed = time.perf_counter() - started
        hits, queries = cache_figures(servers)
        share = (hits - hits_before) / max(queries - queries_before, 1)
        runs.append(Run(chats, share, tokens / elapsed, statistics.median(firsts)))
        print(f"  {chats} chats: {share:.0%} cached, {tokens / elapsed:.0f} tok/s", file=sys.stderr, flush=True)
    return runs


def table(results: dict[str, list[Run]]) -> str:
    """One row per side and number of chats."""
    lines = [
        "| chats at once | side | prompt tokens found in the prefix cache | completion tok/s | median first token |",
        "|---:|---|---:|---:|---:|",
    ]
    chat_counts = sorted({run.chats for runs in results.values() for run in runs})
    for chats in chat_counts:
        for side, runs in results.items():
            for run in (r for r in runs if r.chats == chats):
                figures = f"{run.cached_share:.0%} | {run.tokens_per_s:.0f} | {run.ttft_s * 1000:.0f} ms"
                lines.append(f"| {chats} | {side} | {figures} |")
    return "\n".join(lines)


async def behind_the_router(servers: list[VllmServer], args: argparse.Namespace) -> dict[str, list[Run]]:
    """These servers behind a router of each policy in turn, measured."""
    results: dict[str, list[Run]] = {}
    for policy in args.policies:
        router = RouterServer(f"bench-{policy}", servers, policy=policy)
        router.start()
        try:
            print(f"2 servers behind the router, {policy}:", file=sys.stderr, flush=True)
            results[f"2 servers, router {policy}"] = await measure(router.base_url, router.api_key, servers, args)
        finally:
            router.stop()
    return results


async def alone(server: VllmServer, args: argparse.Namespace) -> dict[str, list[Run]]:
    """One server alone, measured."""
    print("1 server alone:", file=sys.stderr, flush=True)
    return {"1 server alone": await measure(server.base_url, server.api_key, [server], args)}


async def run(args: argparse.Namespace) -> str:
    # One core each for the two servers; one server alone gets both (what make serve gives it on this machine).
    servers = [VllmServer(f"bench-router-{n}", max_model_len=args.window, cpus={n}) for n in (0, 1)]
    try:
        for server in servers:
            server.start(timeout=900)
        results = await behind_the_router(servers, args)
    finally:
        for server in servers:
            server.stop()
    single = VllmServer("bench-router-alone", max_model_len=args.window, cpus={0, 1})
    try:
        single.start(timeout=900)
        results |= await alone(single, args)
    finally:
        single.stop()
    return table(results)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=lambda t: [int(v) for v in t.split(",")], default=[8, 16, 32])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--first-words", type=int, default=400, help="words of each chat's first message")
    parser.add_argument("--words", type=int, default=40, help="words of each later message")
    parser.add_argument("--answer-tokens", type=int, default=32)
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument(
        "--policies", type=lambda t: t.split(","), default=["consistent_hash", "round_robin"], help="comma-separated"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    return parser.parse_args(argv)


def main() -> int:
    args = options()
    return publish(asyncio.run(run(args)), args.out, "bench-router")


if __name__ == "__main__":
    sys.exit(main())
