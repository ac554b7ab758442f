"""SLO attainment and goodput from engine histograms, the `slos:` key, and capacity headroom."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import pytest

from exporter.app import Exporter, Pipeline
from exporter.config import ConfigError, build
from exporter.model import Histogram, QuantileSummary, Sample
from exporter.settings import Config, EngineTarget, GpuSettings, SloTarget
from exporter.slo.attainment import evaluate, within
from exporter.slo.headroom import HISTORY_SECONDS, CapacityEstimator, LoadPoint, estimate, fit_decode_pace
from exporter.slo.queueing import erlang_c
from exporter.slo.selectors import covers
from exporter.sources.engine import EngineSource
from tests.support import UNHURRIED, RouteServer, respond_with

INF = math.inf
# vLLM's TTFT bucket edges (vllm/v1/metrics/loggers.py), cut to the range used here.
EDGES = (0.1, 0.25, 0.5, 0.75, 1.0, 2.5, INF)


def histogram(counts: tuple[float, ...]) -> Histogram:
    cumulative = tuple(sum(counts[: i + 1]) for i in range(len(counts)))
    return Histogram(EDGES, cumulative, 0.0, cumulative[-1])


def test_a_threshold_on_an_edge_gives_one_exact_count() -> None:
    count = within(1.0, histogram((10, 20, 30, 20, 10, 5, 5)))
    assert (count.lower, count.upper, count.total) == (90, 90, 100)


def test_a_threshold_between_edges_is_bounded_by_the_edges_around_it() -> None:
    count = within(0.6, histogram((10, 20, 30, 20, 10, 5, 5)))
    assert (count.lower, count.upper) == (60, 80)  # certainly within at 0.5, possibly within at 0.75


def test_a_threshold_below_the_first_edge_certainly_holds_nothing() -> None:
    count = within(0.05, histogram((10, 20, 30, 20, 10, 5, 5)))
    assert (count.lower, count.upper) == (0, 10)


def test_a_threshold_past_the_last_finite_edge_is_bounded_by_the_inf_bucket() -> None:
    count = within(5.0, histogram((10, 20, 30, 20, 10, 5, 5)))
    assert (count.lower, count.upper) == (95, 100)


def slo(**overrides: object) -> SloTarget:
    values: dict[str, object] = {"name": "chat", "objective": 0.95, "ttft_seconds": 1.0, **overrides}
    return SloTarget(**values)  # type: ignore[arg-type]


def test_selectors_match_exactly_or_as_an_anchored_regex() -> None:
    assert covers(slo(model="llama-3.1-8b"), "e", "llama-3.1-8b")
    assert covers(slo(model="llama-.*"), "e", "llama-3.1-8b")
    assert not covers(slo(model="llama"), "e", "codellama-13b")  # anchored, as PromQL's =~
    assert covers(slo(model="a+b"), "e", "a+b")  # an exact name with regex characters still matches
    # linear time: `(a+)+` against 40 a's and a mismatch backtracked 2^40 paths in Python's `re`
    assert not covers(slo(model="(a+)+"), "e", "a" * 40 + "!")
    assert not covers(slo(engine="vllm-[0-3]"), "vllm-4", "m")


def summary(window: Histogram | None, seconds: float, lifetime: Histogram) -> QuantileSummary:
    labels = {"engine": "e", "engine_type": "vllm", "model": "m"}
    name = "llm_engine_time_to_first_token_seconds"
    return QuantileSummary(name, labels, (), lifetime.count, 0.0, lifetime, window, seconds)


def test_attainment_and_goodput_over_the_window_and_counts_over_the_lifetime() -> None:
    window = histogram((10, 20, 30, 20, 10, 5, 5))
    lifetime = histogram((100, 200, 300, 200, 100, 50, 50))
    ttft = summary(window, 50.0, lifetime)
    e2e = QuantileSummary("llm_engine_e2e_request_latency_seconds", ttft.labels, (), 1000, 0.0, lifetime, window, 50.0)
    (result,) = evaluate([slo()], [ttft, e2e])
    assert result.attainment == pytest.approx(0.9)
    assert result.goodput == pytest.approx(0.9 * 100 / 50)
    assert (result.lifetime.lower, result.lifetime.total) == (900, 1000)


def test_an_empty_window_has_no_attainment_rather_than_zero() -> None:
    (result,) = evaluate([slo()], [summary(histogram((0,) * 7), 50.0, histogram((1, 0, 0, 0, 0, 0, 0)))])
    assert math.isnan(result.attainment)


def test_slos_config_is_validated_key_by_key() -> None:
    config = build({"slos": [{"name": "chat", "model": "llama.*", "ttft_seconds": 1, "objective": 0.95}]})
    assert config.slos == (SloTarget("chat", 0.95, model="llama.*", ttft_seconds=1.0),)
    assert build({}).slos == Config().slos == ()
    bad = [
        ({"name": "x", "objective": 0.9}, "slos[0]: needs at least one"),
        ({"name": "x", "ttft_seconds": 1, "objective": 1}, "slos[0].objective"),
        ({"name": "x", "ttft_seconds": 1}, "slos[0].objective: missing"),
        ({"name": "x", "ttft_seconds": -1, "objective": 0.9}, "slos[0].ttft_seconds"),
        (
            {"name": "x", "ttft_seconds": 1, "objective": 0.9, "model": "("},
            "slos[0].model: not a valid RE2 regular expression",
        ),
        # RE2, as PromQL's =~: no lookarounds or backreferences (Python's `re` took them, and backtracked)
        ({"name": "x", "ttft_seconds": 1, "objective": 0.9, "engine": "(?!x).*"}, "slos[0].engine: not a valid RE2"),
        ({"name": "a b", "ttft_seconds": 1, "objective": 0.9}, "slos[0].name"),
        ({"name": "x", "ttft_seconds": 1, "objective": 0.9, "p99": 1}, "slos[0].p99: unknown key"),
    ]
    for item, message in bad:
        with pytest.raises(ConfigError) as caught:
            build({"slos": [item]})
        assert str(caught.value).startswith(message), (item, str(caught.value))
    with pytest.raises(ConfigError, match="duplicate SLO"):
        build({"slos": [{"name": "x", "e2e_seconds": 5, "objective": 0.9}] * 2})


# --- end to end through the engine source: two scrapes of a vLLM endpoint, one snapshot ----------


def vllm_ttft(counts: tuple[int, ...]) -> str:
    """A vLLM /metrics body with the TTFT and e2e histograms at the given per-bucket counts."""
    lines = []
    for family in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        lines.append(f"# TYPE {family} histogram")
        total = 0
        for edge, count in zip(EDGES, counts):
            total += count
            le = "+Inf" if edge == INF else f"{edge}"
            lines.append(f'{family}_bucket{{le="{le}",model_name="m"}} {total}')
        lines += [f'{family}_count{{model_name="m"}} {total}', f'{family}_sum{{model_name="m"}} {total * 0.5}']
    lines += ["# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{model_name="m"} 4']
    return "\n".join(lines) + "\n"


@pytest.fixture
def engine() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def test_exported_families_from_two_scrapes_of_a_vllm_endpoint(engine: RouteServer) -> None:
    clock = [0.0]
    target = EngineTarget(url=engine.url("/metrics"), name="e", type="vllm", limits=UNHURRIED)
    config = Config(
        gpu=GpuSettings("none"),
        slos=(SloTarget("chat", 0.95, ttft_seconds=0.6),),
    )
    exporter = Exporter(config, clock=lambda: clock[0], pipeline=Pipeline([EngineSource(target, 60.0)], []))
    engine.routes["/metrics"] = respond_with(vllm_ttft((0, 0, 0, 0, 0, 0, 0)))
    exporter.collect_once()
    clock[0] = 10.0
    # 100 requests in 10 s: 60 at or below 0.5 s (certainly within 0.6), 80 at or below 0.75 s.
    engine.routes["/metrics"] = respond_with(vllm_ttft((10, 20, 30, 20, 10, 5, 5)))
    snapshot = exporter.collect_once()
    values = {
        (m.name, m.labels.get("dimension")): m.value
        for m in snapshot.metrics
        if isinstance(m, Sample) and m.name.startswith("llm_slo_")
    }
    assert values[("llm_slo_attainment_ratio", "ttft")] == pytest.approx(0.6)
    assert values[("llm_slo_attainment_upper_bound_ratio", "ttft")] == pytest.approx(0.8)
    assert values[("llm_slo_goodput_requests_per_second", "ttft")] == pytest.approx(6.0)
    assert values[("llm_slo_events_total", "ttft")] == 100
    assert values[("llm_slo_good_events_total", "ttft")] == 60
    assert values[("llm_slo_objective_ratio", None)] == 0.95
    # The diagnosis quotes it: attainment and the burn since the first scrape (40 % missed / 5 %).
    (report,) = exporter.diagnosis()["engines"]
    assert "TTFT SLO chat (0.6 s, 95%): 60.0% within, budget burning 8.0× over 10 s" in report["evidence"]
    exporter.stop()


def test_a_failed_scrape_is_a_gap_in_the_burn_not_its_start(engine: RouteServer) -> None:
    """An overloaded engine's /metrics misses its deadline now and then: the burn the diagnosis
    quotes goes on over the whole span, not "over 5 s" after every such round."""
    clock = [0.0]
    target = EngineTarget(url=engine.url("/metrics"), name="e", type="vllm", limits=UNHURRIED)
    config = Config(gpu=GpuSettings("none"), slos=(SloTarget("chat", 0.95, ttft_seconds=0.6),))
    exporter = Exporter(config, clock=lambda: clock[0], pipeline=Pipeline([EngineSource(target, 60.0)], []))
    counts = (0,) * 7
    try:
        for n in range(8):
            clock[0] = n * 5.0
            counts = tuple(c + k for c, k in zip(counts, (1, 2, 3, 2, 1, 1, 1)))
            engine.routes["/metrics"] = respond_with(b"busy", 503) if n == 5 else respond_with(vllm_ttft(counts))
            exporter.collect_once()
        (report,) = exporter.diagnosis()["engines"]
    finally:
        exporter.stop()
    assert any(line.endswith("budget burning 9.1× over 35 s") for line in report["evidence"]), report["evidence"]


def test_an_engine_missing_for_a_round_keeps_its_load_history_for_the_estimate() -> None:
    slo = SloTarget("tpot", 0.95, itl_seconds=0.2)
    estimator = CapacityEstimator()
    for now in (1.0, 2.0, 4.0):
        estimator.update([slo], _engine_snapshot(0.0, 40, 80.0, 20.0), now)
        estimator.update([slo], [], now + 0.5)  # a round its scrape failed
    (history,) = estimator._history.values()
    assert len(history) == 3
    estimator.update([slo], [], 4.0 + HISTORY_SECONDS + 1.0)  # gone for an hour: forgotten
    assert not estimator._history


def test_low_gpu_utilization_is_answered_with_the_headroom_figure() -> None:
    from exporter.slo.evidence import evidence_lines
    from exporter.slo.replicas import estimates

    labels = {"engine": "e", "engine_type": "vllm", "model": "m", "slo": "chat"}
    capacity = estimates(
        [Sample("llm_capacity_max_request_rate", labels, 10.0), Sample("llm_capacity_headroom_ratio", labels, 0.05)]
    )
    gpu = [Sample("llm_gpu_utilization_ratio", {"gpu": "0", "engine": "e"}, 0.35)]
    lines = evidence_lines([], {}, capacity, gpu)[("e", "", "m")]
    assert lines == [
        "GPU utilization 35% is not idle capacity: under SLO chat this engine carries at most ~10.0 req/s "
        "(5% headroom); more concurrency would break it"
    ]
    busy = [Sample("llm_gpu_utilization_ratio", {"gpu": "0", "engine": "e"}, 0.9)]
    assert evidence_lines([], {}, capacity, busy) == {}


# --- capacity ------------------------------------------------------------------------------------


def test_decode_pace_is_fitted_when_the_load_varied_and_the_prior_is_used_when_it_did_not() -> None:
    points = [(b, 0.005 + 0.0001 * b) for b in (10, 20, 40, 80, 120)]
    fitted = fit_decode_pace(points, points[-1])
    assert fitted.intercept == pytest.approx(0.005) and fitted.slope == pytest.approx(0.0001)
    assert fitted.confidence > 0.5
    flat = fit_decode_pace([(40, 0.009)] * 5, (40, 0.009))
    assert flat.confidence == pytest.approx(0.3) and flat.intercept == pytest.approx(0.0045)


def test_erlang_c_matches_the_textbook_values() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)  # Kleinrock's M/M/2 at rho 0.5
    assert erlang_c(10, 10.0) == 1.0


def point(running: float, itl: float, rate: float, kv: float = 0.1) -> LoadPoint:
    latency = {"0.95": {"llm_engine_inter_token_latency_seconds": itl * 1.2}}
    return LoadPoint(t=0.0, rate=rate, running=running, kv_usage=kv, itl_mean=itl, latency=latency)


def test_itl_headroom_extrapolates_the_fitted_decode_pace_through_littles_law() -> None:
    # ITL = 5 ms + 0.1 ms per running request; S ∝ ITL, so λ = b / (k·ITL(b)).
    history = [point(b, 0.005 + 0.0001 * b, b / (1000 * (0.005 + 0.0001 * b))) for b in (10, 20, 40, 60)]
    result = estimate(SloTarget("tpot", 0.95, itl_seconds=0.03), history)
    assert result is not None
    # ITL p95 = 1.2 × mean must stay ≤ 30 ms: mean 25 ms, b = 200, λ = 200 / 25 = 8 req/s.
    assert result.max_concurrency == pytest.approx(200, rel=0.01)
    assert result.max_request_rate == pytest.approx(8.0, rel=0.01)
    assert result.headroom_ratio == pytest.approx(1 - history[-1].rate / 8.0, rel=0.01)


def test_an_idle_engine_gets_no_estimate() -> None:
    assert estimate(SloTarget("tpot", 0.95, itl_seconds=0.03), [point(0, 0.005, 0.0)]) is None


def _engine_snapshot(
    running: float, completed: float, e2e_sum: float, queue_sum: float, total_requests: float = 0.0
) -> list:
    """What the estimator reads of one engine: its gauges, its settings, its token counters (40
    prompt and 6 answer tokens a request) and windowed e2e, ITL and queue time."""
    labels = {"engine": "e", "engine_type": "vllm", "model": "m"}
    settings = {**labels, "block_size": "32", "num_gpu_blocks": "48"}

    def summary(name: str, total: float, count: float) -> QuantileSummary:
        window = Histogram((0.01, 0.1, 1.0, INF), (0.0, count, count, count), total, count)
        return QuantileSummary(name, labels, (), max(count, total_requests), total, window, window, 20.0)

    return [
        Sample("llm_engine_up", labels, 1.0),
        Sample("llm_engine_requests_running", labels, running),
        Sample("llm_engine_kv_cache_usage_ratio", labels, 0.0),
        Sample("llm_engine_config_info", settings, 1.0),
        Sample("llm_engine_prompt_tokens_total", labels, 40.0 * total_requests),
        Sample("llm_engine_generation_tokens_total", labels, 6.0 * total_requests),
        summary("llm_engine_e2e_request_latency_seconds", e2e_sum, completed),
        summary("llm_engine_inter_token_latency_seconds", completed * 0.5, completed * 10),
        summary("llm_engine_queue_time_seconds", queue_sum, completed),
    ]


def test_a_running_gauge_that_missed_the_load_gives_way_to_littles_law() -> None:
    # A CPU-starved vLLM answers /metrics only between bursts: the gauge read 0 at every scrape
    # while 40 requests completed in the 20 s window, each 2 s in the engine of which 0.5 s queued.
    slo = SloTarget("tpot", 0.95, itl_seconds=0.2)
    estimator = CapacityEstimator()
    for now in (1.0, 2.0, 3.0):
        out = estimator.update([slo], _engine_snapshot(0.0, 40, 80.0, 20.0), now)
    (history,) = estimator._history.values()
    assert history[-1].running == pytest.approx((80.0 - 20.0) / 20.0)  # 3 requests in the batch
    assert {m.name for m in out} >= {"llm_capacity_max_request_rate", "llm_capacity_max_concurrency"}
    # Where the gauge saw the load, its mean is kept (Little's law stands in only for a 0).
    seen = CapacityEstimator()
    seen.update([slo], _engine_snapshot(5.0, 40, 80.0, 20.0), 1.0)
    (history,) = seen._history.values()
    assert history[-1].running == 5.0
    # No completions: an idle engine still gets no estimate.
    idle = CapacityEstimator()
    assert idle.update([slo], _engine_snapshot(0.0, 0, 0.0, 0.0), 1.0) == []


def test_a_kv_gauge_that_missed_the_load_gives_way_to_the_configured_pool() -> None:
    # As above, the KV gauge read 0 too. A TTFT SLO is limited only at admission: with a usage of
    # 0 the estimator saw no limit and published nothing (the real-vLLM headroom test, two hogs).
    slo = SloTarget("chat", 0.95, ttft_seconds=0.5)
    estimator = CapacityEstimator()
    for now, total in ((1.0, 100.0), (2.0, 110.0), (3.0, 120.0)):
        out = estimator.update([slo], _engine_snapshot(0.0, 40, 80.0, 20.0, total), now)
    (history,) = estimator._history.values()
    # 3 running, each holding its 40 prompt tokens and half its 6 answer tokens, of 48 x 32.
    assert history[-1].kv_usage == pytest.approx(3 * (40 + 3) / (48 * 32))
    concurrency = {m.name: m.value for m in out if isinstance(m, Sample)}.get("llm_capacity_max_concurrency")
    # Admission near 0.9 of the pool: 1,382 tokens / 43 a request = 32 requests, less the queue's.
    assert concurrency is not None and 0 < concurrency <= 0.9 * 48 * 32 / 43


# --- the compute roofline --------------------------------------------------------------------------


def prefill_bound(tensor: float, ttft: float = 0.5, peak_seen: float | None = None) -> list[LoadPoint]:
    """A prefill-bound engine's history: the load varied 1 -> 8 req/s (one request running per
    req/s) while tokens kept their pace and little KV was held, so decode pace and admission leave
    the rate almost unbounded; its GPUs' tensor activity (`tensor` now, in proportion before) and
    TTFT say otherwise."""
    latency = {
        "0.95": {
            "llm_engine_inter_token_latency_seconds": 0.012,
            "llm_engine_time_to_first_token_seconds": ttft,
        }
    }
    return [
        LoadPoint(
            t=0.0,
            rate=b,
            running=b,
            kv_usage=0.001 * b,
            itl_mean=0.01 + 0.00001 * b,
            latency=latency,
            tensor_active=(peak_seen if peak_seen is not None and b == 1 else tensor * b / 8),
        )
        for b in (1.0, 2.0, 4.0, 8.0)
    ]


def test_a_prefill_bound_engine_is_held_to_its_compute_roofline() -> None:
    slo = SloTarget("doc", 0.95, ttft_seconds=1.0)
    blind = estimate(slo, [replace(p, tensor_active=math.nan) for p in prefill_bound(0.35)])
    assert blind is not None and blind.max_request_rate > 100  # KV and decode pace see no limit
    result = estimate(slo, prefill_bound(0.35))
    # ρ = 0.35 / 0.7 = 0.5, so 16 req/s saturate the GPU; TTFT p95 0.5 s at ρ 0.5 reaches 1 s at
    # 1 - (1 - 0.5) · 0.5 / 1 = 0.75 of that: 12 req/s, holding 12 requests (Little's law).
    assert result is not None
    assert result.max_request_rate == pytest.approx(12.0)
    assert result.max_concurrency == pytest.approx(12.0)
    assert result.confidence == 0.5
    # A TTFT already past the threshold: no headroom at all.
    assert estimate(slo, prefill_bound(0.35, ttft=1.2)).max_request_rate == 0.0  # type: ignore[union-attr]


def test_the_roofline_holds_other_dimensions_to_saturation_and_learns_a_higher_peak() -> None:
    tpot = SloTarget("tpot", 0.95, itl_seconds=0.5)  # far from its decode-pace limit
    result = estimate(tpot, prefill_bound(0.35))
    assert result is not None and result.max_request_rate == pytest.approx(16.0)
    # An engine once seen at 0.9 runs flat out at 0.9, not 0.7: ρ = 0.35 / 0.9.
    result = estimate(tpot, prefill_bound(0.35, peak_seen=0.9))
    assert result is not None and result.max_request_rate == pytest.approx(8.0 / (0.35 / 0.9))
    # Light compute leaves the other limits in charge.
    light = estimate(SloTarget("tpot", 0.95, itl_seconds=0.03), [point(60, 0.011, 5.45)])
    lit = estimate(SloTarget("tpot", 0.95, itl_seconds=0.03), [replace(point(60, 0.011, 5.45), tensor_active=0.05)])
    assert light is not None and lit is not None and lit.max_request_rate == light.max_request_rate


def _gpu(value: float, gpu: str, engine: str | None) -> Sample:
    labels = {"gpu": gpu, **({"engine": engine} if engine else {})}
    return Sample("llm_gpu_tensor_active_ratio", labels, value)


def _tensor_seen(metrics: list) -> dict[str, float]:
    estimator = CapacityEstimator()
    estimator.update([SloTarget("chat", 0.95, ttft_seconds=0.5)], metrics, 1.0)
    return {engine: history[-1].tensor_active for (engine, _), history in estimator._history.items()}


def test_the_estimator_reads_the_engines_own_gpus_and_never_anothers() -> None:
    one = _engine_snapshot(3.0, 40, 80.0, 20.0)
    # GPUs attributed to the engine: their mean; the node's unlabelled GPUs are its own on a
    # one-engine node.
    assert _tensor_seen([*one, _gpu(0.2, "0", "e"), _gpu(0.4, "1", "e"), _gpu(0.9, "2", None)]) == {
        "e": pytest.approx(0.3)
    }
    assert _tensor_seen([*one, _gpu(0.9, "2", None)]) == {"e": pytest.approx(0.9)}
    # With two engines and no attribution the node's GPUs are nobody's.
    other = [
        replace(m, labels={**m.labels, "engine": "f"}) if "engine" in m.labels else m
        for m in _engine_snapshot(3.0, 40, 80.0, 20.0)
    ]
    seen = _tensor_seen([*one, *other, _gpu(0.9, "2", None)])
    assert set(seen) == {"e", "f"} and all(math.isnan(v) for v in seen.values())
