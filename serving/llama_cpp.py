"""ENGINE=llama.cpp: llama.cpp's own server on a CPU, serving the model as GGUF converted and quantized here.

llama.cpp is built once per machine (`make install-llama-cpp`, from the source the llama-cpp-python sdist
carries) into a cache outside the clone, so later clones and CI runs reuse it. The GGUF files are cached
beside the QUANT checkpoints and rebuilt when the model's files change.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from serving.errors import ServeError
from serving.machine import Machine
from serving.plan import ServePlan, ServeSettings, add_common_choices, choose_device, passages_reason
from serving.quantize import CHECKPOINTS, Quant

# llama.cpp's types for QUANT: the model's bf16, 8-bit, and 4-bit (Q4_K_M keeps its output matrix at 6 bits).
TYPES = {Quant.NONE: "BF16", Quant.INT8: "Q8_0", Quant.INT4: "Q4_K_M"}
# Chats llama-server answers at once unless MAX_NUM_SEQS says: each slot holds a whole window of KV cache.
DEFAULT_SLOTS = 4
# Where make install-llama-cpp builds llama.cpp when LLAMA_CPP_DIR does not say.
DEFAULT_DIR = Path.home() / ".cache" / "ernie-chat" / "llama.cpp"


def llama_dir() -> Path:
    """The built llama.cpp: llama-server, llama-quantize and the converter."""
    return Path(os.environ.get("LLAMA_CPP_DIR") or DEFAULT_DIR)


def server_binary(folder: Path) -> Path:
    """llama-server in a built llama.cpp."""
    return folder / "bin" / "llama-server"


def source_stamp(model: Path) -> str:
    """Changes when any of the model's files change."""
    digest = hashlib.sha256()
    for path in sorted(model.iterdir()):
        if path.is_file():
            status = path.stat()
            digest.update(f"{path.name}:{status.st_size}:{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def gguf_path(model: Path, kind: str) -> Path:
    """Where the GGUF of this model (as its files are now) in this llama.cpp type is cached."""
    return CHECKPOINTS / "gguf" / f"{model.name}-{source_stamp(model)}.{kind.lower()}.gguf"


def gguf_of(model: Path, kind: str, folder: Path, server_python: str) -> Path:
    """The model as GGUF of a llama.cpp type: llama.cpp's converter at bf16, then llama-quantize; cached."""
    bf16 = gguf_path(model, "BF16")
    if not bf16.exists():
        bf16.parent.mkdir(parents=True, exist_ok=True)
        partial = bf16.with_suffix(".partial")
        command = [server_python, str(folder / "convert_hf_to_gguf.py"), str(model), "--outtype", "bf16"]
        env = {**os.environ, "PYTHONPATH": str(folder / "gguf-py")}
        run([*command, "--outfile", str(partial)], f"converting {model} to GGUF", env)
        partial.rename(bf16)
    if kind == "BF16":
        return bf16
    out = gguf_path(model, kind)
    if not out.exists():
        partial = out.with_suffix(".partial")
        run([str(folder / "bin" / "llama-quantize"), str(bf16), str(partial), kind], f"quantizing to {kind}", None)
        partial.rename(out)
    return out


def run(command: list[str], what: str, env: dict[str, str] | None) -> None:
    """Run a build step quietly; its output only when it fails."""
    print(f"  - {what} ...", flush=True)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ServeError(f"{what} failed:\n{(done.stdout + done.stderr)[-2000:]}")


def build_llama_plan(settings: ServeSettings, machine: Machine, gguf: Path, folder: Path) -> ServePlan:
    """The exact llama-server command for these settings on this CPU, a reason per choice."""
    served_name = settings.served_name
    slots = settings.max_num_seqs or DEFAULT_SLOTS
    threads = machine.physical_cores
    argv = [
        str(server_binary(folder)),
        *("--model", str(gguf), "--alias", served_name),
        *("--host", settings.vllm_host, "--port", str(settings.vllm_port)),
        *("--ctx-size", str(settings.max_model_len * slots), "--parallel", str(slots)),
        *("--threads", str(threads), "--threads-batch", str(threads)),
        "--jinja",
        "--no-webui",
    ]
    plan = ServePlan(argv)
    plan.reasons += [
        f"engine llama.cpp: ENGINE set; llama-server from {folder}",
        f"weights {gguf.name}: QUANT={settings.quant.value} as llama.cpp's {TYPES[settings.quant]}",
        f"ctx-size {settings.max_model_len * slots}: MAX_MODEL_LEN {settings.max_model_len} for each of {slots} slots",
        f"parallel {slots}: "
        + ("MAX_NUM_SEQS set" if settings.max_num_seqs else "chats answered at once (few gain more on a CPU)"),
        f"threads {threads}: every physical core, for decoding and for prompts",
        "jinja: the model's own chat template, as vLLM renders it",
        "no-webui: the chat UI is the app's",
    ]
    add_common_choices(plan, settings, "LLAMA_API_KEY")
    plan.reasons.append(passages_reason("cpu"))
    return plan


def prepare(
    settings: ServeSettings, machine: Machine, model_path: str, server_venv: str, *, dry_run: bool
) -> ServePlan:
    """The llama-server plan, its GGUF built first unless this is a dry run."""
    if choose_device(settings, machine) == "gpu":
        raise ServeError("ENGINE=llama.cpp serves on CPUs; on a GPU vLLM is the engine (ENGINE=vllm)")
    folder, kind, model = llama_dir(), TYPES[settings.quant], Path(model_path)
    built = server_binary(folder).exists()
    if dry_run:
        gguf = gguf_path(model, kind) if model.is_dir() else Path(f"{model.name}.{kind.lower()}.gguf")
        state = "cached" if gguf.exists() else "converted from the model before llama-server starts"
    else:
        if not built:
            raise ServeError(f"llama.cpp is not built in {folder}: make install-llama-cpp (once per machine, ~10 min)")
        gguf, state = gguf_of(model, kind, folder, os.path.join(server_venv, "bin", "python")), "ready"
    plan = build_llama_plan(settings, machine, gguf, folder)
    plan.reasons.append(f"GGUF {gguf}: {state}")
    if not built:
        plan.reasons.append(f"llama.cpp is not built in {folder} yet: make install-llama-cpp")
    return plan
