"""Engines starting: loading, the cold regime (warming up) and serving, read as the diagnosis's
states (exporter/diagnosis/states.py), the start-up figures, and the host-pause findings."""

from __future__ import annotations

import pytest

from exporter.diagnosis import Diagnoser
from exporter.health.evaluate import HealthRound, NodeHealth
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import HealthSettings

ENGINE = {"engine": "vllm-0", "engine_type": "vllm", "model": "m"}
KEY = ("vllm-0", "vllm", "m")


def engine_round(up: bool, start: float | None, tokens: float, asleep: bool = False, **extra: float) -> list[Metric]:
    metrics: list[Metric] = [Sample("llm_engine_up", ENGINE, 1.0 if up else 0.0)]
    if start is not None:
        metrics.append(Sample("llm_engine_process_start_time_seconds", ENGINE, start))
    if up:
        metrics.append(Sample("llm_engine_generation_tokens_total", ENGINE, tokens))
        state = "level_1" if asleep else "awake"
        metrics.append(Sample("llm_engine_asleep", {**ENGINE, "sleep_state": state}, 1.0 if asleep else 0.0))
    metrics += [Sample(name, ENGINE, value) for name, value in extra.items()]
    return metrics


class Clock:
    """The health round and the diagnosis over it, as the exporter runs them each collection."""

    def __init__(self, health: NodeHealth, wall: float = 10_000.0) -> None:
        self.health, self.wall = health, wall
        self.diagnoser = Diagnoser()
        self.gauges: list[Metric] = []

    def step(self, metrics: list[Metric], seconds: float = 5.0) -> HealthRound:
        self.wall += seconds
        found = self.health.update(metrics, self.wall, self.wall)
        self.gauges = self.diagnoser.update(metrics, self.wall, findings=found.findings, starts=found.startups)
        return found

    def state(self) -> tuple[str, str, str]:
        status = self.diagnoser.states.current[KEY]
        return status.state.value, status.reason, status.message


def test_a_start_loads_then_warms_up_then_serves() -> None:
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=60.0)))
    start = clock.wall
    loading = clock.step(engine_round(False, start, 0))
    assert clock.state()[0] == "loading" and "its process has run 5 s" in clock.state()[2]
    assert loading.startups["vllm-0"].loading_seconds == pytest.approx(5.0)
    assert [f.kind for f in loading.findings] == ["engine_loading"]
    clock.step(engine_round(True, start, 0))
    assert clock.state()[:2] == ("warming_up", "start") and "served no request" in clock.state()[2]
    first = clock.step(engine_round(True, start, 40))
    assert first.startups["vllm-0"].startup_seconds == pytest.approx(15.0)
    assert clock.state()[0] == "warming_up" and "cold for 60 s more" in clock.state()[2]
    for _ in range(11):
        clock.step(engine_round(True, start, 40))
    assert clock.state()[0] == "warming_up"
    done = clock.step(engine_round(True, start, 40))
    assert clock.state() == ("up", "", "")
    gauges = {(m.name, m.labels.get("state")): m.value for m in clock.gauges if isinstance(m, Sample)}
    assert gauges[("llm_engine_state", "up")] == 1.0 and gauges[("llm_engine_state", "warming_up")] == 0.0
    assert [(m.name, m.value) for m in done.gauges] == [("llm_engine_startup_duration_seconds", 15.0)]


def test_an_engine_up_long_before_the_exporter_is_serving_at_once_and_a_restart_is_cold_again() -> None:
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=60.0)))
    clock.step(engine_round(True, clock.wall - 3600, 5000))
    assert clock.state()[0] == "up"
    # The first request it served is before the exporter saw it: no start-up figure of an hour.
    assert clock.step(engine_round(True, clock.wall - 3605, 5200)).startups["vllm-0"].startup_seconds is None
    restarted = clock.step(engine_round(True, clock.wall + 1, 0))
    assert clock.state()[:2] == ("warming_up", "restart") and clock.state()[2].startswith("restarted 4 s ago")
    assert restarted.startups["vllm-0"].restarts == 1


def test_an_engine_that_stops_answering_is_down_not_loading_and_a_leftover_child_is_no_restart() -> None:
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=60.0)))
    start = clock.wall - 3600
    clock.step(engine_round(True, start, 5000))
    hung = clock.step(engine_round(False, start, 0))
    assert clock.state()[0] == "down" and hung.startups["vllm-0"].loading_seconds is None
    # Stopping: the server exited, its engine child (started after it, while it served) still
    # holds the inherited listening socket and is the process the host sees on the port.
    leftover = clock.step(engine_round(False, start + 30, 0))
    assert clock.state()[0] == "down" and leftover.startups["vllm-0"].restarts == 0
    assert not [f for f in leftover.findings if f.kind == "engine_loading"]
    # The new process, started since the engine last answered: a restart, loading.
    new_start = clock.wall + 1
    clock.step(engine_round(False, new_start, 0))
    assert clock.state()[0] == "loading"
    restarted = clock.step(engine_round(True, new_start, 0))
    assert clock.state()[:2] == ("warming_up", "restart")
    assert restarted.startups["vllm-0"].restarts == 1
    assert restarted.startups["vllm-0"].started_at == new_start


def test_a_wake_from_sleep_starts_a_cold_regime() -> None:
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=60.0)))
    start = clock.wall - 3600
    clock.step(engine_round(True, start, 5000))
    clock.step(engine_round(True, start, 5000, asleep=True))
    assert clock.state()[:2] == ("asleep", "level_1")
    clock.step(engine_round(True, start, 5000))
    assert clock.state()[:2] == ("warming_up", "wake") and "woke from sleep" in clock.state()[2]


def test_warmup_seconds_zero_turns_the_cold_regime_off() -> None:
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=0.0)))
    start = clock.wall - 3600
    clock.step(engine_round(True, start, 5000))
    clock.step(engine_round(True, clock.wall + 1, 0))  # a restart, no request served yet
    assert clock.state()[0] == "up"


def test_the_diagnosis_gives_no_verdict_during_the_cold_regime() -> None:
    """An engine that would read queueing has no verdict while warming up, its state says why,
    and it is judged as soon as the regime ends (its history grew meanwhile)."""
    clock = Clock(NodeHealth(HealthSettings(warmup_seconds=60.0)))
    busy = [
        Sample("llm_engine_requests_running", ENGINE, 8.0),
        Sample("llm_engine_requests_waiting", ENGINE, 40.0),
        Sample("llm_engine_kv_cache_usage_ratio", ENGINE, 0.3),
        QuantileSummary("llm_engine_queue_time_seconds", ENGINE, ((0.5, 4.0), (0.95, 9.0), (0.99, 9.5)), 100, 400),
    ]
    start, tokens = clock.wall + 5, 0.0
    for _ in range(13):  # started now; its first request 5 s later: cold until 60 s after that
        clock.step([*engine_round(True, start, tokens), *busy])
        tokens += 100
        assert KEY not in clock.diagnoser.latest and clock.state()[0] == "warming_up"
    entry = next(e for e in clock.diagnoser.report()["engines"] if e["engine"] == "vllm-0")
    assert entry["primary"] is None and entry["state"] == "warming_up"
    assert entry["no_verdict"].startswith("the engine is warming up: its latencies are not yet its own (start:")
    assert not [m for m in clock.gauges if m.name.startswith("llm_bottleneck")]
    clock.step([*engine_round(True, start, tokens), *busy])
    assert clock.state()[0] == "up" and clock.diagnoser.latest[KEY].primary == "queueing"


def test_gc_pauses_throttling_and_steal_are_host_evidence_with_their_numbers() -> None:
    health = NodeHealth()
    node = [Sample("llm_engine_up", ENGINE, 1.0)]
    for minute in range(6):
        wall = 1000.0 + 60 * minute
        metrics = [
            *node,
            Sample("llm_engine_gc_collections_total", {**ENGINE, "generation": "0"}, 600.0 * minute),
            Sample("llm_engine_gc_collections_total", {**ENGINE, "generation": "2"}, 3.0 * minute),
            Sample("llm_engine_cgroup_cpu_periods_total", ENGINE, 600.0 * minute),
            Sample("llm_engine_cgroup_cpu_throttled_periods_total", ENGINE, 90.0 * minute),
            Sample("llm_engine_cgroup_cpu_throttled_seconds_total", ENGINE, 4.5 * minute),
            Sample("llm_host_cpu_steal_ratio", {}, 0.08),
        ]
        found = {f.kind: f for f in health.update(metrics, wall, wall).findings}
    assert set(found) == {"gc_pauses", "cpu_throttled", "cpu_steal"}
    assert (
        "3.0 full garbage collections per minute" in found["gc_pauses"].text and found["gc_pauses"].engine == "vllm-0"
    )
    assert "throttled in 15% of its CPU periods" in found["cpu_throttled"].text
    assert "8% of the node's CPU time stolen" in found["cpu_steal"].text


def tokens_at(paces: list[float]) -> list:
    """The findings after rounds of 100 tokens each at these times per output token."""
    health = NodeHealth()
    itl_sum = tokens = 0.0
    found: list = []
    for index, per_token in enumerate(paces):
        itl_sum += per_token * 100
        tokens += 100
        summary = QuantileSummary(
            "llm_engine_inter_token_latency_seconds", ENGINE, ((0.5, per_token), (0.95, per_token)), tokens, itl_sum
        )
        wall = 1000.0 + 5 * index
        found = health.update([Sample("llm_engine_up", ENGINE, 1.0), summary], wall, wall).findings
    return found


def test_jitter_is_the_spread_of_time_per_output_token_round_to_round() -> None:
    found = tokens_at([0.02, 0.02, 0.035, 0.02, 0.05, 0.02, 0.03, 0.02])
    assert [f.kind for f in found] == ["jitter"]
    assert "time per output token varies" in found[0].text and found[0].value > 0.15


def test_a_load_that_shifts_smoothly_is_not_jitter() -> None:
    """A backlog draining after a phase (the demo's remedied phase: a batch of long requests slowed
    every token for half a minute, then the pace settled lower) moves the level, round by round;
    its spread around the mean is 23 %, its rounds' scatter 8 %."""
    shift = [0.025, 0.0286, 0.0367, 0.0401, 0.038, 0.0304, 0.0258, 0.0253, 0.0247, 0.023, 0.022]
    assert tokens_at(shift + [0.0215, 0.0221, 0.0214, 0.0215, 0.0225, 0.0224, 0.022, 0.0228, 0.0217]) == []


def test_an_engine_that_crash_loops_keeps_a_count_of_its_restarts_not_a_record_of_each() -> None:
    """An engine restarting every few seconds for days: what the exporter holds of it stays the
    same size (the restarts as a number), where a time kept per restart grew with every one."""
    import tracemalloc

    starts = NodeHealth(HealthSettings(warmup_seconds=0.0))
    wall = 10_000.0

    def restart_times(count: int) -> None:
        nonlocal wall
        for _ in range(count):
            wall += 5.0
            starts.update(engine_round(True, wall - 1.0, 0), wall, wall)

    restart_times(50)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*exporter/health/*")])
        restart_times(2000)
        after = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*exporter/health/*")])
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert starts.latest.startups["vllm-0"].as_json()["restarts_seen"] == 2049
    assert grown < 16_000, f"{grown} bytes more after 2,000 restarts"
