"""What the serving plan needs to know about this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU."""

    name: str
    memory_bytes: int


@dataclass(frozen=True)
class Machine:
    """CPU, memory and GPUs of the machine vLLM will run on."""

    cpus: int
    physical_cores: int
    cpu_flags: frozenset[str]
    available_memory_bytes: int
    gpus: tuple[Gpu, ...] = ()
    libraries: dict[str, str] = field(default_factory=dict)

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
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    gpus = []
    for line in out.strip().splitlines():
        name, _, mib = line.rpartition(",")
        if mib.strip().isdigit():
            gpus.append(Gpu(name.strip(), int(mib) * 2**20))
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
