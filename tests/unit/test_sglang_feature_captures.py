"""The SGLang 0.5.23 captures built from its own collectors, read through the whole exporter.

tests/integration/build_sglang_fixtures.py ran SGLang's SchedulerMetricsCollector and
TokenizerMetricsCollector, one process per rank, and rendered the pages as SGLang's HTTP server
does (provenance in tests/fixtures/engines/README.md). Each expected value was read from the
capture; the comment gives the line. A capture is one page, so the exporter reads it as `once`
does (its histograms' lifetime as the window).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exporter.app import Exporter, Pipeline
from exporter.model import EngineReading
from exporter.promtext import parse_wanted
from exporter.settings import Config, EngineTarget, GpuSettings, ScrapeLimits, SloTarget
from exporter.sources.engine import EngineSource
from exporter.sources.engines import MAPPINGS
from tests.support import UNHURRIED, UNHURRIED_SECONDS, RouteServer, fixture_text, respond_with
from tests.unit.test_vllm_feature_captures import samples

HYBRID = "sglang-0.5.23-hybrid-priority.prom"
NODES = ("sglang-0.5.23-dp-attention-node0.prom", "sglang-0.5.23-dp-attention-node1.prom")
#: TTFT within 1 s: team-a (priority 0) 30 of 30 (line 264), team-b (priority 1) 12 of 30 (line 285)
TTFT_1S = SloTarget("ttft-1s", 0.9, ttft_seconds=1.0)


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A sample's key as `samples` gives it: the name and the labels beside the engine's, sorted."""
    return name, tuple(sorted(labels.items()))


def reading(capture: str) -> EngineReading:
    mapping = MAPPINGS["sglang"]
    parsed = parse_wanted(fixture_text(capture), mapping.wanted())
    (found,) = mapping.read(parsed)
    mapping.read_slices(
        parsed, ScrapeLimits(slice_labels=(("tenant", ("tenant",)), ("priority", ("priority",)))), [found]
    )
    return found


def test_priority_queues_read_their_total_and_slice_the_classes() -> None:
    r = reading(HYBRID)
    # Lines 3-5 and 8-10: the total under priority="", the classes beside it (not added to it).
    assert (r.requests_running, r.requests_waiting) == (12.0, 7.0)
    assert r.slice_running == {("priority", "0"): 9.0, ("priority", "1"): 3.0}
    assert r.slice_waiting == {("priority", "0"): 2.0, ("priority", "1"): 5.0}


def test_hybrid_kv_capacity_is_the_fullest_pool() -> None:
    r = reading(HYBRID)
    assert r.kv_cache_usage_ratio == 0.93  # line 31: swa_token_usage (full 0.41 at line 28)
    assert r.kv_pool_usage == {"full": 0.41, "swa": 0.93}  # no mamba pool: mamba_usage 0, no mamba tokens


def test_lora_mfu_retractions_and_cached_tokens() -> None:
    r = reading(HYBRID)
    assert (r.lora_slots_used, r.lora_slots_total) == (3.0, 4.0)  # lines 124, 127
    assert r.estimated_flops_total == 3.1e15  # line 212
    assert (r.estimated_read_bytes_total, r.estimated_write_bytes_total) == (1.9e12, 4e10)  # 215, 218
    assert r.preemptions_total == 4.0  # line 203
    assert r.prompt_tokens_cached_total == {"local": 15360.0}  # line 708: cache_source="device"
    # spec_accept_rate is logged 0 by every scheduler; spec_accept_length 0 says none runs.
    assert r.spec_decode_acceptance_ratio is None


@pytest.fixture
def engine() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def once(target: EngineTarget, slos: tuple[SloTarget, ...] = ()) -> Exporter:
    config = Config(gpu=GpuSettings("none"), slos=slos)
    source = EngineSource(target, 60.0, lifetime_baseline=True)
    exporter = Exporter(config, lifetime_baseline=True, clock=lambda: 0.0, pipeline=Pipeline([source], []))
    exporter.collect_once()
    return exporter


def test_attainment_goodput_and_queueing_per_slice(engine: RouteServer) -> None:
    engine.routes["/metrics"] = respond_with(fixture_text(HYBRID))
    exporter = once(EngineTarget(url=engine.url("/metrics"), name="s", type="sglang", limits=UNHURRIED), (TTFT_1S,))
    try:
        found = samples(exporter, "llm_")
    finally:
        exporter.stop()
    ttft = {"dimension": "ttft", "slo": "ttft-1s", "measured_at": "engine"}
    assert found[key("llm_slo_attainment_ratio", **ttft)] == pytest.approx(42 / 60)
    for (dimension, value), within in {
        ("tenant", "team-a"): 1.0,
        ("tenant", "team-b"): 0.4,
        ("priority", "1"): 0.4,
    }.items():
        assert found[key("llm_slo_slice_attainment_ratio", **ttft, slice_by=dimension, slice=value)] == within
    assert found[key("llm_engine_slice_requests_waiting", slice_by="priority", slice="1")] == 5.0
    assert found[key("llm_engine_slices_folded", slice_by="tenant")] == 0.0
    # Queueing per class on the engine's line (5 waiting): the low-priority class is the one that waits.
    score = "llm_bottleneck_slice_score"
    assert found[key(score, stage="queueing", slice_by="priority", slice="1")] == 1.0
    assert found[key(score, stage="queueing", slice_by="priority", slice="0")] == pytest.approx(1.5 / 4.5, abs=1e-4)


def test_past_the_bound_a_dimension_folds_into_other_and_says_how_many(engine: RouteServer) -> None:
    engine.routes["/metrics"] = respond_with(fixture_text(HYBRID))
    limits = ScrapeLimits(max_slices_per_dimension=1, timeout_seconds=UNHURRIED_SECONDS)
    exporter = once(EngineTarget(url=engine.url("/metrics"), name="s", type="sglang", limits=limits), (TTFT_1S,))
    try:
        found = samples(exporter, "llm_")
    finally:
        exporter.stop()
    ttft = {"dimension": "ttft", "slo": "ttft-1s", "measured_at": "engine"}
    # Both tenants served 30 requests: the first by name keeps its slice, the other is `other`.
    assert found[key("llm_slo_slice_attainment_ratio", **ttft, slice_by="tenant", slice="team-a")] == 1.0
    assert found[key("llm_slo_slice_attainment_ratio", **ttft, slice_by="tenant", slice="other")] == 0.4
    assert found[key("llm_engine_slices_folded", slice_by="tenant")] == 1.0
    assert not any(dict(labels).get("slice") == "team-b" for _, labels in found)


def test_a_multi_node_engine_is_joined_and_a_silent_node_is_named(engine: RouteServer) -> None:
    for index, capture in enumerate(NODES):
        engine.routes[f"/node{index}"] = respond_with(fixture_text(capture))
    target = EngineTarget(
        url=engine.url("/node0"), name="dsv3", type="sglang", rank_urls=(engine.url("/node1"),), limits=UNHURRIED
    )
    config = Config(gpu=GpuSettings("none"))
    clock = [0.0]
    exporter = Exporter(config, clock=lambda: clock[0], pipeline=Pipeline([EngineSource(target, 60.0)], []))
    try:
        exporter.collect_once()
        both = samples(exporter, "llm_engine_")
        engine.routes["/node1"] = respond_with("", status=500)
        clock[0] = 5.0
        exporter.collect_once()
        one = samples(exporter, "llm_engine_")
        (entry,) = exporter.diagnosis()["engines"]
    finally:
        exporter.stop()
    # Node 0 (line 3-10: dp ranks 0-1, each on two tensor-parallel ranks) and node 1 (dp 2-3):
    # running 9 + 11 + 8 + 14, waiting 0 + 2 + 0 + 6, the fullest rank's KV 0.88.
    assert both[("llm_engine_requests_running", ())] == 42.0
    assert both[("llm_engine_requests_waiting", ())] == 8.0
    assert both[("llm_engine_kv_cache_usage_ratio", ())] == 0.88
    ranks = {dict(labels)["rank"]: value for (name, labels), value in both.items() if name == "llm_engine_rank_up"}
    assert len(ranks) == 8 + 2 and all(value == 1.0 for value in ranks.values())
    assert one[("llm_engine_up", ())] == 1.0  # node 0 still answers
    assert one[("llm_engine_requests_running", ())] == 20.0
    silent = {
        dict(labels)["rank"] for (name, labels), value in one.items() if name == "llm_engine_rank_up" and not value
    }
    assert silent == {
        f"url={engine.url('/node1')}",
        "dp_rank=2,tp_rank=4,pp_rank=0",
        "dp_rank=2,tp_rank=5,pp_rank=0",
        "dp_rank=3,tp_rank=6,pp_rank=0",
        "dp_rank=3,tp_rank=7,pp_rank=0",
    }
    # /diagnosis names them beside the verdict reached without them.
    assert set(entry["ranks_not_reporting"]) == silent
