"""Build a compressed-tensors checkpoint with llm-compressor, and measure what quantizing cost.

Run by serving/quantize.py with the quantization environment's Python (llm-compressor pins other
versions than vLLM): `python serving/compress.py --source DIR --out DIR --scheme W8A8|W8A8-asym|W4A16|W4A16-head8`.
No calibration data: these schemes quantize weights by round-to-nearest and activations at run time.

The quality guard: next-token distributions of the model before and after quantizing, at every
position of a fixed prompt set, compared by top-1 agreement and mean KL(bf16 || quantized); written
to quality.json in the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

# Mixed on purpose: chat, Chinese, code, numbers, a long sentence.
PROMPTS = [
    "User: What is the capital of France?\nAssistant: The capital of France is",
    "User: Explain in two sentences how a rainbow forms.\nAssistant:",
    "User: 请用三句话介绍一下长城。\nAssistant:",
    "User: 把这句话翻译成英文：今天天气很好，我们去公园散步吧。\nAssistant:",
    "def fibonacci(n: int) -> int:\n    if n < 2:\n        return n\n    return",
    "SELECT name, count(*) FROM orders JOIN customers ON orders.customer_id = customers.id GROUP BY",
    "The quick brown fox jumps over the lazy dog. The five boxing wizards jump quickly. Pack my box with",
    "User: What is 17 multiplied by 23? Show the steps.\nAssistant: 17 × 23 =",
    "In 1969, Apollo 11 landed on the Moon. Neil Armstrong and Buzz Aldrin walked on the surface while",
    "User: Write a haiku about autumn leaves.\nAssistant:",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，",
    "User: Give me three tips for writing clear emails.\nAssistant: 1.",
]


def recipe(scheme: str) -> Any:
    """llm-compressor's modifier for a scheme: 8-bit schemes take the (untied) lm_head too, 4-bit leaves it."""
    from llmcompressor.modifiers.quantization import QuantizationModifier

    # vLLM 0.32 matches an untied lm_head only when named: the "Linear" target alone leaves it float.
    targets = ["Linear", "lm_head"]
    if scheme == "W8A8-asym":
        groups = {
            "group_0": {
                "targets": targets,
                "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"},
                "input_activations": {
                    "num_bits": 8,
                    "type": "int",
                    "symmetric": False,
                    "strategy": "token",
                    "dynamic": True,
                },
            }
        }
        return QuantizationModifier(config_groups=groups)
    if scheme == "W8A8":
        return QuantizationModifier(targets=targets, scheme=scheme)
    if scheme == "W4A16-head8":
        from compressed_tensors.quantization import preset_name_to_scheme

        # The decoder's Linear layers by name, so the head (a Linear too) is in the int8 group only.
        layers = preset_name_to_scheme("W4A16", [r"re:.*layers\.\d+\..*_proj$"])
        head = preset_name_to_scheme("W8A8", ["lm_head"])
        return QuantizationModifier(config_groups={"layers": layers, "head": head})
    return QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])


def untie_head(model: Any) -> None:
    """Give lm_head its own copy of the embedding, so it can be quantized while token lookups stay exact.

    With tied weights every decoded token reads the whole 103 424 x 1024 table as the output matrix:
    in bf16 that is 212 MB per token, a third of the model. Untied, the embedding is only looked up.
    """
    import torch

    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())


def next_token_log_probs(model: Any, batches: list[Any]) -> list[Any]:
    """Log-probabilities of the next token at every position of every prompt (float32)."""
    import torch

    with torch.no_grad():
        return [torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1) for ids in batches]


def compare(reference: list[Any], quantized: list[Any]) -> dict[str, float]:
    """Top-1 agreement and mean KL(reference || quantized) over all positions."""
    import torch

    agree = kl = positions = 0.0
    for ref, quant in zip(reference, quantized, strict=True):
        agree += float((ref.argmax(-1) == quant.argmax(-1)).sum())
        kl += float(torch.sum(ref.exp() * (ref - quant), dim=-1).sum())
        positions += ref.shape[0]
    return {"top1_agreement": agree / positions, "mean_kl": kl / positions, "positions": positions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scheme", choices=["W8A8", "W8A8-asym", "W4A16", "W4A16-head8"], required=True)
    args = parser.parse_args()

    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    started = time.perf_counter()
    print(f"    loading {args.source}", flush=True)
    model = AutoModelForCausalLM.from_pretrained(args.source, dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(args.source)
    batches = [tokenizer(prompt, return_tensors="pt").input_ids for prompt in PROMPTS]
    print(f"    reference distributions on {len(PROMPTS)} prompts", flush=True)
    reference = next_token_log_probs(model, batches)
    print(f"    quantizing ({args.scheme}, no calibration data)", flush=True)
    if args.scheme.startswith("W8A8") or args.scheme.endswith("head8"):
        untie_head(model)
    oneshot(model=model, recipe=recipe(args.scheme))
    print("    quantized distributions", flush=True)
    figures = compare(reference, next_token_log_probs(model, batches))
    print(
        f"    top-1 agreement {figures['top1_agreement']:.3f}, mean KL {figures['mean_kl']:.4f} "
        f"over {figures['positions']:.0f} positions",
        flush=True,
    )
    print(f"    saving to {args.out}", flush=True)
    model.save_pretrained(args.out, save_compressed=True)
    tokenizer.save_pretrained(args.out)
    for extra in ("generation_config.json", "chat_template.jinja"):
        if (args.source / extra).exists():
            shutil.copy2(args.source / extra, args.out / extra)
    figures["build_s"] = time.perf_counter() - started
    (args.out / "quality.json").write_text(json.dumps({**figures, "scheme": args.scheme}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
