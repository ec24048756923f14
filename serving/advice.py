"""Which engine to pick on this CPU, from the last `make bench-serve` measured on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serving.machine import Machine

RESULTS = Path(__file__).resolve().parent.parent / "bench-results" / "bench-serve.json"
# bench-serve's configurations, as the settings that serve them.
SETTINGS_OF = {
    "chosen": "ENGINE=vllm",
    "int8": "ENGINE=vllm QUANT=int8",
    "int4": "ENGINE=vllm QUANT=int4",
    "llama-bf16": "ENGINE=llama.cpp",
    "llama-q8_0": "ENGINE=llama.cpp QUANT=int8",
    "llama-q4_k_m": "ENGINE=llama.cpp QUANT=int4",
}


def save(machine: Machine, cpu_name: str, date: str, rows: list[dict[str, Any]]) -> None:
    """Keep a bench-serve run's figures for the plan to advise from."""
    measured = [
        {"config": row["config"], "single_tps": row["single_tps"], "multi_tps": row["multi_tps"]}
        for row in rows
        if row["config"] in SETTINGS_OF
    ]
    document = {"cpu": cpu_name, "flags": sorted(machine.cpu_flags), "date": date, "rows": measured}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")


def advice(machine: Machine, results: Path = RESULTS) -> str:
    """A sentence on which settings answer one chat fastest and which serve the most chats at once here."""
    try:
        document = json.loads(results.read_text())
        rows = [row for row in document["rows"] if row["config"] in SETTINGS_OF]
    except (OSError, ValueError, KeyError, TypeError):
        rows = []
    if not rows or set(document.get("flags", ())) != set(machine.cpu_flags):
        return (
            "engine: make bench-serve measures vLLM and llama.cpp side by side on this CPU, "
            "and then this plan says which to pick (docs/serving.md has other machines' figures)"
        )
    one = max(rows, key=lambda row: row["single_tps"])
    many = max(rows, key=lambda row: row["multi_tps"])
    return (
        f"engine, from make bench-serve on this CPU ({document['date']}): one chat is answered fastest by "
        f"{SETTINGS_OF[one['config']]} ({one['single_tps']:.1f} tok/s); the most chats at once are served by "
        f"{SETTINGS_OF[many['config']]} ({many['multi_tps']:.1f} tok/s over 8 streams)"
    )
