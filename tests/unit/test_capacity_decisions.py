"""Decisions from the capacity estimate: replicas to reach the SLO (with scale-down hysteresis),
the concurrency to run at, and the cost of a request (docs/capacity.md)."""

from __future__ import annotations

import math

import pytest

from exporter.config import ConfigError, build
from exporter.model import Histogram, QuantileSummary, Sample
from exporter.settings import CapacitySettings
from exporter.slo.concurrency import advise
from exporter.slo.cost import EngineCost, Mix, MixWindow, costs, engine_prices
from exporter.slo.replicas import Estimate, ReplicaPlanner, estimates

LABELS = {"engine": "vllm-0", "engine_type": "vllm", "model": "llama"}


def estimate(max_rate: float, rate: float, concurrency: float = 40.0, slo: str = "chat", **labels: str) -> Estimate:
    return Estimate({**LABELS, **labels}, slo, max_rate, rate, concurrency, 0.8)


def test_capacity_samples_read_back_into_estimates() -> None:
    series = {**LABELS, "slo": "chat"}
    (found,) = estimates(
        [
            Sample("llm_capacity_max_request_rate", series, 10.0),
            Sample("llm_capacity_headroom_ratio", series, 0.25),
            Sample("llm_capacity_max_concurrency", series, 32.0),
            Sample("llm_capacity_estimate_confidence_ratio", series, 0.5),
        ]
    )
    assert (found.max_rate, found.rate, found.max_concurrency, found.confidence) == (10.0, 7.5, 32.0, 0.5)


def test_desired_replicas_are_demand_over_target_utilization_of_capacity() -> None:
    planner = ReplicaPlanner(CapacitySettings(target_utilization=0.8), window_seconds=60.0)
    engines = [estimate(10.0, 6.0, engine=f"vllm-{i}") for i in range(3)]  # 18 req/s over 3 replicas of 10
    shares = planner.update(engines, [], 0.0)
    assert [s.value for s in shares] == pytest.approx([0.75] * 3)
    (pool,) = planner.pools
    assert (pool.desired, pool.replicas, pool.demand) == (3, 3, 18.0)  # ceil(18 / (0.8 · 10)) = 3
    planner.update([estimate(10.0, 9.0, engine=f"vllm-{i}") for i in range(3)], [], 5.0)
    assert planner.pools[0].desired == 4  # 27 / 8 = 3.4


def test_a_fall_in_demand_waits_for_the_stabilization_window_and_a_rise_does_not() -> None:
    planner = ReplicaPlanner(CapacitySettings(scale_down_stabilization_seconds=300.0), window_seconds=60.0)
    planner.update([estimate(10.0, 16.0)], [], 0.0)
    assert planner.pools[0].desired == 2
    planner.update([estimate(10.0, 4.0)], [], 200.0)
    assert planner.pools[0].desired == 2  # held: the high share is 200 s old
    planner.update([estimate(10.0, 4.0)], [], 301.0)
    assert planner.pools[0].desired == 1
    planner.update([estimate(10.0, 30.0)], [], 302.0)
    assert planner.pools[0].desired == 4  # at once


def test_a_round_without_the_engine_does_not_end_the_stabilization_window() -> None:
    """A failed scrape leaves no estimate for a round: the high share is still held after it."""
    planner = ReplicaPlanner(CapacitySettings(scale_down_stabilization_seconds=300.0), window_seconds=60.0)
    planner.update([estimate(10.0, 16.0)], [], 0.0)
    planner.update([], [], 5.0)
    planner.update([estimate(10.0, 4.0)], [], 10.0)
    assert planner.pools[0].desired == 2


def test_a_growing_queue_is_demand_the_completions_do_not_show() -> None:
    planner = ReplicaPlanner(CapacitySettings(target_utilization=1.0), window_seconds=60.0)

    def queued(n: float) -> list[Sample]:
        return [Sample("llm_engine_requests_waiting", LABELS, n), Sample("llm_engine_requests_running", LABELS, 8)]

    planner.update([estimate(10.0, 10.0)], queued(0), 0.0)
    (share,) = planner.update([estimate(10.0, 10.0)], queued(300), 60.0)
    assert share.value == pytest.approx((10.0 + 300 / 60) / 10.0)


def test_disaggregated_pools_are_planned_apart() -> None:
    planner = ReplicaPlanner(CapacitySettings(target_utilization=1.0), window_seconds=60.0)
    planner.update(
        [estimate(8.0, 20.0, role="prefill", engine="p"), estimate(5.0, 20.0, role="decode", engine="d")], [], 0
    )
    assert {(p.role, p.desired) for p in planner.pools} == {("prefill", 3), ("decode", 4)}


def test_concurrency_far_from_the_recommended_is_an_action_either_way() -> None:
    mixes = {("vllm-0", "llama"): Mix(5.0, 4500.0, 1000.0, 0.3)}  # 200 generated tokens a request
    found = [estimate(12.0, 5.0, concurrency=48.0), estimate(20.0, 5.0, concurrency=90.0, slo="batch")]

    def advice(configured: int | None):  # noqa: ANN202
        settings = CapacitySettings(max_num_seqs={} if configured is None else {"vllm-0": configured})
        (one,) = advise(found, mixes, settings)
        return one

    high = advice(256)
    assert (high.slo, high.recommended, high.tokens_per_second) == ("chat", 48.0, 2400.0)
    assert high.action is not None and high.action.startswith("Lower max_num_seqs from 256 to ~48")
    low = advice(16)
    assert low.action is not None and low.action.startswith("Raise max_num_seqs from 16 to ~48")
    assert "2400 generated tokens/s" in low.action
    assert advice(56).action is None  # within the 25 % tolerance
    assert advice(None).action is None and "max_num_seqs" not in advice(None).line()
    prior = Estimate(LABELS, "chat", 12.0, 5.0, 48.0, 0.3)  # one load level seen: the prior alone
    (quoted,) = advise([prior], mixes, CapacitySettings(max_num_seqs={"default": 256}))
    assert quoted.action is None and "confidence 0.30" in quoted.line()


def gpu(index: int, model: str, engine: str = "") -> Sample:
    labels = {"gpu": str(index), "uuid": f"GPU-{index}", "gpu_model": model, **({"engine": engine} if engine else {})}
    return Sample("llm_gpu_up", labels, 1.0)


def test_an_engine_pays_for_its_own_gpus_or_the_nodes_when_it_is_alone() -> None:
    prices = {"NVIDIA H100 80GB HBM3": 4.0, "default": 2.0}
    up = [Sample("llm_engine_up", {**LABELS, "engine": name}, 1.0) for name in ("a", "b")]
    gpus = [gpu(0, "NVIDIA H100 80GB HBM3", "a"), gpu(1, "NVIDIA H100 80GB HBM3", "a"), gpu(2, "NVIDIA L4", "b")]
    assert engine_prices([*up, *gpus], prices) == {"a": 8.0, "b": 2.0}
    alone = [up[0], gpu(0, "NVIDIA H100 80GB HBM3"), gpu(1, "NVIDIA H100 80GB HBM3")]
    assert engine_prices(alone, prices) == {"a": 8.0}
    assert engine_prices([*up, gpu(0, "NVIDIA L4")], prices) == {}  # unattributed among two: nobody's


def test_cost_per_request_and_per_million_tokens_now_and_at_the_slo_capacity() -> None:
    mix = Mix(
        requests_per_second=4.0, prompt_tokens_per_second=4000.0, generated_tokens_per_second=800.0, prefill_share=0.25
    )
    cost = EngineCost(LABELS, per_hour=7.2, mix=mix, capacities={"chat": 10.0})
    now = cost.figures()
    assert now["request"] == pytest.approx(0.002 / 4.0)  # 7.2 per hour is 0.002 a second
    assert now["prompt"] == pytest.approx(0.002 * 0.25 / 4000 * 1e6)
    assert now["generated"] == pytest.approx(0.002 * 0.75 / 800 * 1e6)
    samples = {(s.name, s.labels.get("load"), s.labels.get("tokens")): s.value for s in cost.samples()}
    assert samples[("llm_cost_per_request", "slo_capacity", None)] == pytest.approx(0.002 / 10.0)
    assert samples[("llm_cost_per_million_tokens", "slo_capacity", "generated")] == pytest.approx(
        now["generated"] * 4.0 / 10.0
    )
    assert samples[("llm_cost_per_hour", None, None)] == 7.2


def window_summary(name: str, total: float, count: float, seconds: float = 60.0) -> QuantileSummary:
    h = Histogram((math.inf,), (count,), total, count)
    return QuantileSummary(name, LABELS, (), count, total, histogram=h, window=h, window_seconds=seconds)


def test_the_mix_comes_from_the_window_of_the_engines_own_counters_and_histograms() -> None:
    mixes = MixWindow(60.0)

    def snapshot(tokens: float) -> list:  # type: ignore[type-arg]
        return [
            Sample("llm_engine_prompt_tokens_total", LABELS, tokens * 9),
            Sample("llm_engine_generation_tokens_total", LABELS, tokens),
            window_summary("llm_engine_e2e_request_latency_seconds", 120.0, 60.0),
            window_summary("llm_engine_time_to_first_token_seconds", 40.0, 60.0),
            window_summary("llm_engine_queue_time_seconds", 10.0, 60.0),
        ]

    assert mixes.update(snapshot(0.0), 0.0) == {}
    found = mixes.update(snapshot(12000.0), 60.0)[("vllm-0", "llama")]
    assert found.requests_per_second == 1.0 and found.generated_tokens_per_second == 200.0
    assert found.prompt_tokens_per_second == 1800.0 and found.answer_tokens == 200.0
    assert found.prefill_share == pytest.approx(30.0 / (30.0 + 80.0))  # (ttft - queue) vs (e2e - ttft)
    (engine,) = costs([Sample("llm_engine_up", LABELS, 1.0), gpu(0, "x")], {("vllm-0", "llama"): found}, [], {"x": 3.6})
    assert engine.figures()["request"] == pytest.approx(0.001)
    assert costs([Sample("llm_engine_up", LABELS, 1.0)], {("vllm-0", "llama"): found}, [], {}) == []


def test_the_mix_forgets_a_model_a_window_after_it_was_last_seen() -> None:
    # an engine's models rolled out one after another: each one's token windows go a window
    # after its last scrape, or a long-lived exporter keeps one per model ever served
    mixes = MixWindow(50.0)
    for step in range(40):
        labels = {**LABELS, "model": f"model-{step // 4}"}  # a rollout every 4 rounds
        tokens = float(step * 100)
        mixes.update(
            [
                Sample("llm_engine_prompt_tokens_total", labels, tokens * 9),
                Sample("llm_engine_generation_tokens_total", labels, tokens),
            ],
            step * 5.0,
        )
    # at 195 s, the models scraped within the last 50 s: model-7 (last at 155 s), model-8, model-9
    assert sorted({model for _, model, _ in mixes._rates}) == ["model-7", "model-8", "model-9"]


def test_the_capacity_section_is_validated_key_by_key() -> None:
    settings = build({"capacity": {"target_utilization": 0.7, "max_num_seqs": {"vllm-0": 64}}}).capacity
    assert settings.target_utilization == 0.7 and settings.max_num_seqs == {"vllm-0": 64}
    for bad, key in (
        ({"target_utilization": 1.5}, "capacity.target_utilization"),
        ({"scale_down_stabilization_seconds": -1}, "capacity.scale_down_stabilization_seconds"),
        ({"max_num_seqs": {"vllm-0": 0}}, "capacity.max_num_seqs.vllm-0"),
        ({"gpu_hour_price": {"default": "cheap"}}, "capacity.gpu_hour_price.default"),
        ({"target": 0.8}, "capacity"),
    ):
        with pytest.raises(ConfigError) as caught:
            build({"capacity": bad})
        assert caught.value.where.startswith(key), caught.value


def test_the_monitor_puts_decisions_in_diagnosis_and_the_concurrency_action_on_the_engine() -> None:
    from exporter.settings import SloTarget
    from exporter.slo.monitor import SloMonitor

    labels = {"engine": "e", "engine_type": "vllm", "model": "m"}
    window = Histogram((0.01, 0.1, 1.0, math.inf), (0.0, 40.0, 40.0, 40.0), 20.0, 40.0)

    def snapshot(requests: float, running: float) -> list:  # type: ignore[type-arg]
        def summary(name: str, total: float, count: float) -> QuantileSummary:
            h = Histogram(window.bounds, (0.0, count, count, count), total, count)
            return QuantileSummary(name, labels, (), requests, total, h, h, 20.0)

        itl = 0.01 + 0.005 * running  # the decode pace grows with the batch: fitted, not the prior
        return [
            Sample("llm_engine_up", labels, 1.0),
            Sample("llm_engine_requests_running", labels, running),
            Sample("llm_engine_kv_cache_usage_ratio", labels, 0.1),
            Sample("llm_engine_prompt_tokens_total", labels, 40.0 * requests),
            Sample("llm_engine_generation_tokens_total", labels, 6.0 * requests),
            Sample("llm_gpu_up", {"gpu": "0", "uuid": "GPU-0", "gpu_model": "NVIDIA H100 80GB HBM3"}, 1.0),
            summary("llm_engine_e2e_request_latency_seconds", 40.0, 40.0),
            summary("llm_engine_time_to_first_token_seconds", 4.0, 40.0),
            summary("llm_engine_inter_token_latency_seconds", itl * 400.0, 400.0),
        ]

    settings = CapacitySettings(max_num_seqs={"e": 512}, gpu_hour_price={"default": 3.6})
    monitor = SloMonitor([SloTarget("tpot", 0.9, itl_seconds=0.1)], 20.0, capacity=settings)
    for step, running in enumerate((2.0, 2.0, 4.0, 4.0, 8.0, 8.0)):
        out = monitor.update(snapshot(40.0 * (step + 1), running), 20.0 * step)
    names = {m.name for m in out}
    assert {"llm_capacity_desired_replicas", "llm_capacity_recommended_concurrency", "llm_cost_per_request"} <= names
    report = monitor.report()
    (pool,) = report["replicas"]
    assert pool["model"] == "m" and pool["role"] == "aggregated" and pool["desired_replicas"] >= 1
    assert set(pool["inputs"]) >= {"demand_requests_per_second", "capacity_per_replica_requests_per_second"}
    (advice,) = report["concurrency"]
    assert advice["configured_max_num_seqs"] == 512 and advice["action"].startswith("Lower max_num_seqs from 512")
    assert monitor.actions[("e", "vllm", "m")] == [advice["action"]]
    (cost,) = report["cost"]
    assert cost["current"]["request"] == pytest.approx(0.001 / 2.0)  # 3.6 an hour over 2 req/s
