"""Build a tiny random-weight Llama (model + tokenizer) for the real vLLM engine.

No model may be downloaded in tests, so this script makes one deterministically
from a seed: a byte-level BPE tokenizer trained on generated pseudo-words and a
two-layer Llama with random weights. It imports torch/transformers/tokenizers,
which only the vLLM venv has, so run it with that venv's interpreter:

    <venv python> tests/integration/tiny_model.py OUT_DIR --seed N

The result is what vLLM needs: ``config.json``, ``model.safetensors`` and the
tokenizer files. A marker file makes re-runs for the same seed a no-op.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the real imports are deferred: only the vLLM venv has them
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER_NAME = ".tiny-model"
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
RECIPE_VERSION = 2  # bump whenever the recipe changes so cached builds are rebuilt
TARGET_VOCAB_SIZE = 2048
CORPUS_WORDS = 4000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "da", "fe", "gi", "ho", "ju", "pe")
# Minimal template so /v1/chat/completions works; vLLM refuses chat without one.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MODEL_SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,  # head_dim 64: vLLM's CPU attention rejects smaller heads
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}


def default_model_dir(seed: int) -> Path:
    """Conventional cache location (git-ignored) of the model for a seed."""
    return REPO_ROOT / ".cache" / f"tiny-llama-seed{seed}"


def pseudo_words(rng: random.Random, count: int) -> list[str]:
    """Fake words of one or two syllables; the load generator builds prompts from them.

    The inventory is small enough (272 words) that the trained tokenizer holds
    every word as one token, so a prompt of N words is about N tokens.
    """
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 2))) for _ in range(count)]


def word_inventory() -> list[str]:
    """Every word pseudo_words can produce, so training sees each one."""
    return [*SYLLABLES, *(a + b for a in SYLLABLES for b in SYLLABLES)]


def _marker_content(seed: int) -> str:
    return json.dumps(
        {"recipe": RECIPE_VERSION, "seed": seed, "vocab": TARGET_VOCAB_SIZE, **MODEL_SHAPE}, sort_keys=True
    )


def is_built(out_dir: Path, seed: int) -> bool:
    """True when out_dir already holds the model for this seed and shape."""
    marker = out_dir / MARKER_NAME
    return marker.is_file() and marker.read_text() == _marker_content(seed)


def build_tokenizer(seed: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on a seeded corpus; deterministic for a seed."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [" ".join(pseudo_words(rng, 12)) for _ in range(CORPUS_WORDS // 12)]
    corpus += [" ".join(word_inventory())] * 2  # every word seen, so each ends up a single token
    tokenizer = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TARGET_VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
        **SPECIAL_TOKENS,
    )


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> LlamaForCausalLM:
    """Random-weight Llama sized to the tokenizer; torch seed makes weights reproducible."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        **MODEL_SHAPE,
    )
    return LlamaForCausalLM(config)


def build(out_dir: Path, seed: int) -> Path:
    """Write model + tokenizer into out_dir unless already built for this seed.

    Writes into a sibling temp dir and renames, so an interrupted build never
    leaves a half-written model that a later run would mistake for a good one.
    """
    if is_built(out_dir, seed):
        return out_dir
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer = build_tokenizer(seed)
    build_model(tokenizer, seed).save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    (staging / MARKER_NAME).write_text(_marker_content(seed))
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", type=Path, help="default: <repo>/.cache/tiny-llama-seed<N>")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out_dir = args.out_dir or default_model_dir(args.seed)
    print(build(out_dir.resolve(), args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
