"""A real disaggregated vLLM pair on CPU: a prefill and a decode instance of the tiny test model.

vLLM 0.32.0's `ExampleConnector` (the former shared-storage example) moves the KV cache through
files in a shared directory and runs on CPU: the prefill instance (`kv_role` kv_producer) saves the
prompt's KV, the decode instance (kv_consumer) loads it, keyed by the prompt's tokens. The router
is the P/D proxy's two legs (vLLM's examples/online_serving/disaggregated_serving): the prompt to
the prefill instance with `max_tokens: 1`, then the same prompt to the decode instance.

Both instances run from the vLLM venv in their own process groups (VllmServer); at most these two
vLLM processes run at once, niced, as the shared machine needs.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.integration.tiny_model import pseudo_words
from tests.integration.vllm_server import SERVED_MODEL_NAME, VllmServer

#: `ExampleConnector` loads a request's KV only for whole blocks of its prompt: prompts of several
#: 32-token blocks (a pseudo-word of the tiny model's corpus is about one token)
PROMPT_WORDS = (96, 160)


def kv_transfer_config(role: str, shared: Path) -> str:
    return json.dumps(
        {
            "kv_connector": "ExampleConnector",
            "kv_role": role,
            "kv_connector_extra_config": {"shared_storage_path": str(shared)},
        }
    )


@dataclass
class PdPair:
    prefill: VllmServer
    decode: VllmServer

    def ask(self, prompt: str, max_tokens: int, timeout_s: float = 120.0) -> dict[str, object]:
        """One request through both legs, as the P/D proxy sends it; the decode leg's answer."""
        body = {"model": SERVED_MODEL_NAME, "prompt": prompt, "temperature": 0.0, "ignore_eos": True}
        first = requests.post(
            f"{self.prefill.base_url}/v1/completions", json={**body, "max_tokens": 1}, timeout=timeout_s
        )
        first.raise_for_status()
        second = requests.post(
            f"{self.decode.base_url}/v1/completions", json={**body, "max_tokens": max_tokens}, timeout=timeout_s
        )
        second.raise_for_status()
        return dict(second.json())


def prompts(count: int, seed: int = 5) -> list[str]:
    """Distinct prompts of 96-160 tokens."""
    rng = random.Random(seed)
    return [" ".join(pseudo_words(rng, rng.randint(*PROMPT_WORDS))) for _ in range(count)]


class NicedVllmServer(VllmServer):
    """A VllmServer at nice 10: two engines beside everything else on a shared machine."""

    def command(self, python: Path, model_dir: Path) -> list[str]:
        return ["nice", "-n", "10", *super().command(python, model_dir)]


@contextlib.contextmanager
def pd_pair(shared: Path) -> Iterator[PdPair]:
    """The prefill instance, then the decode instance, stopped in turn however the block ends."""
    prefill = NicedVllmServer(extra_args=["--kv-transfer-config", kv_transfer_config("kv_producer", shared)])
    decode = NicedVllmServer(extra_args=["--kv-transfer-config", kv_transfer_config("kv_consumer", shared)])
    with prefill, decode:
        yield PdPair(prefill, decode)
