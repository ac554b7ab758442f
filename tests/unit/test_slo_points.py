"""SLO attainment at every measuring point (engine, gateway, probe), and the gap between the
client side and the engine side put on the part of the path that holds it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from exporter.buckets import Observations
from exporter.model import Histogram, Metric, QuantileSummary, Sample, SliceHistograms
from exporter.settings import GatewayTarget, ProbeTarget, SloTarget
from exporter.slo.attainment import attainment_samples, evaluate
from exporter.slo.gap import explain
from exporter.slo.monitor import SloMonitor
from exporter.slo.points import PathLayout, evaluate_client_side

ENGINE = {"engine": "vllm-0", "engine_type": "vllm", "model": "llama"}
GATEWAY = {"gateway": "hap", "gateway_type": "haproxy"}


def histogram_of(*seconds: float) -> Histogram:
    observations = Observations()
    for value in seconds:
        observations.observe(value)
    return observations.histogram()


def summary(name: str, labels: dict[str, str], *seconds: float, window_s: float = 10.0) -> QuantileSummary:
    h = histogram_of(*seconds)
    return QuantileSummary(name, labels, (), h.count, h.sum, histogram=h, window=h, window_seconds=window_s)


def engine_up(model: str = "llama", engine: str = "vllm-0") -> Sample:
    return Sample("llm_engine_up", {**ENGINE, "engine": engine, "model": model}, 1.0)


SLO = SloTarget(name="chat", objective=0.9, ttft_seconds=0.1, e2e_seconds=1.0)
LAYOUT = PathLayout.of(
    [GatewayTarget(url="http://h/metrics", name="hap", type="haproxy")],
    [ProbeTarget(name="p", url="http://h/v1", model="llama", direct_url="http://e/v1", gateway="hap")],
)


def starved_host() -> list[Metric]:
    """The engine counts 0.2-0.8 s per request; the gateway 0.2 s more each, 0.15 s of it before the
    engine's clock (its upstream time), 0.05 s queued in the gateway."""
    engine_e2e = (0.2, 0.4, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9)
    gateway_e2e = tuple(t + 0.2 for t in engine_e2e)
    return [
        engine_up(),
        Sample("llm_host_cpu_overall_utilization_ratio", {}, 0.97),
        summary("llm_engine_e2e_request_latency_seconds", ENGINE, *engine_e2e),
        summary("llm_engine_time_to_first_token_seconds", ENGINE, *([0.02] * 10)),
        summary("llm_gateway_request_duration_seconds", GATEWAY, *gateway_e2e),
        summary("llm_gateway_upstream_duration_seconds", GATEWAY, *(t + 0.15 for t in engine_e2e)),
        summary("llm_gateway_queue_time_seconds", GATEWAY, *([0.05] * 10)),
        summary("llm_probe_time_to_first_token_seconds", {"probe": "p", "path": "gateway"}, 0.03, 0.2, 0.25, 0.05),
        summary("llm_probe_time_to_first_token_seconds", {"probe": "p", "path": "direct"}, 0.03, 0.18, 0.2, 0.04),
        summary("llm_probe_e2e_latency_seconds", {"probe": "p", "path": "gateway"}, 0.1, 0.3),
    ]


def test_each_point_judges_what_it_measures_and_says_where() -> None:
    metrics = starved_host()
    results = evaluate([SLO], metrics) + evaluate_client_side([SLO], metrics, LAYOUT)
    found = {(r.measured_at, r.dimension): r.attainment for r in results}
    assert found == {
        ("engine", "ttft"): 1.0,
        ("engine", "e2e"): 1.0,
        ("gateway", "e2e"): 0.4,  # 0.4, 0.6, 0.8 and 1.0 s within 1 s; the six 1.1 s are not
        ("probe", "ttft"): 0.5,  # the probe's e2e (a four-token answer) judges no SLO
    }
    gateway = next(r for r in results if r.measured_at == "gateway")
    assert gateway.goodput == pytest.approx(0.4 * 10 / 10.0)
    labels = {
        s.labels["measured_at"]: s.labels for s in attainment_samples(results, [SLO]) if "measured_at" in s.labels
    }
    assert labels["gateway"]["gateway"] == "hap" and "engine" not in labels["gateway"]
    assert labels["probe"]["probe"] == "p" and labels["engine"]["engine"] == "vllm-0"


def test_a_gateway_is_judged_only_on_slos_that_cover_every_model_behind_it() -> None:
    metrics = [*starved_host(), engine_up(model="mistral", engine="vllm-1")]
    only_llama = SloTarget(name="llama", objective=0.9, model="llama", e2e_seconds=1.0)
    assert evaluate_client_side([only_llama], metrics, LAYOUT) == []
    behind_one = PathLayout({"hap": ("vllm-0",)}, {})
    (judged,) = evaluate_client_side([only_llama], metrics, behind_one)
    assert judged.measured_at == "gateway"


def test_behind_llm_d_s_coordinator_the_epp_s_first_token_is_a_leg_and_not_judged() -> None:
    """The coordinator sends a disaggregated request's prefill and decode legs through the EPP as
    two requests: the EPP's TTFT is the decode leg's (short), not the client's; its request
    duration still holds every request and stays judged."""
    epp = {"gateway": "epp", "gateway_type": "epp"}
    metrics = [
        engine_up(),
        summary("llm_gateway_time_to_first_token_seconds", epp, *([0.02] * 10)),
        summary("llm_gateway_request_duration_seconds", epp, *([0.5] * 10)),
    ]
    layout = PathLayout({"epp": ()}, {})
    alone = {r.dimension for r in evaluate_client_side([SLO], metrics, layout)}
    assert alone == {"ttft", "e2e"}
    coordinator = Sample("llm_gateway_up", {"gateway": "coord", "gateway_type": "llm-d-coordinator"}, 1.0)
    behind = {r.dimension for r in evaluate_client_side([SLO], [*metrics, coordinator], layout)}
    assert behind == {"e2e"}


def test_the_gap_is_put_on_the_part_of_the_path_that_holds_the_extra_time() -> None:
    metrics = starved_host()
    results = evaluate([SLO], metrics) + evaluate_client_side([SLO], metrics, LAYOUT)
    gaps = {(g.measured_at, g.dimension): g for g in explain(results, metrics, LAYOUT)}
    e2e = gaps[("gateway", "e2e")]
    assert e2e.points == pytest.approx(0.6)
    assert e2e.parts["API server's host"] == pytest.approx(0.15)
    assert e2e.parts["gateway queue"] == pytest.approx(0.05)
    assert e2e.parts["gateway"] == pytest.approx(0.0, abs=1e-9)
    assert e2e.holder == "API server's host"
    assert "held by the API server's host (host CPU 97% busy)" in e2e.line()
    ttft = gaps[("probe", "ttft")]
    assert ttft.holder == "API server's host"  # direct 112.5 ms mean vs the engine's 20 ms
    assert ttft.parts["gateway and client network"] == pytest.approx(0.02)


def test_a_queue_at_the_gateway_is_named_when_it_holds_the_time() -> None:
    metrics = [m for m in starved_host() if m.name != "llm_gateway_queue_time_seconds"]
    metrics.append(summary("llm_gateway_queue_time_seconds", GATEWAY, *([0.19] * 10)))
    metrics = [m for m in metrics if m.name != "llm_gateway_upstream_duration_seconds"]
    metrics.append(summary("llm_gateway_upstream_duration_seconds", GATEWAY, 0.21, 0.41, 0.61, 0.81, *([0.91] * 6)))
    results = evaluate([SLO], metrics) + evaluate_client_side([SLO], metrics, LAYOUT)
    (gap,) = [g for g in explain(results, metrics, LAYOUT) if g.measured_at == "gateway"]
    assert gap.holder == "gateway queue"


def test_no_gap_is_attributed_where_the_two_clocks_agree() -> None:
    metrics = [
        engine_up(),
        summary("llm_engine_e2e_request_latency_seconds", ENGINE, 0.2, 0.3),
        summary("llm_gateway_request_duration_seconds", GATEWAY, 0.21, 0.31),
    ]
    results = evaluate([SLO], metrics) + evaluate_client_side([SLO], metrics, LAYOUT)
    (gap,) = explain(results, metrics, LAYOUT)
    assert gap.points == 0 and gap.holder is None and not math.isnan(gap.client)


def test_each_point_counts_the_refusals_it_sees_and_its_slices_say_where_they_were_measured() -> None:
    """The engine's admission rejections are misses of the engine's attainment only, the gateway's
    429s of the gateway's only; a tenant's slice is judged at each point that has it, labelled so."""
    engine_ttft = histogram_of(*([0.05] * 8))
    gateway_e2e = histogram_of(*([0.6] * 10))
    team = (("tenant", "team-a"), SliceHistograms(gateway_e2e, gateway_e2e, 10.0))

    def snapshot(engine_refused: float, gateway_refused: float) -> list[Metric]:
        return [
            engine_up(),
            summary("llm_engine_e2e_request_latency_seconds", ENGINE, *([0.5] * 8)),
            replace(summary("llm_gateway_request_duration_seconds", GATEWAY, *([0.6] * 10)), slices=(team,)),
            replace(
                summary("llm_engine_time_to_first_token_seconds", ENGINE, *([0.05] * 8)),
                slices=((("tenant", "team-a"), SliceHistograms(engine_ttft, engine_ttft, 10.0)),),
            ),
            Sample("llm_engine_admission_rejections_total", {**ENGINE, "reason": "max_num_seqs"}, engine_refused),
            Sample("llm_gateway_requests_total", {**GATEWAY, "code_class": "4xx", "code": "429"}, gateway_refused),
        ]

    monitor = SloMonitor([SLO], 60.0, gateways=[GatewayTarget(url="http://h/metrics", name="hap", type="haproxy")])
    monitor.update(snapshot(0.0, 0.0), 0.0)
    out = monitor.update(snapshot(2.0, 4.0), 10.0)
    found = {(r.measured_at, r.dimension): r for r in monitor.latest}
    # The engine: 8 served within 1 s, 2 refused at its door. The gateway: HAProxy's access log
    # holds its 429s (4 of its 10 events were refusals it answered fast), taken off its good events.
    assert found[("engine", "e2e")].attainment == pytest.approx(8 / 10)
    assert found[("gateway", "e2e")].attainment == pytest.approx(6 / 10)
    assert found[("gateway", "e2e")].window is not None and found[("gateway", "e2e")].window.total == 10.0
    sliced = {
        (s.labels["measured_at"], s.labels["dimension"]): s.value
        for s in out
        if s.name == "llm_slo_slice_attainment_ratio" and isinstance(s, Sample)
    }
    # Slices carry no refusals: each is judged on its own histogram, at the point that has it.
    assert sliced == {("gateway", "e2e"): 1.0, ("engine", "ttft"): 1.0}
