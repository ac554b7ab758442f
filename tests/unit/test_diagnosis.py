"""Diagnosis from normalized metrics: each stage's signature, hysteresis, missing inputs."""

from __future__ import annotations

import math

import pytest

from exporter.diagnosis import Diagnoser, Thresholds
from exporter.model import Metric, QuantileSummary, Sample

ENGINE = {"engine": "e0", "engine_type": "vllm", "model": "m"}


def engine_metrics(
    running: float = 4,
    waiting: float = 0,
    kv: float | None = 0.3,
    preemptions: float = 0,
    prompt_tokens: float = 0,
    generation_tokens: float = 0,
    itl_p95: float | None = 0.02,
    ttft_p95: float | None = 0.2,
    queue_p95: float | None = 0.01,
    cpu_seconds: float | None = None,
) -> list[Metric]:
    out: list[Metric] = [
        Sample("llm_engine_up", ENGINE, 1.0),
        Sample("llm_engine_requests_running", ENGINE, running),
        Sample("llm_engine_requests_waiting", ENGINE, waiting),
        Sample("llm_engine_preemptions_total", ENGINE, preemptions),
        Sample("llm_engine_prompt_tokens_total", ENGINE, prompt_tokens),
        Sample("llm_engine_generation_tokens_total", ENGINE, generation_tokens),
    ]
    if kv is not None:
        out.append(Sample("llm_engine_kv_cache_usage_ratio", ENGINE, kv))
    for family, value in (
        ("llm_engine_inter_token_latency_seconds", itl_p95),
        ("llm_engine_time_to_first_token_seconds", ttft_p95),
        ("llm_engine_queue_time_seconds", queue_p95),
    ):
        if value is not None:
            out.append(QuantileSummary(family, ENGINE, ((0.5, value / 2), (0.95, value), (0.99, value * 1.2)), 10, 1))
    if cpu_seconds is not None:
        out.append(Sample("llm_engine_process_cpu_seconds_total", ENGINE, cpu_seconds))
    return out


def gpu_metrics(sm: float, dram: float, tensor: float, gpus: int = 2, engine: str | None = "e0") -> list[Metric]:
    out: list[Metric] = []
    for index in range(gpus):
        labels = {"gpu": str(index), "uuid": f"GPU-{index}", "gpu_model": "NVIDIA A100-SXM4-80GB"}
        if engine:
            labels["engine"] = engine
        out += [
            Sample("llm_gpu_sm_active_ratio", labels, sm),
            Sample("llm_gpu_dram_active_ratio", labels, dram),
            Sample("llm_gpu_tensor_active_ratio", labels, tensor),
        ]
    return out


def run(diagnoser: Diagnoser, steps: int, make, start: int = 0, interval: float = 5.0):
    for i in range(start, start + steps):
        gauges = diagnoser.update(make(i), i * interval)
    return diagnoser.latest[("e0", "vllm", "m")], gauges


def test_healthy_engine_has_no_active_stage() -> None:
    d, gauges = run(Diagnoser(), 20, lambda i: engine_metrics() + gpu_metrics(0.4, 0.3, 0.1))
    assert d.primary == "none"
    assert not any(d.active.values())
    primary = {m.labels["stage"]: m.value for m in gauges if m.name == "llm_bottleneck_primary"}
    assert primary["none"] == 1.0 and sum(primary.values()) == 1.0


def test_full_kv_cache_with_preemptions_is_kv_capacity() -> None:
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(waiting=20, kv=0.96, preemptions=2 * i))
    assert d.primary == "kv_cache_capacity"
    assert any("KV-cache usage up to 0.96" in line for line in d.evidence)
    assert any("prefix caching" in action for action in d.actions)


def test_growing_queue_with_kv_headroom_is_queueing() -> None:
    d, _ = run(
        Diagnoser(), 20, lambda i: engine_metrics(waiting=2 + i, kv=0.5, queue_p95=2.0) + gpu_metrics(0.5, 0.4, 0.2)
    )
    assert d.primary == "queueing"
    assert d.scores["kv_cache_capacity"] < 0.3


def test_a_queue_that_faded_reads_as_a_signed_trend_never_minus_zero() -> None:
    """One request waited for one round of 120 early in the minute, none since: the trend is a
    hair below zero (-1/40). A quiet engine's evidence quotes it (queueing leads the list at score
    0; a CPU engine, no GPU data) as "+0.0", not "-0.0"; a clearly falling queue keeps its sign."""
    d, _ = run(Diagnoser(), 200, lambda i: engine_metrics(waiting=1 if i == 90 else 0), interval=0.5)
    assert d.primary == "none"
    assert any("trend +0.0 over" in line for line in d.evidence), d.evidence
    assert not any("-0.0" in line for line in d.evidence), d.evidence
    d, _ = run(Diagnoser(), 200, lambda i: engine_metrics(waiting=1 if i < 120 else 0), interval=0.5)
    assert any("trend -" in line for line in d.evidence), d.evidence


def test_busy_dram_with_steady_tokens_is_a_healthy_decoder() -> None:
    # A decoding GPU streams HBM whenever it steps: DRAM 0.93 alone is not a bottleneck.
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(running=5, itl_p95=0.0096) + gpu_metrics(0.38, 0.93, 0.04))
    assert d.primary == "none"
    assert d.scores["decode_memory_bandwidth"] == 0.0


def test_high_dram_with_moderate_sm_and_slowing_tokens_is_decode_bandwidth_not_idle() -> None:
    # The seed case: SM active 0.45, DRAM active 0.95, and inter-token latency up 2.5x.
    d, _ = run(
        Diagnoser(),
        20,
        lambda i: (
            engine_metrics(running=18, waiting=3 + i, kv=0.7, itl_p95=0.02 if i < 6 else 0.05)
            + gpu_metrics(0.45, 0.95, 0.15)
        ),
    )
    assert d.primary == "decode_memory_bandwidth"
    assert d.scores["host_overhead"] < 0.2, "low SM activity with busy DRAM is not host overhead"
    assert any("DRAM active 0.95 on GPUs 0, 1 while SM active 0.45" in line for line in d.evidence)
    assert any("max-model-len" in a for a in d.actions) and any("shortest-job-first" in a for a in d.actions)


def test_busy_tensor_pipes_on_prompt_heavy_traffic_is_prefill_compute() -> None:
    d, _ = run(
        Diagnoser(),
        20,
        lambda i: (
            engine_metrics(prompt_tokens=5000 * i, generation_tokens=200 * i, ttft_p95=3.0)
            + gpu_metrics(0.9, 0.4, 0.85)
        ),
    )
    assert d.primary == "prefill_compute"


def test_idle_gpu_and_a_saturated_core_is_host_overhead() -> None:
    d, _ = run(
        Diagnoser(), 20, lambda i: engine_metrics(running=8, cpu_seconds=0.99 * 5 * i) + gpu_metrics(0.2, 0.15, 0.05)
    )
    assert d.primary == "host_overhead"
    assert any("0.99 CPU cores" in line for line in d.evidence)


def test_a_host_bound_engine_whose_running_gauge_reads_zero_is_still_host_overhead() -> None:
    """A CPU-starved frontend answers /metrics between bursts, when nothing runs (a 2-core vLLM
    read running 0 in 11 reads of 11 under load): the e2e latency sum, a counter, still says how
    many requests were in the engine (Little's law: request-seconds finished per second)."""

    def make(i: int, in_engine: float) -> list[Metric]:
        e2e = QuantileSummary(
            "llm_engine_e2e_request_latency_seconds",
            ENGINE,
            ((0.5, 0.3), (0.95, 0.5), (0.99, 0.6)),
            7.0 * i,
            in_engine * 5 * i,
        )
        return engine_metrics(running=0, cpu_seconds=0.99 * 5 * i) + gpu_metrics(0.2, 0.15, 0.05) + [e2e]

    busy, _ = run(Diagnoser(), 20, lambda i: make(i, 2.0))
    assert busy.primary == "host_overhead"
    assert any("2.0 requests are in the engine" in line for line in busy.evidence), busy.evidence
    idle, _ = run(Diagnoser(), 20, lambda i: make(i, 0.0))
    assert idle.primary == "none" and idle.scores["host_overhead"] == 0.0


def test_each_engines_counters_are_rated_by_when_it_answered_not_when_the_round_ended() -> None:
    """On a busy host a round ends with its slowest source: the engine's CPU counter, read at its
    answers (exactly 0.95 cores), rated over the rounds' ends (every fourth 4.3 s later than the
    rest) read 0.81 cores, and host overhead scored 0.70 where it is 1.0. With `answered_at` it
    reads what the engine ran."""
    ends = [5.0 * i + (4.5 if i % 4 == 3 else 0.2) for i in range(20)]  # every fourth round runs long
    answers = [5.0 * i + 0.1 for i in range(20)]

    def cpu_line(d) -> str:
        return next(line for line in d.evidence if "CPU cores" in line)

    stamped, rounds = Diagnoser(), Diagnoser()
    for i in range(20):
        metrics = engine_metrics(running=8, cpu_seconds=0.95 * answers[i]) + gpu_metrics(0.2, 0.15, 0.05)
        stamped.update(metrics, ends[i], answered_at={"e0": answers[i]})
        rounds.update(metrics, ends[i])
    key = ("e0", "vllm", "m")
    assert "0.95 CPU cores" in cpu_line(stamped.latest[key])
    assert "0.81 CPU cores" in cpu_line(rounds.latest[key])
    assert stamped.latest[key].scores["host_overhead"] == 1.0 > rounds.latest[key].scores["host_overhead"]
    # An answer is never stamped after the round that published it, nor before the engine's last point.
    late = Diagnoser()
    late.update(engine_metrics(cpu_seconds=1.0), 10.0, answered_at={"e0": 99.0})
    late.update(engine_metrics(cpu_seconds=2.0), 15.0, answered_at={"e0": 3.0})
    assert list(late._histories[key].times) == [10.0, 10.0]


def test_rdma_congestion_with_slowed_decode_is_cross_node() -> None:
    def make(i: int) -> list[Metric]:
        itl = 0.02 if i < 10 else 0.08
        ports = [
            Sample(
                "llm_rdma_port_transmit_utilization_ratio", {"device": "mlx5_0", "port": "1"}, 0.3 if i < 10 else 0.95
            ),
            Sample(
                "llm_rdma_port_cnp_handled_total", {"device": "mlx5_0", "port": "1"}, 0 if i < 10 else 5000.0 * (i - 10)
            ),
        ]
        return engine_metrics(itl_p95=itl) + gpu_metrics(0.3, 0.3, 0.1) + ports

    d, _ = run(Diagnoser(), 30, make)
    assert d.primary == "cross_node_communication"


def test_engine_without_gpu_data_is_still_diagnosed_and_says_so() -> None:
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(waiting=20, kv=0.97, preemptions=i))
    assert d.primary == "kv_cache_capacity"
    assert d.scores["decode_memory_bandwidth"] < 0.6
    report = Diagnoser().report()
    assert report["engines"] == []


def test_engine_without_kv_gauge_scores_from_what_is_there() -> None:
    # TGI: no KV usage; a long queue is still queueing.
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(waiting=30, kv=None))
    assert d.primary == "queueing"
    assert any("KV capacity not assessed" in line for line in d.results["kv_cache_capacity"].evidence)


def test_decode_slowdown_without_gpu_data_scores_from_itl_trend() -> None:
    d, _ = run(Diagnoser(), 40, lambda i: engine_metrics(running=16, itl_p95=0.02 if i < 10 else 0.09))
    assert d.scores["decode_memory_bandwidth"] >= 0.6
    assert any(
        "scored from inter-token latency alone" in line for line in d.results["decode_memory_bandwidth"].evidence
    )


def test_slow_tokens_on_a_contended_host_are_not_decode_bandwidth_without_gpu_data() -> None:
    # The same slowdown while the node's runnable tasks wait for a CPU most of the time (another
    # process' load, which the engine's own CPU counter does not see): the host explains it.
    def make(waited_share: float):
        def metrics(i: int) -> list[Metric]:
            waiting = Sample("llm_host_cpu_waiting_seconds_total", {}, waited_share * 5.0 * i)
            return [*engine_metrics(running=16, itl_p95=0.02 if i < 10 else 0.09), waiting]

        return metrics

    contended, _ = run(Diagnoser(), 40, make(0.6))
    assert contended.scores["decode_memory_bandwidth"] == 0.0 and contended.primary == "none"
    evidence = contended.results["decode_memory_bandwidth"].evidence
    assert any("waited for one 60% of the last 30s (PSI)" in line for line in evidence), evidence
    quiet, _ = run(Diagnoser(), 40, make(0.02))
    assert quiet.scores["decode_memory_bandwidth"] >= 0.6
    assert not any("PSI" in line for line in quiet.results["decode_memory_bandwidth"].evidence)
    partly, _ = run(Diagnoser(), 40, make(0.25))
    assert 0.0 < partly.scores["decode_memory_bandwidth"] < quiet.scores["decode_memory_bandwidth"]


def test_hysteresis_keeps_a_stage_active_between_exit_and_enter() -> None:
    diagnoser = Diagnoser(Thresholds(level_seconds=5))
    kv_for = {True: 0.96, False: 0.88}

    def make(high: bool):
        return lambda i: engine_metrics(waiting=10, kv=kv_for[high])

    d, _ = run(diagnoser, 5, make(True))
    assert d.active["kv_cache_capacity"]
    score_mid = None
    for i in range(5, 10):
        diagnoser.update(make(False)(i), i * 5.0)
        score_mid = diagnoser.latest[("e0", "vllm", "m")].scores["kv_cache_capacity"]
    assert 0.4 <= score_mid < 0.6
    assert diagnoser.latest[("e0", "vllm", "m")].active["kv_cache_capacity"], (
        "dropped below enter but not exit: stays active"
    )
    fresh, _ = run(Diagnoser(Thresholds(level_seconds=5)), 5, make(False))
    assert not fresh.active["kv_cache_capacity"], "the same score does not turn a stage on"


def test_engine_going_down_drops_its_history() -> None:
    diagnoser = Diagnoser()
    run(diagnoser, 8, lambda i: engine_metrics(waiting=20, kv=0.97))
    gauges = diagnoser.update([Sample("llm_engine_up", ENGINE, 0.0)], 100.0)
    # no verdict left, only its state: down
    assert {m.labels["state"]: m.value for m in gauges if m.name == "llm_engine_state"}["down"] == 1.0
    assert [m for m in gauges if m.name != "llm_engine_state"] == [] and diagnoser.latest == {}
    assert diagnoser._histories == {}, "gone for longer than twice the level window: forgotten"


def test_an_engine_whose_source_is_gone_loses_its_verdict_at_once() -> None:
    """A removed target or a deleted pod exports no `llm_engine_up` at all: its gauges and its
    /diagnosis row go with it, not after the grace a down engine gets."""
    diagnoser = Diagnoser()
    run(diagnoser, 8, lambda i: engine_metrics(waiting=20, kv=0.97))
    assert diagnoser.latest
    other = {**ENGINE, "engine": "e1"}
    gauges = diagnoser.update([Sample("llm_engine_up", other, 0.0)], 40.0)
    assert {m.labels["engine"] for m in gauges} == {"e1"}, "e0's series go; e1 has only its state"
    assert all(m.name == "llm_engine_state" for m in gauges)
    assert diagnoser.latest == {} and diagnoser._histories == {}


def test_one_missed_collection_keeps_the_itl_baseline_of_a_slowing_engine() -> None:
    # A scrape that timed out during the seed case's incident must not restart the engine's history:
    # the slowed ITL would become its best and decode bandwidth would never show.
    def make(i: int) -> list[Metric]:
        if i == 14:
            return [Sample("llm_engine_up", ENGINE, 0.0)]
        slowed = i >= 10
        return engine_metrics(running=20, waiting=10 * max(0, i - 9), itl_p95=0.05 if slowed else 0.02) + gpu_metrics(
            0.5, 0.95, 0.15
        )

    diagnoser = Diagnoser()
    d, _ = run(diagnoser, 30, make)
    assert d.primary == "decode_memory_bandwidth"
    assert any("2.5x its best" in line for line in d.evidence)
    missed = diagnoser.update([Sample("llm_engine_up", ENGINE, 0.0)], 30 * 5.0)
    assert diagnoser.latest[("e0", "vllm", "m")].primary == "decode_memory_bandwidth", "the last verdict stays"
    assert any(m.name == "llm_bottleneck_primary" and m.value == 1.0 for m in missed)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 1e12])
def test_odd_values_never_crash(value: float) -> None:
    d, gauges = run(
        Diagnoser(),
        8,
        lambda i: engine_metrics(waiting=value, kv=value, itl_p95=value) + gpu_metrics(value, value, value),
    )
    assert all(0.0 <= m.value <= 1.0 or math.isnan(m.value) for m in gauges if m.name == "llm_bottleneck_score")


def test_seed_case_full_cache_behind_saturated_hbm_ranks_decode_first_with_kv_active() -> None:
    # The worked case (docs/design.md#the-worked-case) after the prompt change: DRAM 0.9, KV full,
    # waiting growing, ITL 2x.
    d, _ = run(
        Diagnoser(),
        30,
        lambda i: (
            engine_metrics(
                running=20,
                waiting=0 if i < 10 else 10 * (i - 9),
                kv=0.6 if i < 10 else 0.97,
                preemptions=0.2 * i,
                itl_p95=0.025 if i < 10 else 0.05,
            )
            + gpu_metrics(0.52, 0.9 if i >= 10 else 0.96, 0.15)
        ),
    )
    assert d.primary == "decode_memory_bandwidth"
    assert d.active["kv_cache_capacity"], "the full cache is still reported"
    assert any("waiting requests rising" in line for line in d.evidence)


def test_prefill_recomputed_after_preemptions_is_not_long_prompts() -> None:
    d, _ = run(
        Diagnoser(),
        20,
        lambda i: (
            engine_metrics(
                running=17,
                waiting=40,
                kv=0.98,
                preemptions=2.0 * 5 * i,
                prompt_tokens=9000 * i,
                generation_tokens=1000 * i,
            )
            + gpu_metrics(0.9, 0.3, 0.55)
        ),
    )
    assert d.primary == "kv_cache_capacity"
    assert d.scores["prefill_compute"] < d.scores["kv_cache_capacity"]


def test_a_busy_engine_core_without_gpu_data_is_not_host_overhead_alone() -> None:
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(running=2, cpu_seconds=1.0 * 5 * i))
    assert d.primary == "none"
    assert 0.0 < d.scores["host_overhead"] < 0.6


OTHER = {"engine": "e1", "engine_type": "vllm", "model": "m"}


def node_gpus(readings: list[tuple[float, float, float]], engines: list[str | None] | None = None) -> list[Metric]:
    """GPU i reads `readings[i]` (SM, DRAM, tensor active), labelled with `engines[i]` (None: none)."""
    out: list[Metric] = []
    for index, (sm, dram, tensor) in enumerate(readings):
        labels = {"gpu": str(index), "uuid": f"GPU-{index}", "gpu_model": "NVIDIA A100-SXM4-80GB"}
        owner = engines[index] if engines else None
        if owner:
            labels["engine"] = owner
        out += [
            Sample("llm_gpu_sm_active_ratio", labels, sm),
            Sample("llm_gpu_dram_active_ratio", labels, dram),
            Sample("llm_gpu_tensor_active_ratio", labels, tensor),
        ]
    return out


def two_engines(i: int, gpus: list[Metric], e0_slows: bool = True) -> list[Metric]:
    """e0 decodes 16 requests, its tokens slowing 4.5x from step 10 (when `e0_slows`); e1 runs one
    request at a steady pace; `gpus` are the node's GPU series."""
    e1 = [
        Sample("llm_engine_up", OTHER, 1.0),
        Sample("llm_engine_requests_running", OTHER, 1.0),
        QuantileSummary("llm_engine_inter_token_latency_seconds", OTHER, ((0.95, 0.02),), 10, 1),
    ]
    return engine_metrics(running=16, itl_p95=0.09 if e0_slows and i >= 10 else 0.02) + e1 + gpus


def test_unattributed_gpus_that_all_read_saturated_hbm_are_evidence_for_every_engine() -> None:
    # No GPU carries an engine label and two engines run: whichever GPUs e0 uses read >= 0.95.
    gpus = node_gpus([(0.4, 0.95 + 0.005 * k, 0.1) for k in range(8)])
    diagnoser = Diagnoser()
    for i in range(40):
        diagnoser.update(two_engines(i, gpus), i * 5.0)
    d = diagnoser.latest[("e0", "vllm", "m")]
    assert d.primary == "decode_memory_bandwidth"
    line = d.results["decode_memory_bandwidth"].evidence[0]
    assert line.startswith("DRAM active 0.95 at least, on every one of the node's 8 unattributed GPUs"), line
    assert "SM active 0.40-0.40 across the node" in line
    assert any(e.startswith("GPU signals unattributed: node-wide (8 GPUs") for e in d.evidence)
    # The same saturated GPUs do not make e1's steady tokens a bandwidth bottleneck.
    assert diagnoser.latest[("e1", "vllm", "m")].primary == "none"


def test_a_round_without_the_gpu_source_still_says_the_windows_gpu_readings_are_node_wide() -> None:
    """A GPU source that timed out on a busy host leaves the latest point without GPUs, but the
    stages still score from the node-wide readings of the level window: the evidence keeps saying
    so until no point of the window has any (a fresh-clone CI's plain-flags exporter once lost the
    line for one engine of kv-cache-saturation, at the one read the test checks it on)."""
    gpus = node_gpus([(0.4, 0.95 + 0.005 * k, 0.1) for k in range(8)])
    diagnoser = Diagnoser()
    for i in range(20):
        diagnoser.update(two_engines(i, gpus), i * 5.0)
    t = diagnoser.thresholds
    node_wide = "GPU signals unattributed: node-wide (8 GPUs"
    for i in range(20, 20 + int(t.level_seconds // 5) + 1):  # the GPU source misses every round now
        diagnoser.update(two_engines(i, []), i * 5.0)
        d = diagnoser.latest[("e0", "vllm", "m")]
        still = (i - 19) * 5.0 <= t.level_seconds
        assert any(e.startswith(node_wide) for e in d.evidence) == still, (i, d.evidence)


def test_unattributed_gpus_that_disagree_are_withheld_and_the_stage_says_so() -> None:
    # Half the node's GPUs saturated, half nearly idle, nobody knows whose: e0's DRAM is not known.
    gpus = node_gpus([(0.4, 0.97, 0.1)] * 4 + [(0.1, 0.2, 0.0)] * 4)
    diagnoser = Diagnoser()
    for i in range(40):
        diagnoser.update(two_engines(i, gpus), i * 5.0)
    d = diagnoser.latest[("e0", "vllm", "m")]
    line = d.results["decode_memory_bandwidth"].evidence[0]
    assert line.startswith("no GPU DRAM activity for this engine (GPU signals unattributed: node-wide, 8 GPUs;"), line
    assert "they read 0.20-0.97, across the 0.6-0.8 band: withheld" in line
    assert line.endswith("scored from inter-token latency alone")
    assert not any("DRAM active 0.97" in e for e in d.evidence)
    # With the reading withheld, the decode score is the ITL-only one (at most 0.8 of the scale).
    assert d.scores["decode_memory_bandwidth"] <= 0.8


@pytest.mark.parametrize(("low_rounds", "slower"), [(1, False), (8, True)])
def test_tokens_are_slower_than_their_best_level_not_than_one_low_reading(low_rounds: int, slower: bool) -> None:
    """The slowdown compares like with like: the level now (over `level_seconds`) against the
    lowest level over the baseline, not the lowest single reading. A steady engine whose ITL read
    low once (a window of a few tokens at its start) did not slow down; one that ran that fast
    for a whole level window did. Scored from ITL alone (the node's GPUs disagree, so DRAM is
    withheld), as a plain-flags exporter of a disaggregated node in the live verdict test did,
    reading decode bandwidth on two healthy decode workers against a one-reading best."""
    gpus = node_gpus([(0.4, 0.97, 0.1)] * 4 + [(0.1, 0.2, 0.0)] * 4)
    e1 = [Sample("llm_engine_up", OTHER, 1.0), Sample("llm_engine_requests_running", OTHER, 1.0)]

    def make(i: int) -> list[Metric]:
        return engine_metrics(running=16, itl_p95=0.0096 if 2 <= i < 2 + low_rounds else 0.024) + e1 + gpus

    d, _ = run(Diagnoser(), 40, make)
    evidence = " | ".join(d.results["decode_memory_bandwidth"].evidence)
    assert "scored from inter-token latency alone" in evidence
    assert ("2.5x its best" in evidence) == slower, evidence
    assert (d.primary == "decode_memory_bandwidth") == slower, (d.primary, evidence)


def test_a_withheld_reading_still_bounds_the_score_from_its_two_ends() -> None:
    # DRAM 0.56-0.70 across the node (band 0.6-0.8): withheld, but no GPU is past half the band,
    # so e0's slow tokens alone (0.8 of the scale) cannot make it a bandwidth bottleneck.
    gpus = node_gpus([(0.4, 0.56 + 0.02 * k, 0.1) for k in range(8)])
    diagnoser = Diagnoser()
    for i in range(40):
        diagnoser.update(two_engines(i, gpus), i * 5.0)
    d = diagnoser.latest[("e0", "vllm", "m")]
    evidence = d.results["decode_memory_bandwidth"].evidence
    assert "withheld" in evidence[0], evidence
    assert any(line.startswith("bounded to 0.00-0.50 by the node's lowest and highest") for line in evidence), evidence
    assert d.scores["decode_memory_bandwidth"] == pytest.approx(0.5, abs=0.01)
    assert not d.active["decode_memory_bandwidth"]


def test_a_withheld_tensor_reading_whose_lowest_end_is_high_still_counts_for_prefill() -> None:
    # Tensor 0.45-0.59 across the node (band 0.3-0.5): withheld, but even the lowest GPU is 3/4 up
    # the ramp, so a prompt-heavy engine with a quick first token scores at least that.
    def make(i: int) -> list[Metric]:
        return (
            engine_metrics(running=8, prompt_tokens=9500 * 5 * i, generation_tokens=500 * 5 * i, ttft_p95=0.3)
            + [Sample("llm_engine_up", OTHER, 1.0)]
            + node_gpus([(0.7, 0.3, 0.45 + 0.02 * k) for k in range(8)])
        )

    d, _ = run(Diagnoser(), 20, make)
    assert d.primary == "prefill_compute"
    assert d.scores["prefill_compute"] == pytest.approx(0.75, abs=0.01)
    assert any("bounded to 0.75-1.00" in line for line in d.results["prefill_compute"].evidence)


def test_unattributed_gpus_that_all_read_light_hbm_rule_decode_bandwidth_out() -> None:
    # Tokens slow 4.5x, but no GPU on the node moves much memory: whatever e0 uses is not HBM-bound.
    light = node_gpus([(0.3, 0.2 + 0.05 * k, 0.1) for k in range(8)])
    diagnoser = Diagnoser()
    for i in range(40):
        diagnoser.update(two_engines(i, light), i * 5.0)
    d = diagnoser.latest[("e0", "vllm", "m")]
    assert d.scores["decode_memory_bandwidth"] == 0.0
    assert d.results["decode_memory_bandwidth"].evidence[0].startswith("DRAM active 0.55 at most, on every one")
    # Without any GPU series the same engine scores from its tokens alone, and high.
    blind = Diagnoser()
    for i in range(40):
        blind.update(two_engines(i, []), i * 5.0)
    assert blind.latest[("e0", "vllm", "m")].scores["decode_memory_bandwidth"] >= 0.6


def test_an_engines_own_gpus_decide_its_stage_not_the_nodes_other_gpus() -> None:
    # e0's two GPUs (labelled) read light HBM; the other six are unattributed and saturated.
    gpus = node_gpus([(0.3, 0.3, 0.1)] * 2 + [(0.4, 0.97, 0.1)] * 6, ["e0", "e0"] + [None] * 6)
    diagnoser = Diagnoser()
    for i in range(40):
        diagnoser.update(two_engines(i, gpus), i * 5.0)
    d = diagnoser.latest[("e0", "vllm", "m")]
    assert d.results["decode_memory_bandwidth"].evidence[0].startswith("DRAM active 0.30 on GPUs 0, 1")
    assert d.scores["decode_memory_bandwidth"] == 0.0
    assert not any(e.startswith("GPU signals unattributed") for e in d.evidence)
    # e1 has no GPU of its own: it gets the unattributed six, unanimous, and its tokens are steady.
    e1 = diagnoser.latest[("e1", "vllm", "m")]
    assert any(e.startswith("GPU signals unattributed: node-wide (6 GPUs") for e in e1.evidence)
    assert e1.primary == "none"


def test_unattributed_gpus_that_all_idle_while_the_engine_core_is_busy_read_host_overhead() -> None:
    def make(i: int) -> list[Metric]:
        return (
            engine_metrics(running=8, itl_p95=0.02, cpu_seconds=1.0 * 5 * i)
            + [Sample("llm_engine_up", OTHER, 1.0)]
            + node_gpus([(0.1 + 0.02 * k, 0.1, 0.05) for k in range(8)])
        )

    d, _ = run(Diagnoser(), 20, make)
    assert d.primary == "host_overhead"
    assert "GPU busy 0.24 at most, on every one of the node's 8 unattributed GPUs (all <= 0.3), while" in d.evidence[0]


def test_slow_tokens_with_a_busy_core_and_no_gpu_data_read_host_overhead_not_decode() -> None:
    def make(i: int) -> list[Metric]:
        return engine_metrics(running=8, itl_p95=0.005 if i < 10 else 0.03, cpu_seconds=0.95 * 5 * i)

    d, _ = run(Diagnoser(), 40, make)
    assert d.primary == "host_overhead"
    assert d.scores["decode_memory_bandwidth"] < 0.4


def test_history_windows_answer_as_a_walk_over_every_point_would() -> None:
    # History keeps a column per attribute and remembers answers (issue #23's per-target
    # budget); every helper must still answer what walking the points gives, with gaps (None),
    # counter resets, the horizon and max_points dropping old points.
    import random
    from statistics import fmean

    from exporter.stages.inputs import EngineInputs
    from exporter.stages.signals import History

    rng = random.Random(6)
    history = History(horizon_seconds=40, max_points=25)
    points: list[tuple[float, EngineInputs]] = []
    counter = 0.0
    for step in range(400):  # long enough for the columns to be compacted a few times
        now = step * 1.5
        counter = 0.0 if rng.random() < 0.05 else counter + rng.random() * 3
        inputs = EngineInputs(waiting=None if rng.random() < 0.3 else rng.random() * 10, preemptions_total=counter)
        history.add(now, inputs)
        points = [p for p in [*points, (now, inputs)] if p[0] >= now - 40][-25:]
        for attr in ("waiting", "preemptions_total", "kv_usage"):
            for seconds in (5.0, 12.0, 60.0):
                recent = [(t, getattr(p, attr)) for t, p in points if t >= now - seconds]
                window = [(t, value) for t, value in recent if value is not None]
                values = [v for _, v in window]
                assert list(history.values(attr, seconds)) == values
                assert history.mean(attr, seconds) == (fmean(values) if values else None)
                assert history.maximum(attr, seconds) == (max(values) if values else None)
                assert history.minimum(attr, seconds) == (min(values) if values else None)
                expected_rate = None
                if len(window) >= 2 and window[-1][0] > window[0][0]:
                    increase = sum(b - a if b >= a else b for (_, a), (_, b) in zip(window, window[1:]))
                    expected_rate = increase / (window[-1][0] - window[0][0])
                assert history.rate(attr, seconds) == pytest.approx(expected_rate)
                if len(values) >= 3:
                    third = max(1, len(values) // 3)
                    assert history.trend(attr, seconds) == fmean(values[-third:]) - fmean(values[:third])
                else:
                    assert history.trend(attr, seconds) is None


def test_history_reads_latency_histograms_as_a_walk_over_every_point_would_and_keeps_none() -> None:
    # A span's quantile comes from the increase of the engine's cumulative histogram between the
    # earliest point of the span with the newest's bucket layout and the newest: with points
    # lacking it, layout changes and counter resets. The history keeps counts, not the points'
    # histogram objects (a baseline's worth of them per engine was the soak's memory).
    import gc
    import random

    from exporter.model import Histogram
    from exporter.stages.inputs import QUANTILE_OF, EngineInputs
    from exporter.stages.signals import History
    from exporter.window import histogram_quantile

    rng = random.Random(7)
    layouts = [(0.01, 0.05, 0.1, 0.5, math.inf), (0.02, 0.1, 1.0, math.inf)]
    history = History(horizon_seconds=40, max_points=25)
    kept: list[tuple[float, Histogram | None]] = []
    counts = [0.0] * 5
    layout = layouts[0]
    for step in range(300):
        now = step * 1.5
        if rng.random() < 0.04:
            layout = layouts[1] if layout is layouts[0] else layouts[0]
            counts = [0.0] * len(layout)
        elif rng.random() < 0.04:
            counts = [0.0] * len(layout)  # a restart behind the same address
        growth = [rng.random() * 4 for _ in layout]
        counts = [c + sum(growth[: i + 1]) for i, c in enumerate(counts)]
        histogram = None
        inputs = EngineInputs()
        if rng.random() > 0.2:
            histogram = Histogram(layout, tuple(counts), 0.0, counts[-1])
            inputs.histograms["itl_p95"] = histogram
        history.add(now, inputs)
        kept = [p for p in [*kept, (now, histogram)] if p[0] >= now - 40][-25:]
        for seconds in (5.0, 12.0, 60.0):
            newest_at, last = kept[-1]
            first = None
            for at, point in reversed(kept):
                if at < newest_at - seconds or last is None:
                    break
                if at < newest_at and point is not None and point.bounds == last.bounds:
                    first = point
            expected = None
            if last is not None and first is not None:
                increase = [a - b for a, b in zip(last.cumulative, first.cumulative)]
                if all(step >= 0 for step in increase):
                    value = histogram_quantile(QUANTILE_OF["itl_p95"], last.bounds, increase)
                    expected = None if math.isnan(value) else value
            assert history.level("itl_p95", seconds) == expected, (step, seconds)
    reachable, todo = {id(history)}, [history]
    while todo:  # everything the history holds
        for held in gc.get_referents(todo.pop()):
            if id(held) not in reachable and not isinstance(held, type):
                reachable.add(id(held))
                todo.append(held)
    assert not [h for _, h in kept if h is not None and id(h) in reachable]


def test_history_keeps_the_newest_point_whole_and_of_the_others_only_their_columns() -> None:
    # Of the points before the newest only what a window reads is kept: numbers in arrays, the
    # node-wide GPU ranges of the points that carried them. A point's lists and dicts, and a float
    # object per number, kept for the baseline and freed at once at an engine's restart, were
    # waves of small objects the interpreter's memory fragmented around (the soak's RSS).
    import gc
    import random

    from exporter.stages.inputs import EngineInputs
    from exporter.stages.signals import History

    rng = random.Random(3)
    history = History(horizon_seconds=600, max_points=200)
    lows: list[tuple[float, float]] = []
    for step in range(150):
        now = step * 5.0
        inputs = EngineInputs(running=rng.random() * 8, waiting=rng.random(), preemptions_total=float(step))
        inputs.gpus, inputs.settings = [f"gpu{step % 8}"], {"max_num_seqs": str(step)}
        if step % 3 == 0:
            inputs.node_gpu_range = {"sm_active": (rng.random() * 0.4, 0.5 + rng.random() * 0.5)}
            lows.append((now, inputs.node_gpu_range["sm_active"][0]))
        history.add(now, inputs)
    assert history.latest() is inputs and len(history.times) == 121  # the horizon's
    recent = [low for at, low in lows if at >= now - 100]
    found = history.node_range("sm_active", 100)
    assert found is not None and math.isclose(found[0], sum(recent) / len(recent))
    assert len(history.values("running", 600)) == 121
    reachable, todo, held_points, held_floats = {id(history)}, [history], 0, 0
    while todo:  # everything the history holds
        for held in gc.get_referents(todo.pop()):
            if id(held) not in reachable and not isinstance(held, type):
                reachable.add(id(held))
                todo.append(held)
                held_points += isinstance(held, EngineInputs)
                held_floats += type(held) is float
    assert held_points == 1
    # the newest point's three numbers, the node ranges of the 40 points in the horizon that
    # carried them (a time and two bounds each) and node_range's answer: no column's numbers
    assert held_floats == 3 + 3 * 40 + 2, held_floats
