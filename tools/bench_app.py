"""`make bench`: the same prompts straight to vLLM and through the running chat app, side by side.

Starts a real vLLM (tiny test model by default) pinned to core 0 and the real Chainlit app pinned
to core 1 (with this load client), or uses servers given by URL. For each concurrency N it runs
interleaved rounds of: N direct AsyncOpenAI streams, then N Chainlit sessions over socket.io.
Answers are exactly --tokens long (the project's random-weight models never stop early).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from openai import AsyncOpenAI

from app.config import DEFAULT_ANSWER_CHECKPOINT_S, Settings
from tests.support.chat_client import ChatClient
from tests.support.gpu_fake import MODEL as FAKE_MODEL
from tests.support.servers import ChatApp, GpuFakeServer, VllmServer

ROOT = Path(__file__).resolve().parent.parent

CLIENT_CPU = {1} if (os.cpu_count() or 1) > 1 else None
# Both paths sample as the app does by default (what the defaults cost vLLM is part of what users get).
SAMPLING = {name: Settings.model_fields[name].default for name in ("temperature", "top_p", "repetition_penalty")}
# The apps each --history runs (path name: their settings); `off-twice`, two identical apps, shows the noise floor;
# `checkpoints`, the history without and with an answer's text so far written as it streams (at the default's 3 s).
HISTORY_SETUPS = {
    "on": {"app": {"HISTORY": "on"}},
    "off": {"app": {"HISTORY": "off"}},
    "both": {"app": {"HISTORY": "off"}, "app+history": {"HISTORY": "on"}},
    "off-twice": {"app": {"HISTORY": "off"}, "app again": {"HISTORY": "off"}},
    "checkpoints": {
        "app+history": {"HISTORY": "on", "ANSWER_CHECKPOINT_SECONDS": "0"},
        "app+history+checkpoints": {"HISTORY": "on", "ANSWER_CHECKPOINT_SECONDS": str(DEFAULT_ANSWER_CHECKPOINT_S)},
    },
}


@dataclass
class Sample:
    """What one path measured at one concurrency."""

    ttft: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    stream_rates: list[float] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0
    errors: int = 0
    app_cpu: float = 0.0
    client_cpu: float = 0.0  # this load client's own CPU, on the app's core when pinned


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank), or nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children that were waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


async def direct_round(
    base_url: str, api_key: str, model: str, *, n: int, tokens: int, tag: str, sample: Sample
) -> None:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", max_retries=0)

    async def one(index: int) -> None:
        started = time.perf_counter()
        last = None
        count = 0
        try:
            stream = await client.chat.completions.create(
                model=model,
                max_tokens=tokens,
                temperature=SAMPLING["temperature"],
                top_p=SAMPLING["top_p"],
                extra_body={"repetition_penalty": SAMPLING["repetition_penalty"]},
                stream=True,
                stream_options={"include_usage": True},
                messages=[
                    {"role": "system", "content": "You are ERNIE."},
                    {"role": "user", "content": f"{tag} direct {index}: tell me a story"},
                ],
            )
            async with stream:
                async for chunk in stream:
                    if chunk.usage:
                        count = chunk.usage.completion_tokens
                    if chunk.choices and chunk.choices[0].delta.content:
                        now = time.perf_counter()
                        if last is None:
                            sample.ttft.append(now - started)
                        else:
                            sample.gaps.append(now - last)
                        last = now
            if last is not None and count:
                sample.stream_rates.append(count / (last - started))
            sample.tokens += count
        except Exception:
            sample.errors += 1

    started, client_cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    sample.seconds += time.perf_counter() - started
    sample.client_cpu += time.process_time() - client_cpu
    await client.close()


async def app_round(
    url: str, *, n: int, tokens: int, tag: str, sample: Sample, app_pid: int | None, deflate: bool
) -> None:
    tabs = [ChatClient(url, deflate=deflate) for _ in range(n)]
    await asyncio.gather(*(tab.connect() for tab in tabs))
    await asyncio.gather(*(tab.greeting() for tab in tabs))
    # The same sampling as the direct path.
    same_sampling = {"max_tokens": tokens, "system_prompt": "You are ERNIE.", **SAMPLING}
    await asyncio.gather(*(tab.change_settings(same_sampling) for tab in tabs))
    cpu_before = process_cpu_seconds(app_pid) if app_pid else 0.0

    ends: list[float] = []

    async def one(index: int, tab: ChatClient) -> None:
        started = time.perf_counter()
        try:
            produced = await tab.ask(f"{tag} app {index}: tell me a story", timeout=600)
        except TimeoutError:
            sample.errors += 1
            return
        # The answer is over when its task_end arrives (ask() itself waits a little longer).
        ends.append(max(at for (event, _), at in zip(tab.events, tab.arrivals, strict=True) if event == "task_end"))
        replies = [tab.replies[m["id"]] for m in produced if m["id"] in tab.replies]
        if not replies or any(m.get("isError") for m in produced):
            sample.errors += 1
            return
        reply = replies[-1]
        times = [t for t in reply.event_times]
        sample.ttft.append(times[0] - started)
        sample.gaps += [b - a for a, b in itertools.pairwise(times)]
        sample.stream_rates.append(tokens / (times[-1] - started))
        sample.tokens += tokens

    started, client_cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i, tab) for i, tab in enumerate(tabs)))
    sample.seconds += max(ends, default=time.perf_counter()) - started
    sample.client_cpu += time.process_time() - client_cpu
    if app_pid:
        sample.app_cpu += process_cpu_seconds(app_pid) - cpu_before
    await asyncio.gather(*(tab.close() for tab in tabs))


async def token_count_round_trip(root: str, api_key: str, model: str, times: int = 20) -> float:
    """Median time of one /tokenize call, the extra round trip the app makes per message."""
    client = AsyncOpenAI(base_url=root + "/v1", api_key=api_key or "none", max_retries=0)
    samples = []
    for index in range(times):
        started = time.perf_counter()
        await client.post(
            f"{root}/tokenize",
            cast_to=object,
            body={
                "model": model,
                "add_generation_prompt": True,
                "messages": [{"role": "user", "content": f"how many tokens is message {index}?"}],
            },
        )
        samples.append(time.perf_counter() - started)
    await client.close()
    return statistics.median(samples)


def table(results: dict[int, dict[str, Sample]], rtt: float) -> str:
    """The Markdown report."""
    lines = [
        "| N | path | TTFT p50 ms | TTFT p95 ms | gap p50 ms | gap p95 ms | per-stream tok/s | aggregate tok/s "
        "| app/direct | app CPU s / 1000 tok | client CPU s / 1000 tok | app core busy | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, paths in results.items():
        direct_rate = paths["direct"].tokens / paths["direct"].seconds if paths["direct"].seconds else 0
        for name, sample in paths.items():
            rate = sample.tokens / sample.seconds if sample.seconds else 0
            through_app = name.startswith("app")
            ratio = f"{rate / direct_rate:.3f}" if through_app and direct_rate else ""
            cpu = f"{1000 * sample.app_cpu / sample.tokens:.2f}" if through_app and sample.tokens else ""
            client = f"{1000 * sample.client_cpu / sample.tokens:.2f}" if sample.tokens else ""
            # The app's core (core 1 when pinned) carries the app and this client: its busy share.
            busy = f"{100 * (sample.app_cpu + sample.client_cpu) / sample.seconds:.0f} %" if sample.seconds else ""
            lines.append(
                f"| {n} | {name} | {1000 * pct(sample.ttft, 50):.1f} | {1000 * pct(sample.ttft, 95):.1f} "
                f"| {1000 * pct(sample.gaps, 50):.1f} | {1000 * pct(sample.gaps, 95):.1f} "
                f"| {statistics.median(sample.stream_rates) if sample.stream_rates else 0:.1f} | {rate:.1f} "
                f"| {ratio} | {cpu} | {client} | {busy} | {sample.errors} |"
            )
    lines.append("")
    lines.append(
        f"Token counting (/tokenize) round trip the app adds before each answer: {1000 * rtt:.1f} ms "
        "(median of 20). Through the app, a gap is between two socket events, which carry "
        "several tokens when they arrive within STREAM_INTERVAL_MS."
    )
    return "\n".join(lines)


def plot(results: dict[int, dict[str, Sample]], path: Path) -> None:
    """Aggregate tok/s and TTFT p50 against N, both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = list(results)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in results[ns[0]]:
        left.plot(ns, [results[n][name].tokens / max(results[n][name].seconds, 1e-9) for n in ns], "o-", label=name)
        right.plot(ns, [1000 * pct(results[n][name].ttft, 50) for n in ns], "o-", label=name)
    left.set(xlabel="concurrent sessions N", ylabel="aggregate tokens/s", xscale="log", title="Throughput")
    right.set(xlabel="concurrent sessions N", ylabel="time to first token p50 (ms)", xscale="log", title="TTFT")
    for axis in (left, right):
        axis.legend()
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


async def run(args: argparse.Namespace) -> str:
    server: VllmServer | GpuFakeServer | None = None
    try:
        if args.backend == "fake":
            server = GpuFakeServer("bench-fake", rate=args.fake_rate, interval=args.stream_interval, cpus={0})
            server.start()
            model = FAKE_MODEL
        else:
            model_path = str(ROOT / ".cache/models/ernie-full-random") if args.backend == "full" else ""
            interval = f"--stream-interval {args.stream_interval}"
            server = VllmServer(
                f"bench-{args.backend}", max_model_len=4096, model=model_path, cpus={0}, extra_args=interval
            )
            server.start(timeout=900)
            model = "ernie-tiny"
        if CLIENT_CPU:
            os.sched_setaffinity(0, CLIENT_CPU)
        return await report(server, model, args)
    finally:
        if server:
            server.stop()


async def report(server: VllmServer | GpuFakeServer, model: str, args: argparse.Namespace) -> str:
    """The table, measured on a running server against apps of the run's own; written to args.out with its plot."""
    apps: dict[str, ChatApp] = {}
    try:
        base_url, api_key = server.base_url, server.api_key
        # With two apps (e.g. --history both), they take turns after the direct round: one run, side by side.
        for name, setup in HISTORY_SETUPS[args.history].items():
            app_env = {"STREAM_INTERVAL_MS": str(args.interval_ms), **setup}
            apps[name] = ChatApp(server, cpus=CLIENT_CPU, extra_env=app_env)
        for app in apps.values():
            app.start()
        rtt = await token_count_round_trip(base_url.removesuffix("/v1"), api_key, model)
        results: dict[int, dict[str, Sample]] = {}
        for n in args.sessions:
            paths = {"direct": Sample(), **{name: Sample() for name in apps}}
            for round_index in range(args.rounds):
                tag = f"N{n} r{round_index} {time.time_ns()}"
                await direct_round(base_url, api_key, model, n=n, tokens=args.tokens, tag=tag, sample=paths["direct"])
                # Apps take turns going first: the one after another may meet the first one's leftovers in vLLM.
                turns = list(apps.items())
                for name, app in turns[::-1] if round_index % 2 else turns:
                    pid = app.process.pid if app.process else None
                    await app_round(
                        app.url, n=n, tokens=args.tokens, tag=tag, sample=paths[name], app_pid=pid, deflate=args.deflate
                    )
            results[n] = paths
            print(f"N={n} done", file=sys.stderr, flush=True)
        written = table(results, rtt)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench-app.md").write_text(written + "\n")
        if not args.no_plot:
            plot(results, args.out / "bench-app.png")
        return written
    finally:
        for app in apps.values():
            app.stop()


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options, the sessions as numbers."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="1,8,32,64", help="comma-separated concurrency levels")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per answer")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per N")
    parser.add_argument(
        "--backend",
        choices=["tiny", "full", "fake"],
        default="tiny",
        help="tiny test model, full-size random ERNIE-4.5-0.3B, or a paced fake server",
    )
    parser.add_argument("--fake-rate", type=float, default=2000.0, help="tokens/s per stream of the fake server")
    parser.add_argument(
        "--stream-interval", type=int, default=1, help="tokens per streamed event (vLLM's --stream-interval)"
    )
    parser.add_argument("--interval-ms", type=float, default=30.0, help="the app's STREAM_INTERVAL_MS")
    parser.add_argument(
        "--history",
        choices=sorted(HISTORY_SETUPS),
        default="on",
        help="the app's HISTORY (SQLite); both: an app of each, interleaved in the same run; "
        "off-twice: two apps without history (the noise between identical paths); "
        "checkpoints: two apps with history, without and with the default ANSWER_CHECKPOINT_SECONDS (with "
        "--tokens long enough for answers to stream past it)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--deflate", action="store_true", help="the app's clients ask for permessage-deflate, as Chromium does"
    )
    args = parser.parse_args(argv)
    args.sessions = [int(n) for n in args.sessions.split(",")]
    return args


def main() -> int:
    print(asyncio.run(run(options())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
