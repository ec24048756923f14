"""Build a random-weight ERNIE-4.5 model with a locally trained tokenizer (no hub).

The weights are random except for one embedding dimension: +1 for tokens that decode to text on
their own, -1 for special tokens and partial UTF-8 byte tokens. The residual stream then carries a
large constant in that dimension, so with tied embeddings those tokens get strongly negative logits:
answers never end early on an end-of-sentence token, every answer is exactly max_tokens long, and
every streamed token is visible text (tests and benchmarks rely on all three).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

# ERNIE-4.5's chat template: optional system line, "User: ...\n", "Assistant: ...<|end_of_sentence|>".
CHAT_TEMPLATE = (
    "{%- if not add_generation_prompt is defined -%}{%- set add_generation_prompt = true -%}{%- endif -%}"
    "{{- '<|begin_of_sentence|>' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{{- message['content'] + '\n' -}}"
    "{%- elif message['role'] == 'user' -%}{{- 'User: ' + message['content'] + '\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- 'Assistant: ' + message['content'] + '<|end_of_sentence|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant: ' -}}{%- endif -%}"
)

# Ids 0-4 are fixed as in baidu/ERNIE-4.5-0.3B-PT.
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|begin_of_sentence|>", "<|end_of_sentence|>"]

# Model shapes. "tiny" keeps head_dim 32, a size vLLM's CPU attention kernel supports.
SHAPES: dict[str, dict[str, int]] = {
    "tiny": dict(
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=4096,
    ),
    "full": dict(
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=18,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=128,
        vocab_size=103424,
    ),
}

CORPUS_LINES = [
    "Hello! How can I help you today?",
    "The quick brown fox jumps over the lazy dog.",
    "User: What is the capital of France?\nAssistant: The capital of France is Paris.",
    "Explain how a transformer language model predicts the next token.",
    "Write a short poem about the sea, the wind and the stars.",
    "def add(a: int, b: int) -> int:\n    return a + b",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 2026",
    "你好！今天我能帮你做什么？",
    "请用三句话介绍一下大语言模型。",
    "北京是中国的首都，上海是最大的城市。",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "写一首关于大海和星星的短诗。",
    "Markdown: **bold**, *italic*, `code`, # heading, - list item, | table |",
    "Emoji 😀 🚀 ✨ and symbols <>&\"' {}[]()",
]


def train_tokenizer(vocab_size: int) -> Any:
    """Train a byte-level BPE tokenizer on a built-in corpus, padded to vocab_size ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab_size, 4096),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS_LINES * 50, trainer=trainer)
    # Every id the model can emit must decode to text, so fill the vocabulary up.
    missing = vocab_size - tokenizer.get_vocab_size()
    if missing > 0:
        tokenizer.add_tokens([AddedToken(f" w{i}", normalized=False) for i in range(missing)])
    return tokenizer


def byte_level_alphabet() -> dict[str, int]:
    """The character byte-level BPE writes for each byte (GPT-2's table: printable bytes stand for themselves)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [byte for byte in range(256) if byte not in printable]
    table = {chr(byte): byte for byte in printable}
    table |= {chr(256 + offset): byte for offset, byte in enumerate(others)}
    return table


def write_sentencepiece_vocabulary(tokenizer: Any, path: Path) -> None:
    """The same vocabulary as a SentencePiece model: llama.cpp's converter reads an ERNIE-4.5 vocabulary from one.

    The real model ships a tokenizer.model. Here each piece is written as the text it stands for (space
    as "▁"), single bytes as SentencePiece's byte pieces, so llama.cpp can tokenize any text.
    """
    from sentencepiece import sentencepiece_model_pb2 as spm

    model = spm.ModelProto()
    model.trainer_spec.model_type = spm.TrainerSpec.BPE
    model.trainer_spec.vocab_size = tokenizer.get_vocab_size()
    model.trainer_spec.byte_fallback = True
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = False
    alphabet = byte_level_alphabet()
    seen: set[str] = set()
    for byte_level, index in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]):
        entry = model.pieces.add()
        entry.score, entry.piece = -float(index), byte_level
        text = tokenizer.decode([index])
        if index < len(SPECIAL_TOKENS):
            entry.type = spm.ModelProto.SentencePiece.UNKNOWN if index == 0 else spm.ModelProto.SentencePiece.CONTROL
        elif byte_level in alphabet:
            entry.type = spm.ModelProto.SentencePiece.BYTE
            entry.piece = f"<0x{alphabet[byte_level]:02X}>"
        elif visible(text) and text.replace(" ", "▁") not in seen:
            entry.piece = text.replace(" ", "▁")
        seen.add(entry.piece)
    path.write_bytes(model.SerializeToString())


def visible(piece: str) -> bool:
    """True for a token that decodes to text by itself (not a fragment of a UTF-8 character)."""
    return bool(piece) and "\ufffd" not in piece


def build(out: Path, shape: str, seed: int, dtype: str) -> None:
    """Write config, random weights, tokenizer and chat template to out."""
    import torch
    from transformers import Ernie4_5Config, Ernie4_5ForCausalLM, PreTrainedTokenizerFast

    dims = SHAPES[shape]
    raw = train_tokenizer(dims["vocab_size"])
    vocab_size = raw.get_vocab_size()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<unk>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE

    torch.manual_seed(seed)
    config = Ernie4_5Config(
        **{**dims, "vocab_size": vocab_size},
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        use_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype=dtype,
    )
    model = Ernie4_5ForCausalLM(config)
    silent = [i for i in range(vocab_size) if i < len(SPECIAL_TOKENS) or not visible(raw.decode([i]))]
    with torch.no_grad():
        embeddings = model.get_input_embeddings().weight
        embeddings[:, 0] = 1.0
        embeddings[silent, 0] = -1.0
    model = model.to(getattr(torch, dtype))
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_sentencepiece_vocabulary(raw, tmp / "tokenizer.model")
    (tmp / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": [2, 4], "pad_token_id": 0}, indent=2)
    )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--force", action="store_true", help="rebuild even if out exists")
    args = parser.parse_args()
    if (args.out / "config.json").exists() and not args.force:
        print(f"model already built: {args.out}")
        return 0
    build(args.out, args.shape, args.seed, args.dtype)
    print(f"built {args.shape} ERNIE-4.5 model in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
