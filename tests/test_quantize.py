"""QUANT: the planner's choice per scheme and device, the checkpoint built by llm-compressor, served by vLLM."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

import serving.quantize
from serving.errors import ServeError
from serving.machine import AmxProbe, Gpu, probe_cpu_kernels
from serving.plan import ModelShape, ServeSettings, build_plan
from serving.quantize import Quant, Scheme, check_quality, ensure_checkpoint
from tests.support.chat_client import ChatClient
from tests.support.plans import ERNIE, MACHINES, SERVER_VENV, parse_with_vllm
from tests.support.servers import ROOT, ChatApp, VllmServer, hermetic_environment, running

TINY_MODEL = os.environ.get("TINY_MODEL", str(ROOT / ".cache/models/ernie-tiny"))
QUANT_VENV = os.environ.get("QUANT_VENV", str(ROOT / ".venv-quant"))
CPU = MACHINES["cpu-2-cores"]
L4 = MACHINES["gpu-24gb"]
T4 = dataclasses.replace(L4, gpus=(Gpu("Tesla T4", 16 * 2**30, 7.5),))
A100 = dataclasses.replace(L4, gpus=(Gpu("NVIDIA A100", 80 * 2**30, 8.0),))


def plan_for(quant: Quant, machine=CPU, shape: ModelShape = ERNIE):
    return build_plan(ServeSettings(quant=quant), machine, shape, "/models/ernie", SERVER_VENV)


def served_path(plan) -> str:
    """The weights folder vLLM is told to load (`vllm serve PATH` or `--model PATH`)."""
    return str(plan.argv[2] if plan.argv[1] == "serve" else plan.argv[plan.argv.index("--model") + 1])


@pytest.mark.parametrize(
    ("quant", "machine", "served", "args", "reason"),
    [
        (Quant.NONE, CPU, "/models/ernie", [], "quantization none"),
        (Quant.INT8, dataclasses.replace(CPU, int8_amx=AmxProbe.RUNS), "ernie.w8a8", [], "AMX kernel (probed: it ran)"),
        (Quant.INT8, dataclasses.replace(CPU, int8_amx=AmxProbe.ABSENT), "ernie.w8a8", [], "oneDNN kernel (no AMX)"),
        (
            Quant.INT8,
            dataclasses.replace(CPU, int8_amx=AmxProbe.ABSENT, onednn_int8_ms=(7.3, 1.5)),
            "ernie.w8a8",
            [],
            "WARNING: slower than QUANT=none on this CPU (one 1024->6144 step took 7.30 ms in int8 against 1.50",
        ),
        (
            Quant.INT8,
            dataclasses.replace(CPU, int8_amx=AmxProbe.ABSENT, onednn_int8_ms=(0.4, 1.5)),
            "ernie.w8a8",
            [],
            "(no AMX); one 1024->6144 step took 0.40 ms in int8",
        ),
        (Quant.INT8, dataclasses.replace(CPU, int8_amx=AmxProbe.CRASHED), "ernie.w8a8-asym", [], "crashed in a probe"),
        (Quant.INT4, CPU, "ernie.w4a16", [], "WNA16 kernel"),
        (Quant.INT8, L4, "/models/ernie", ["--quantization", "fp8"], "compute capability 8.9: fp8 tensor cores"),
        (Quant.INT8, A100, "/models/ernie", ["--quantization", "fp8"], "through Marlin"),
        (Quant.INT4, L4, "ernie.w4a16", [], "Marlin 4-bit"),
    ],
)
def test_each_scheme_on_each_device_is_planned_with_its_reason(quant, machine, served, args, reason):
    plan = plan_for(quant, machine)
    assert served_path(plan).endswith(served)
    assert (plan.checkpoint is not None) == served.startswith("ernie.")
    if args:
        assert plan.argv[plan.argv.index(args[0]) : plan.argv.index(args[0]) + 2] == args
    else:
        assert "--quantization" not in plan.argv
    assert any(reason in line for line in plan.reasons), plan.reasons


@pytest.mark.parametrize("quant", [Quant.INT8, Quant.INT4])
def test_a_scheme_the_device_cannot_run_is_refused_with_what_to_pick(quant):
    with pytest.raises(ServeError, match=r"compute capability 8\.0 or newer, this one has 7\.5\. Use QUANT=none"):
        plan_for(quant, T4)


def test_four_bit_on_a_cpu_whose_vllm_build_lacks_the_kernel_is_refused():
    with pytest.raises(ServeError, match=r"4-bit kernel \(cpu_gemm_wna16\) is not in the build.*Use QUANT=int8"):
        plan_for(Quant.INT4, dataclasses.replace(CPU, int4_kernel=False))
    assert "probed: in this CPU's build" in plan_for(Quant.INT4, dataclasses.replace(CPU, int4_kernel=True)).reasons[1]


def test_four_bit_on_a_cpu_needs_layer_sizes_in_multiples_of_32():
    odd = dataclasses.replace(ERNIE, linear_sizes=(1000, 3072, 2048, 256))
    with pytest.raises(ServeError, match=r"multiples of 32.*Use QUANT=int8 or none"):
        plan_for(Quant.INT4, CPU, odd)
    assert plan_for(Quant.INT8, CPU, odd).checkpoint is Scheme.W8A8


@pytest.mark.vllm
def test_every_quantized_command_is_accepted_by_vllms_parser():
    commands = []
    for machine in (CPU, L4, A100):
        for quant in Quant:
            plan = plan_for(quant, machine)
            commands.append(plan.argv[2:] if plan.argv[1] == "serve" else plan.argv[3:])
    parse_with_vllm(commands)


def test_the_probe_reports_a_kernel_that_kills_its_process(tmp_path):
    # A Python that lists AMX and the 4-bit kernel, then dies of SIGILL running the AMX int8 matmul.
    lying = tmp_path / "bin" / "python"
    lying.parent.mkdir()
    lying.write_text(
        '#!/bin/sh\ncase "$2" in *int8_scaled_mm_with_quant*) kill -ILL $$;; esac\n'
        'echo \'{"amx": true, "wna16": true}\'\n'
    )
    lying.chmod(lying.stat().st_mode | stat.S_IXUSR)
    assert probe_cpu_kernels(str(tmp_path)) == {
        "int8_amx": AmxProbe.CRASHED,
        "int4_kernel": True,
        "onednn_int8_ms": None,
    }
    assert probe_cpu_kernels(str(tmp_path / "absent")) == {}


@pytest.mark.vllm
def test_the_probe_runs_vllms_kernels_on_this_machine():
    found = probe_cpu_kernels(SERVER_VENV)
    # This CPU either runs vLLM's AMX int8 kernel or torch says it has no AMX; a crash here is a finding.
    assert found["int8_amx"] in (AmxProbe.RUNS, AmxProbe.ABSENT) and isinstance(found["int4_kernel"], bool)
    int8_ms, float_ms = found["onednn_int8_ms"]
    assert 0 < int8_ms < 1000 and 0 < float_ms < 1000


@pytest.mark.vllm
def test_a_checkpoint_is_built_once_and_again_when_its_source_changes(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(serving.quantize, "CHECKPOINTS", tmp_path / "cache")
    source = tmp_path / "ernie-copy"
    shutil.copytree(TINY_MODEL, source)
    built = ensure_checkpoint(str(source), Scheme.W4A16, QUANT_VENV)
    assert built == tmp_path / "cache" / "ernie-copy.w4a16"
    config = json.loads((built / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    assert config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] == 4
    assert "built in" in capfd.readouterr().out
    assert "quality guard: top-1 agreement with bf16" in check_quality(built)
    weights = built / "model.safetensors"
    first = weights.stat().st_mtime_ns

    assert ensure_checkpoint(str(source), Scheme.W4A16, QUANT_VENV) == built
    assert "up to date" in capfd.readouterr().out and weights.stat().st_mtime_ns == first

    (source / "config.json").write_text((source / "config.json").read_text() + "\n")
    ensure_checkpoint(str(source), Scheme.W4A16, QUANT_VENV)
    assert "built in" in capfd.readouterr().out and weights.stat().st_mtime_ns != first


@pytest.mark.parametrize(
    ("top1", "kl", "verdict"),
    [(0.97, 0.01, "fine"), (0.85, 0.01, "warned"), (0.95, 0.2, "warned"), (0.95, 0.6, "refused")],
)
def test_the_quality_guard_warns_then_refuses(tmp_path, top1, kl, verdict):
    (tmp_path / "quality.json").write_text(json.dumps({"top1_agreement": top1, "mean_kl": kl, "positions": 300}))
    if verdict == "refused":
        with pytest.raises(ServeError, match=r"too far from the model's own answers\. Use QUANT=int8 or none"):
            check_quality(tmp_path)
        return
    line = check_quality(tmp_path)
    assert f"top-1 agreement with bf16 {top1:.3f}" in line and line.startswith("WARNING") == (verdict == "warned")


@pytest.mark.vllm
@pytest.mark.app
@pytest.mark.parametrize(("quant", "kernel"), [("int8", "CPUInt8ScaledMMLinearKernel"), ("int4", "CPUWNA16")])
async def test_a_quantized_tiny_model_answers_through_the_chat_app(quant, kernel):
    if quant == "int4" and not probe_cpu_kernels(SERVER_VENV)["int4_kernel"]:
        # This CPU's vLLM build has no 4-bit kernel: make serve says so instead of starting a vLLM that dies.
        env = hermetic_environment(MODEL=TINY_MODEL, QUANT="int4", SERVER_VENV=SERVER_VENV, QUANT_VENV=QUANT_VENV)
        command = [sys.executable, "-m", "serving"]
        result = await asyncio.to_thread(
            subprocess.run, command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 2 and "Use QUANT=int8" in result.stderr, result.stderr[-2000:]
        return
    server = VllmServer(f"quant-{quant}", quant=quant)
    app = ChatApp(server)
    with running(server, app):
        tab = ChatClient(app.url)
        await tab.connect()
        await tab.greeting()
        produced = await tab.ask("Hello from a quantized model")
        await tab.close()
        answers = [m for m in produced if m.get("type") == "assistant_message" and not m.get("isError")]
        assert answers and answers[-1]["output"].strip()
        log = server.log_path.read_text(errors="replace")
        assert "quality guard: top-1 agreement" in log and kernel in log
        assert f"ernie-tiny.{'w8a8' if quant == 'int8' else 'w4a16'}" in log
