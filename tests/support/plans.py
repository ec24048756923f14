"""What serving plans are made for and checked against: the tiny model's shape, sample machines, vLLM's parser."""

from __future__ import annotations

import json
import os
import subprocess

from serving.machine import Gpu, Machine
from serving.plan import ModelShape
from tests.support.servers import ROOT

SERVER_VENV = os.environ.get("SERVER_VENV", str(ROOT / ".venv-vllm"))
GIB = 2**30


# baidu/ERNIE-4.5-0.3B-PT's config.json, the fields that size memory.
ERNIE_CONFIG = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 18,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "vocab_size": 103424,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
ERNIE = ModelShape.from_config(ERNIE_CONFIG)


MACHINES = {
    "cpu-2-cores": Machine(
        cpus=2,
        physical_cores=2,
        cpu_flags=frozenset({"avx512f", "avx512_bf16"}),
        available_memory_bytes=23 * GIB,
        libraries={"iomp5": "/x/libiomp5.so", "tcmalloc": "/y/libtcmalloc_minimal.so.4"},
    ),
    "gpu-24gb": Machine(
        cpus=16,
        physical_cores=8,
        cpu_flags=frozenset({"avx2"}),
        available_memory_bytes=64 * GIB,
        gpus=(Gpu("NVIDIA L4", 24 * GIB, 8.9),),
    ),
    "gpu-80gb": Machine(
        cpus=32,
        physical_cores=16,
        cpu_flags=frozenset({"avx512f"}),
        available_memory_bytes=256 * GIB,
        gpus=(Gpu("NVIDIA H100", 80 * GIB, 9.0),),
    ),
    "cpu-8-cores-no-bf16": Machine(
        cpus=16, physical_cores=8, cpu_flags=frozenset({"avx2"}), available_memory_bytes=32 * GIB
    ),
}


PARSE = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
for argv in json.loads(sys.stdin.read()):
    make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
print("ok")
"""


def parse_with_vllm(commands: list[list[str]]) -> None:
    """vLLM's own argument parser accepts every command (its error is the assertion's message)."""
    result = subprocess.run(
        [os.path.join(SERVER_VENV, "bin", "python"), "-c", PARSE],
        input=json.dumps(commands),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]
