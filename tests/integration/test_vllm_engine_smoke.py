"""Smoke tests of the real-vLLM test infrastructure itself.

Scenario tests trust that the engine answers, that its counters follow the load
we send, and that a restart resets them (the exporter must handle counter
resets). These tests pin those assumptions down before anything builds on them.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.integration.loadgen import LoadSpec, run_load
from tests.integration.vllm_server import SERVED_MODEL_NAME, VllmServer

pytestmark = pytest.mark.vllm

LIGHT_LOAD = LoadSpec(
    concurrency=2,
    prompt_tokens=(20, 40),
    output_tokens=(8, 16),
    duration_s=60.0,
    max_requests=4,
    request_timeout_s=60.0,
)


def _complete(server: VllmServer, prompt: str, max_tokens: int) -> dict[str, Any]:
    response = requests.post(
        f"{server.base_url}/v1/completions",
        json={"model": SERVED_MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens},
        timeout=60,
    )
    response.raise_for_status()
    return response.json()


def test_completion_and_generation_counter_follow_load(vllm_server: VllmServer) -> None:
    body = _complete(vllm_server, "kalo mine rusa", max_tokens=5)
    assert body["choices"][0]["text"]
    assert body["usage"]["completion_tokens"] == 5

    before = vllm_server.metric("vllm:generation_tokens_total") or 0.0
    result = run_load(vllm_server.base_url, LIGHT_LOAD)

    assert result.error_count == 0, [r.error for r in result.records if r.error]
    assert len(result.records) == LIGHT_LOAD.max_requests
    assert all(r.completion_tokens == r.max_tokens for r in result.records)
    assert all(0 < (r.ttft_s or 0) <= (r.e2e_s or 0) for r in result.records)
    after = vllm_server.metric("vllm:generation_tokens_total") or 0.0
    assert after - before >= result.requested_tokens


def test_restart_brings_server_back_with_reset_counters(vllm_server: VllmServer) -> None:
    _complete(vllm_server, "tivo zeda " * 20, max_tokens=4)
    before = vllm_server.metric("vllm:prompt_tokens_total")
    assert before and before > 0

    port = vllm_server.port
    vllm_server.restart()

    assert vllm_server.port == port
    after = vllm_server.metric("vllm:prompt_tokens_total") or 0.0
    assert after < before
    assert _complete(vllm_server, "kalo mine", max_tokens=3)["usage"]["completion_tokens"] == 3
