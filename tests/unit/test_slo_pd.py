"""SLO attainment of a disaggregated model: each request judged once, where it ends.

The simulator's pair (one prefill and one decode worker of one model, in vLLM-NIXL's and SGLang's
formats) served over HTTP and read by the real engine source: both workers count every request in
their own histograms, so summing the engines' SLO events would count it twice and put the prefill
legs' one-token answers among the requests'.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from exporter.app import Exporter, Pipeline
from exporter.model import Histogram, QuantileSummary, Sample
from exporter.settings import Config, EngineTarget, GpuSettings, SloTarget
from exporter.simulate import parse_scenario
from exporter.simulate.node import SimulatedNode
from exporter.simulate.pd_sglang_text import render_sglang
from exporter.simulate.vllm_text import render_vllm
from exporter.slo.attainment import evaluate
from exporter.slo.legs import judged_dimensions
from exporter.sources.engine import EngineSource
from tests.support import UNHURRIED, RouteServer, respond_with

PAIR = """
name: pd
node: {{gpu: h100-sxm, gpus: 2}}
disaggregation: {{format: {format}}}
replicas:
  - {{model: llama-3.1-8b, role: prefill, count: 1}}
  - {{model: llama-3.1-8b, role: decode, count: 1}}
workload: {{rate_per_second: 4, prompt_tokens: {{mean: 800}}, output_tokens: {{mean: 50}}}}
phases:
  - name: steady
"""
SLO = SloTarget("chat", 0.95, ttft_seconds=1.0, itl_seconds=0.05, e2e_seconds=10.0)


@pytest.fixture
def engines() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def _scrape_pair(engines: RouteServer, fmt: str) -> tuple[Exporter, list[Sample]]:
    """Two reads of the pair 20 simulated seconds apart; the SLO samples of the second."""
    node = SimulatedNode(parse_scenario(PAIR.format(format=fmt), "test"))
    prefill, decode = node.replicas

    def serve() -> None:
        for name, replica in (("p0", prefill), ("d0", decode)):
            text = render_vllm(replica, 1.7e9) if fmt == "vllm-nixl" else render_sglang(replica)  # type: ignore[arg-type]
            engines.routes[f"/{name}"] = respond_with(text)

    clock = [0.0]
    targets = [
        EngineTarget(
            url=engines.url(f"/{name}"),
            name=name,
            type="vllm" if fmt == "vllm-nixl" else "sglang",
            role=role,
            limits=UNHURRIED,
        )
        for name, role in (("p0", "prefill"), ("d0", "decode"))
    ]
    config = Config(gpu=GpuSettings("none"), slos=(SLO,))
    sources = [EngineSource(t, 60.0) for t in targets]
    exporter = Exporter(config, clock=lambda: clock[0], pipeline=Pipeline(sources, []))
    node.advance(30.0)
    serve()
    exporter.collect_once()
    node.advance(20.0)
    clock[0] = 20.0
    serve()
    snapshot = exporter.collect_once()
    # The prefill worker did count the requests in its own histograms: the old sum took them twice.
    prefill_e2e = [
        m
        for m in snapshot.metrics
        if isinstance(m, QuantileSummary)
        and m.name == "llm_engine_e2e_request_latency_seconds"
        and m.labels.get("role") == "prefill"
    ]
    assert prefill_e2e and prefill_e2e[0].count > 0
    slo_samples = [m for m in snapshot.metrics if isinstance(m, Sample) and m.name.startswith("llm_slo_")]
    return exporter, slo_samples


def _decode_count(exporter: Exporter, family: str) -> float:
    return next(
        m.count
        for m in exporter.latest.metrics
        if isinstance(m, QuantileSummary) and m.name == family and m.labels.get("role") == "decode"
    )


def test_a_vllm_pair_counts_each_request_once_on_the_decode_worker_and_leaves_ttft_to_a_gateway(
    engines: RouteServer,
) -> None:
    exporter, samples = _scrape_pair(engines, "vllm-nixl")
    events = {(s.labels["engine"], s.labels["dimension"]): s.value for s in samples if s.name == "llm_slo_events_total"}
    # e2e and ITL on the decode worker only: the model's events are its requests, once.
    assert set(events) == {("d0", "e2e"), ("d0", "itl")}
    assert events[("d0", "e2e")] == _decode_count(exporter, "llm_engine_e2e_request_latency_seconds")
    assert not [s for s in samples if s.labels.get("role") == "prefill"]
    # No engine sees a vLLM pair's whole TTFT (the decode leg's clock starts after the prefill
    # leg answered): not judged at the engine, and the diagnosis says why and where to look.
    assert not [s for s in samples if s.labels.get("dimension") == "ttft" and s.labels.get("measured_at") == "engine"]
    report = exporter.diagnosis()
    skipped = {(u["point"]["engine"], u["dimension"]) for u in report["slo"]["not_judged_at_engine"]}
    assert skipped == {("p0", "all"), ("d0", "ttft")}
    decode = next(e for e in report["engines"] if e["engine"] == "d0")
    assert any(
        "ttft not judged on this decode worker" in line and "not judged at all" in line for line in decode["evidence"]
    )
    exporter.stop()


def test_an_sglang_pair_judges_ttft_on_the_decode_worker_whose_clock_starts_with_the_request(
    engines: RouteServer,
) -> None:
    exporter, samples = _scrape_pair(engines, "sglang")
    events = {(s.labels["engine"], s.labels["dimension"]): s.value for s in samples if s.name == "llm_slo_events_total"}
    assert {engine for engine, _ in events} == {"d0"}
    assert events[("d0", "ttft")] == _decode_count(exporter, "llm_engine_time_to_first_token_seconds")
    assert ("d0", "e2e") in events
    exporter.stop()


def _ttft(labels: dict[str, str], good: float, total: float) -> QuantileSummary:
    window = Histogram((1.0, math.inf), (good, total), 0.0, total)
    return QuantileSummary(
        "llm_engine_time_to_first_token_seconds",
        labels,
        ((0.5, 0.1),),
        total,
        0.0,
        histogram=window,
        window=window,
        window_seconds=10.0,
    )


def test_prefill_legs_answered_within_the_threshold_no_longer_lift_the_models_attainment() -> None:
    # 100 requests: the prefill legs all within 1 s (a one-token answer), the decode side's
    # first tokens half of them within. Counted together: 150 of 200, 75 %; the request: 50 %.
    base = {"engine_type": "sglang", "model": "m"}
    metrics = [
        _ttft({**base, "engine": "p0", "role": "prefill"}, 100, 100),
        _ttft({**base, "engine": "d0", "role": "decode"}, 50, 100),
    ]
    results = evaluate([SloTarget("chat", 0.95, ttft_seconds=1.0)], metrics)
    assert [(r.labels["engine"], r.attainment) for r in results] == [("d0", 0.5)]


@pytest.mark.parametrize(
    ("labels", "judged"),
    [
        ({}, {"ttft", "itl", "e2e"}),  # a unified engine, or a gateway
        ({"role": "prefill", "engine_type": "sglang"}, set()),
        ({"role": "decode", "engine_type": "vllm"}, {"itl", "e2e"}),
        ({"role": "decode", "engine_type": "sglang"}, {"ttft", "itl", "e2e"}),
    ],
)
def test_judged_dimensions_by_role_and_engine(labels: dict[str, str], judged: set[str]) -> None:
    assert judged_dimensions(labels) == judged
