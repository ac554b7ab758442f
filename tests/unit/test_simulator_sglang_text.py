"""The simulator serves SGLang's /metrics as SGLang 0.5.23 prints it (the families of the real-format
capture, by name and type), with a hybrid sliding-window model's two KV pools from its state."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.promtext import parse_wanted, sample_names
from exporter.simulate import parse_scenario
from exporter.simulate.node import SimulatedNode
from exporter.simulate.sglang_text import render_sglang
from exporter.sources.engines import detect
from exporter.sources.engines.sglang import SglangMapping
from exporter.validation import ConfigError
from tests.support import fixture_text

CAPTURE = "sglang-0.5.23-hybrid-priority.prom"
# Short chats on a pool sized for long documents: every request shorter than the window costs the
# small SWA pool as much as the full one.
HYBRID = """
name: hybrid
node: {gpu: h100-sxm, gpus: 1}
workload:
  rate_per_second: 12
  prompt_tokens: {mean: 500, cv: 0.4, max: 900}
  output_tokens: {mean: 250, cv: 0.5, max: 700}
replicas:
  - {model: gemma-3-27b, engine_type: sglang, engine: {enable_prefix_caching: false, swa_full_tokens_ratio: 0.25}}
"""


@pytest.fixture(scope="module")
def served() -> tuple[SimulatedNode, str]:
    """A minute of the surge, and the first replica's page at its end."""
    simulated = SimulatedNode(parse_scenario(HYBRID, "test"))
    simulated.advance(60)
    return simulated, render_sglang(simulated.replicas[0])


@pytest.fixture(scope="module")
def text(served) -> str:
    return served[1]


def test_sglang_text_parses_and_has_the_capture_s_families_by_name_and_type(text):
    served = {(f.name, f.type) for f in text_string_to_metric_families(text)}
    real = {(f.name, f.type) for f in text_string_to_metric_families(fixture_text(CAPTURE))}
    assert served <= real, served - real
    assert {
        ("sglang:swa_token_usage", "gauge"),
        ("sglang:time_to_first_token_seconds", "histogram"),
        ("sglang:num_retracted_requests", "counter"),
    } <= served


def test_histogram_buckets_are_sglang_s(text):
    def bounds(page: str, name: str) -> list[float]:
        (family,) = [f for f in text_string_to_metric_families(page) if f.name == name]
        first = family.samples[0].labels
        return [
            float(s.labels["le"])
            for s in family.samples
            if s.name.endswith("_bucket")
            and {k: v for k, v in s.labels.items() if k != "le"} == {k: v for k, v in first.items() if k != "le"}
        ]

    for name in (
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:prompt_tokens_histogram",
    ):
        assert bounds(text, name) == bounds(fixture_text(CAPTURE), name), name


def test_the_swa_pool_fills_first_and_the_exporter_reads_the_fullest_pool(served):
    node, text = served
    replica = node.replicas[0]
    assert replica.swa is not None
    swa_usage = replica.swa.used_tokens / replica.swa.total_tokens
    assert swa_usage > 0.9 > 0.4 > replica.kv.usage
    assert type(detect(sample_names(text))) is SglangMapping
    mapping = SglangMapping()
    (reading,) = mapping.read(parse_wanted(text, mapping.wanted()))
    assert reading.model == "google/gemma-3-27b-it"
    assert reading.kv_pool_usage == {"full": round(replica.kv.usage, 2), "swa": round(swa_usage, 2)}
    assert reading.kv_cache_usage_ratio == round(swa_usage, 2)
    assert reading.requests_running == len(replica.running)
    assert reading.preemptions_total == replica.stats.preemptions > 0


def test_a_hybrid_model_runs_only_as_sglang():
    with pytest.raises(ConfigError) as error:
        parse_scenario(HYBRID.replace("engine_type: sglang, ", ""), "test")
    assert error.value.where == "replicas[0].engine_type"
