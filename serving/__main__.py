"""`python -m serving [--dry-run]`: print the computed server command (vLLM or llama.cpp) with reasons, then run it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from app.config import dotenv_file, load_or_explain
from serving import llama_cpp
from serving.advice import advice
from serving.errors import ServeError
from serving.machine import detect, probe_cpu_kernels
from serving.plan import ModelShape, ServeSettings, build_plan, choose_device
from serving.priority import lower_priority
from serving.quantize import Quant, Scheme, check_quality, checkpoint_dir, ensure_checkpoint, is_current

FETCH = (
    "import sys; from huggingface_hub import snapshot_download; "
    "print(snapshot_download(sys.argv[1], local_files_only=sys.argv[2] == '1', "
    "allow_patterns=['*.json', '*.safetensors', '*.model', '*.jinja', '*.txt']))"
)


def resolve_model(model: str, server_venv: str, offline: bool) -> str:
    """A local folder for the model: itself, or the Hugging Face cache (downloading unless offline)."""
    if Path(model).is_dir():
        return model
    python = os.path.join(server_venv, "bin", "python")
    if not os.path.exists(python):
        raise ServeError(f"{server_venv} is not installed yet (make install-server), so {model!r} cannot be looked up")
    env = {**os.environ, "HF_HUB_ETAG_TIMEOUT": "15", "HF_HUB_DOWNLOAD_TIMEOUT": "30"}
    result = subprocess.run(
        [python, "-c", FETCH, model, "1" if offline else "0"], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise ServeError(
            f"The model {model!r} is not a local folder and could not be "
            + ("found in the Hugging Face cache." if offline else "downloaded from the Hugging Face hub.")
            + " On a machine that reaches the hub run `hf download "
            + model
            + " --local-dir models/ernie`, "
            "copy that folder here and set MODEL=models/ernie in .env. To try the app without the real "
            "weights, `make tiny-model` builds a small random ERNIE-4.5 model (see README)."
        )
    return result.stdout.strip().splitlines()[-1]


def prepare_checkpoint(model_path: str, scheme: Scheme, *, dry_run: bool) -> str:
    """Build the quantized checkpoint if needed (not in a dry run) and pass its quality guard."""
    if dry_run:
        state = "cached" if is_current(model_path, scheme) else "built from the model before vLLM starts"
        return f"{scheme.value} checkpoint {checkpoint_dir(model_path, scheme)}: {state}"
    quant_venv = os.environ.get("QUANT_VENV", ".venv-quant")
    return check_quality(ensure_checkpoint(model_path, scheme, quant_venv))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    args = parser.parse_args()
    server_venv = os.environ.get("SERVER_VENV", ".venv-vllm")
    settings = load_or_explain(lambda: ServeSettings(_env_file=dotenv_file()), "make serve")
    if settings is None:
        return 2
    try:
        try:
            model_path = resolve_model(settings.model, server_venv, offline=args.dry_run)
        except ServeError as exc:
            if not args.dry_run:
                raise
            print(f"  - model not resolved, the plan uses its name: {exc}")
            model_path = settings.model  # a dry run still shows the flags
        config = Path(model_path, "config.json")
        shape = ModelShape.from_config(json.loads(config.read_text())) if config.exists() else None
        machine = detect(server_venv)
        if settings.engine == "llama.cpp":
            plan = llama_cpp.prepare(settings, machine, model_path, server_venv, dry_run=args.dry_run)
        else:
            if settings.quant is not Quant.NONE and choose_device(settings, machine) == "cpu":
                machine = dataclasses.replace(machine, **probe_cpu_kernels(server_venv))
            plan = build_plan(settings, machine, shape, model_path, server_venv)
        if plan.checkpoint is not None:
            plan.reasons.append(prepare_checkpoint(model_path, plan.checkpoint, dry_run=args.dry_run))
        if choose_device(settings, machine) == "cpu":
            plan.reasons.append(advice(machine))
    except ServeError as exc:
        print(f"make serve: {exc}", file=sys.stderr)
        return 2
    for name in [name for name in plan.env if name in os.environ and name != "VLLM_API_KEY"]:
        plan.env[name] = os.environ[name]
        plan.reasons.append(f"{name}={os.environ[name]}: set in the environment, kept")
    for reason in plan.reasons:
        print(f"  - {reason}")
    print(plan.shown(), flush=True)
    if args.dry_run:
        return 0
    lower_priority(plan.nice)
    os.execvpe(plan.argv[0], plan.argv, {**os.environ, **plan.env})


if __name__ == "__main__":
    sys.exit(main())
