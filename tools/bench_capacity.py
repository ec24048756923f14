"""`make bench-capacity`: how many tokens a second one app process delivers to its tabs when the model is fast.

A stand-in for vLLM on a GPU (tests/support/gpu_fake.py) streams every answer at --rate tokens a second, an
event per --interval tokens (vLLM's --stream-interval), pinned with this load client to core 0; one app process
is pinned to core 1. For each number of tabs N, the same streams are first read straight from the fake (N
streams, `direct`), then asked through the app by N socket.io clients speaking the page's protocol (`app`): each
tab asks question after question, the tabs' first questions spread over one answer's length. Measured over
--seconds after every tab has started: tokens delivered a second, time to first token (from the question sent
to its first token) and what the app adds to it, the app's CPU per 1 000 tokens, its memory, and both cores'
load. An answer whose tokens arrive lost or out of order counts as an error.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.chat_client import ChatClient
from tests.support.gpu_fake import token
from tests.support.servers import ChatApp, GpuFakeServer
from tools.bench_app import pct, process_cpu_seconds
from tools.profile_parts import PACKETS, PARTS, REST, UPDATES, UPSTREAM, WEBSOCKET, shares
from tools.reports import publish

ROOT = Path(__file__).resolve().parent.parent
# The app alone on one core; the fake and this client (the model and the browsers) on the other.
LOAD_CPU, APP_CPU = ({0}, {1}) if (os.cpu_count() or 1) > 1 else (None, None)
CONNECTING_AT_ONCE = 32


@dataclass
class Sample:
    """What one path measured at one number of tabs, inside the measured window."""

    tokens: int = 0
    frames: int = 0  # updates the tabs received (or events the direct reader did)
    events: int = 0  # events the fake sent
    ttft: list[float] = field(default_factory=list)
    answers: int = 0
    errors: int = 0
    seconds: float = 0.0
    app_cpu: float = 0.0
    load_cpu: float = 0.0
    app_memory_mb: float = 0.0
    # How busy each core was, whoever used it (the machine may be shared): its busy seconds.
    core_busy: dict[int, float] = field(default_factory=dict)
    profile: Path | None = None  # the app's py-spy stacks over the window (raw), if it was profiled


@dataclass
class Window:
    """The measured span: from once every tab has started to --seconds later."""

    start: float
    end: float

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


@dataclass
class Answer:
    """One answer as its reader saw it: when it was asked, its first token, its text, its tokens' arrivals."""

    asked: float
    first: float | None = None
    text: str = ""
    arrivals: list[tuple[float, int]] = field(default_factory=list)

    def add(self, text: str) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.text += text
        self.arrivals.append((now, text.count(" t")))

    def count_into(self, sample: Sample, window: Window, expected: str) -> None:
        """Its tokens that arrived in the window; its first token if it was asked in it; an error if it is wrong."""
        inside = [count for at, count in self.arrivals if window.holds(at)]
        sample.tokens += sum(inside)
        sample.frames += len(inside)
        if window.holds(self.asked):
            sample.answers += 1
            if self.first is None or self.text != expected:
                sample.errors += 1
            else:
                sample.ttft.append(self.first - self.asked)


def expected_text(tokens: int) -> str:
    """The text of every answer of the fake."""
    return "".join(token(i) for i in range(tokens))


async def ask_until(stagger: float, window: Window, ask: Any) -> list[Answer]:
    """Answers asked one after another, from `stagger` seconds in until the window ends."""
    await asyncio.sleep(stagger)
    answers = []
    while time.perf_counter() < window.end:
        answers.append(await ask())
    return answers


async def direct(fake: GpuFakeServer, n: int, tokens: int, window: Window, answer_s: float) -> list[Answer]:
    """N streams read straight from the fake, question after question."""
    body = {
        "model": "fake-ernie",
        "max_tokens": tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def one(index: int, http: aiohttp.ClientSession) -> Answer:
        messages = [{"role": "user", "content": f"direct {index}: tell me a story"}]
        answer = Answer(time.perf_counter())
        async with http.post(fake.base_url + "/chat/completions", json={**body, "messages": messages}) as reply:
            async for line in reply.content:
                if line.startswith(b"data: {"):
                    delta = parse_delta(line)
                    if delta:
                        answer.add(delta)
        return answer

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        runs = [ask_until(i * answer_s / n, window, lambda i=i: one(i, http)) for i in range(n)]
        return [answer for answers in await asyncio.gather(*runs) for answer in answers]


def parse_delta(line: bytes) -> str:
    """The text an event of the stream carries ("" for none)."""
    choices = json.loads(line[6:])["choices"]
    return str(choices[0]["delta"].get("content") or "") if choices else ""


@dataclass
class Tab:
    """A socket.io client as the page, asking through the app and told of each event as it arrives."""

    client: ChatClient
    answer: Answer | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.client.on_event = self.seen

    def seen(self, event: str, data: Any) -> None:
        if self.answer is None:
            return
        if event == "stream_start" and data.get("type") == "assistant_message":
            self.answer.add(str(data.get("output") or ""))
        elif event == "stream_token":
            self.answer.add(str(data["token"]))
        elif event == "task_end":
            self.ended.set()

    async def ask(self, index: int) -> Answer:
        self.ended.clear()
        self.answer = answer = Answer(time.perf_counter())
        await self.client.send(f"app {index}: tell me a story")
        await self.ended.wait()
        self.answer = None
        return answer


async def open_tabs(app: ChatApp, n: int, tokens: int) -> list[Tab]:
    """N tabs connected, greeted, and set to answers of `tokens` tokens (a few at a time, as people arrive)."""
    tabs: list[Tab] = []
    for first in range(0, n, CONNECTING_AT_ONCE):
        # Each tab asks for permessage-deflate as Chromium does: what the app answers is what a browser's tab costs.
        batch = [Tab(ChatClient(app.url, deflate=True)) for _ in range(first, min(n, first + CONNECTING_AT_ONCE))]
        await asyncio.gather(*(tab.client.connect() for tab in batch))
        await asyncio.gather(*(tab.client.greeting() for tab in batch))
        await asyncio.gather(*(tab.client.change_settings({"max_tokens": tokens}) for tab in batch))
        tabs += batch
    return tabs


def profile(args: argparse.Namespace, pid: int, name: str) -> list[subprocess.Popen[bytes]]:
    """Sample the app with py-spy over the window: a flame graph and its raw stacks into the results folder."""
    command = [args.py_spy, "record", "--pid", str(pid), "--duration", str(int(args.seconds))]
    command += ["--rate", str(args.py_spy_rate)]
    # Without pausing the app at each sample (pausing it took most of its time): stacks may be torn now and then.
    return [
        subprocess.Popen(
            [*command, "--format", kind, "--output", str(args.out / f"profile-{name}.{suffix}"), "--nonblocking"],
            stdout=subprocess.DEVNULL,
        )
        for kind, suffix in (("flamegraph", "svg"), ("raw", "txt"))
    ]


def load_cpu(fake: GpuFakeServer) -> float:
    """CPU seconds of the load core's processes: the fake and this client."""
    pid = fake.process.pid if fake.process else os.getpid()
    return process_cpu_seconds(pid) + time.process_time()


def core_seconds() -> dict[int, float]:
    """Busy seconds of each core so far, by any process (/proc/stat)."""
    busy = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name != "cpu":
            values = [int(tick) for tick in ticks]
            busy[int(name[3:])] = (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
    return busy


def memory_mb(pid: int) -> float:
    """A process's resident memory."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True)
class Readings:
    """The counters read at one end of the window."""

    app_cpu: float
    load_cpu: float
    cores: dict[int, float]
    events: int


async def measure(
    args: argparse.Namespace, fake: GpuFakeServer, ask_all: Any, *, label: str, app_pid: int | None = None
) -> Sample:
    """Run one path over the window, and what it measured (profiled with py-spy if asked: label names it)."""
    answer_s = args.tokens / args.rate
    window = Window(time.perf_counter() + answer_s, time.perf_counter() + answer_s + args.seconds)

    async def readings_at(moment: float) -> Readings:
        await asyncio.sleep(moment - time.perf_counter())
        app_cpu = process_cpu_seconds(app_pid) if app_pid else 0.0
        events = (await asyncio.to_thread(fake.stats))["events"]
        return Readings(app_cpu, load_cpu(fake), core_seconds(), events)

    start, end = asyncio.ensure_future(readings_at(window.start)), asyncio.ensure_future(readings_at(window.end))
    profilers: list[subprocess.Popen[bytes]] = []
    if app_pid and args.py_spy:
        start.add_done_callback(lambda _: profilers.extend(profile(args, app_pid, label)))
    answers = await ask_all(window, answer_s)
    before, after = await start, await end
    sample = Sample(seconds=args.seconds, events=after.events - before.events)
    for profiler in profilers:  # their files written while the app still runs
        await asyncio.to_thread(profiler.wait)
    if profilers:
        sample.profile = args.out / f"profile-{label}.txt"
    sample.app_cpu, sample.load_cpu = after.app_cpu - before.app_cpu, after.load_cpu - before.load_cpu
    sample.core_busy = {core: busy - before.cores.get(core, 0.0) for core, busy in after.cores.items()}
    if app_pid:
        sample.app_memory_mb = memory_mb(app_pid)
    expected = expected_text(args.tokens)
    for answer in answers:
        answer.count_into(sample, window, expected)
    print(f"{label}: {sample.tokens / args.seconds:.0f} tok/s", file=sys.stderr, flush=True)
    return sample


async def through_app(args: argparse.Namespace, fake: GpuFakeServer, n: int, path: str, tree: Path) -> Sample:
    """N tabs asking through a fresh app process of this checkout (its memory is theirs alone)."""
    app = ChatApp(fake, cpus=APP_CPU, extra_env=dict(args.app_env), tree=tree)
    app.start()
    try:
        tabs = await open_tabs(app, n, args.tokens)

        async def ask_all(window: Window, answer_s: float) -> list[Answer]:
            runs = [ask_until(i * answer_s / n, window, lambda i=i, tab=tab: tab.ask(i)) for i, tab in enumerate(tabs)]
            return [answer for answers in await asyncio.gather(*runs) for answer in answers]

        label = f"{path.split()[-1].strip('()')}-{n}-{fake.interval}"
        sample = await measure(args, fake, ask_all, label=label, app_pid=app.process.pid if app.process else None)
        await asyncio.gather(*(tab.client.close() for tab in tabs))
        return sample
    finally:
        app.stop()


async def run_interval(args: argparse.Namespace, interval: int) -> dict[int, dict[str, Sample]]:
    """Every number of tabs against a fake sending an event per `interval` tokens: direct, then each app."""
    fake = GpuFakeServer(f"capacity-{interval}", rate=args.rate, interval=interval, cpus=LOAD_CPU)
    apps = {"app": ROOT} | {f"app ({tree.name})": tree for tree in args.baseline}
    results: dict[int, dict[str, Sample]] = {}
    fake.start()
    try:
        for n in args.tabs:
            reading = functools.partial(direct, fake, n, args.tokens)
            results[n] = {"direct": await measure(args, fake, reading, label=f"direct-{n}-{interval}")}
            for path, tree in apps.items():
                results[n][path] = await through_app(args, fake, n, path, tree)
    finally:
        fake.stop()
    return results


def table(results: dict[int, dict[int, dict[str, Sample]]], args: argparse.Namespace) -> str:
    """The Markdown report: per tokens-per-event and number of tabs, the direct path and the apps side by side."""
    app_core, load_core = (min(APP_CPU), min(LOAD_CPU)) if APP_CPU and LOAD_CPU else (None, None)
    lines = [
        "| tokens per event | tabs | path | asked tok/s | delivered tok/s | of asked | first token p50 / p95 ms "
        "| added p50 / p95 ms | events/s in | updates/s out | app CPU s / 1000 tok | app core: app / all "
        "| load core: load / all | app MB | errors |",
        "|---:|---:|---|---:|---:|---:|---|---|---:|---:|---:|---|---|---:|---|",
    ]
    for interval, by_tabs in results.items():
        for n, paths in by_tabs.items():
            for path, sample in paths.items():
                through_app, seconds = path.startswith("app"), sample.seconds
                rate, asked = sample.tokens / seconds, n * args.rate
                ttft = f"{1000 * pct(sample.ttft, 50):.0f} / {1000 * pct(sample.ttft, 95):.0f}"
                added = cpu = app_busy = memory = updates = ""
                if through_app:
                    direct_ttft = paths["direct"].ttft
                    p50, p95 = pct(sample.ttft, 50) - pct(direct_ttft, 50), pct(sample.ttft, 95) - pct(direct_ttft, 95)
                    added = f"{1000 * p50:+.0f} / {1000 * p95:+.0f}"
                    cpu = f"{1000 * sample.app_cpu / sample.tokens:.3f}" if sample.tokens else ""
                    app_busy, memory = busy(sample.app_cpu, sample, app_core), f"{sample.app_memory_mb:.0f}"
                    updates = f"{sample.frames / seconds:.0f}"
                lines.append(
                    f"| {interval} | {n} | {path} | {asked:.0f} | {rate:.0f} | {rate / asked:.2f} | {ttft} | {added} "
                    f"| {sample.events / seconds:.0f} | {updates} | {cpu} | {app_busy} "
                    f"| {busy(sample.load_cpu, sample, load_core)} | {memory} | {sample.errors} of {sample.answers} |"
                )
    lines += parts_table(results) if args.py_spy else []
    lines += [
        "",
        f"Answers of {args.tokens} tokens at {args.rate:g} tokens/s per stream, measured over {args.seconds:g} s "
        "once every tab had started. Added: the app's first token against the direct path's, same percentile. "
        "Updates: the page updates (socket.io frames of the answer) the tabs received. A core's `all` counts every "
        "process on it: other work on the machine shows there.",
    ]
    return "\n".join(lines)


def parts_table(results: dict[int, dict[int, dict[str, Sample]]]) -> list[str]:
    """Where each profiled app's time went, and its CPU per upstream event, per page update and its frame."""
    lines = [
        "",
        "| tokens per event | tabs | path | app CPU s a second | "
        + " | ".join(f"{part} %" for part in [*PARTS, REST])
        + " | µs a vLLM event | µs a page update | µs its socket.io frame |",
        "|---:|---:|---|---:|" + "---:|" * (len(PARTS) + 4),
    ]
    for interval, by_tabs in results.items():
        for n, paths in by_tabs.items():
            for path, sample in paths.items():
                if sample.profile is None or not sample.profile.exists():
                    continue
                share = shares(sample.profile)
                costs = (
                    each(share[UPSTREAM], sample, sample.events),
                    each(share[UPDATES], sample, sample.frames),
                    each(share[PACKETS] + share[WEBSOCKET], sample, sample.frames),
                )
                lines.append(
                    f"| {interval} | {n} | {path} | {sample.app_cpu / sample.seconds:.2f} | "
                    + " | ".join([*(f"{100 * share[part]:.0f}" for part in [*PARTS, REST]), *costs])
                    + " |"
                )
    return lines


def each(share: float, sample: Sample, count: int) -> str:
    """The app's CPU microseconds per one of `count` things, the part of the samples that did them being `share`."""
    return f"{1e6 * share * sample.app_cpu / count:.0f}" if count else ""


def busy(seconds: float, sample: Sample, core: int | None) -> str:
    """A share of the window on a core: these seconds', and every process's."""
    everyone = f" / {100 * sample.core_busy[core] / sample.seconds:.0f} %" if core in sample.core_busy else ""
    return f"{100 * seconds / sample.seconds:.0f} %{everyone}"


async def run(args: argparse.Namespace) -> str:
    if LOAD_CPU:
        os.sched_setaffinity(0, LOAD_CPU)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {interval: await run_interval(args, interval) for interval in args.intervals}
    return table(results, args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tabs", default="8,64,256", help="comma-separated numbers of tabs")
    parser.add_argument("--rate", type=float, default=128.0, help="tokens per second of every stream")
    parser.add_argument("--intervals", default="1", help="comma-separated tokens per event (vLLM's --stream-interval)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per answer")
    parser.add_argument("--seconds", type=float, default=15.0, help="the measured window")
    parser.add_argument(
        "--app-env", action="append", default=[], metavar="NAME=VALUE", help="a setting of the app (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another checkout (e.g. `git archive` of a commit) whose app is measured beside this one (repeatable)",
    )
    parser.add_argument("--py-spy", default="", help="py-spy's path: the app is profiled over each window")
    parser.add_argument("--py-spy-rate", type=int, default=100, help="py-spy's samples a second")
    args = parser.parse_args()
    args.tabs = [int(n) for n in args.tabs.split(",")]
    args.intervals = [int(n) for n in args.intervals.split(",")]
    args.app_env = [tuple(pair.split("=", 1)) for pair in args.app_env]
    return publish(asyncio.run(run(args)), args.out, "bench-capacity")


if __name__ == "__main__":
    sys.exit(main())
