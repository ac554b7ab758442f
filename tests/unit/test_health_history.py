"""The health checks' counter history: only what a check reads, for as long as it reads it, in a
bounded number of points whatever the interval, with increases that stay exact."""

from __future__ import annotations

from exporter.health.evaluate import NodeHealth
from exporter.health.history import MAX_POINTS, CounterHistory
from exporter.health.record import counter_horizons
from exporter.model import Sample

KEY = ("llm_rdma_port_link_errors_total", ("counter", "link_downed"), ("device", "mlx5_0"))


def test_only_the_families_a_check_reads_are_kept_for_their_longest_window():
    horizons = counter_horizons()
    assert horizons["llm_rdma_port_link_errors_total"] == 3600.0  # symbol errors per hour
    assert horizons["llm_engine_gc_collections_total"] == 300.0
    assert "llm_engine_generation_tokens_total" not in horizons
    history = CounterHistory(horizons)
    history.observe(("llm_engine_generation_tokens_total",), 0.0, 1.0)
    history.observe(("llm_engine_generation_tokens_total",), 5.0, 2.0)
    assert history.increase(("llm_engine_generation_tokens_total",), 60.0) is None


def test_points_stay_bounded_at_a_tenth_of_a_second_and_the_increase_stays_exact():
    history = CounterHistory({KEY[0]: 3600.0})
    value, rose_last_hour = 0.0, 0.0
    rounds = 2 * 36_000  # two hours at 0.1 s
    for n in range(rounds):
        now = n * 0.1
        # +1 every round, a reset (a restart) every 5,000 rounds
        value = 0.0 if n % 5_000 == 0 and n else value + 1.0
        if now > rounds * 0.1 - 3600.0:
            rose_last_hour += 1.0 if n % 5_000 else 0.0
        history.observe(KEY, now, value)
    points = history.samples(KEY, 3600.0)
    assert len(points) <= MAX_POINTS + 2
    # the window's edge falls on a kept point: at most one spacing (3600/256 s, 141 rounds) off
    assert abs(history.increase(KEY, 3600.0) - rose_last_hour) <= 3600.0 / MAX_POINTS / 0.1 + 1


def test_every_round_is_kept_at_the_default_interval_over_a_five_minute_window():
    history = CounterHistory({KEY[0]: 300.0})
    for n in range(100):
        history.observe(KEY, n * 5.0, n * 2.0)
    assert len(history.samples(KEY, 300.0)) == 61  # 300 s of 5 s rounds, both ends
    assert history.increase(KEY, 60.0) == 24.0
    assert history.span(KEY, 60.0) == 60.0


def test_a_reset_between_two_points_counts_from_zero_as_prometheus_does():
    history = CounterHistory({KEY[0]: 300.0})
    for now, value in ((0.0, 10.0), (5.0, 15.0), (10.0, 3.0), (15.0, 4.0)):
        history.observe(KEY, now, value)
    assert history.increase(KEY, 60.0) == 5.0 + 3.0 + 1.0


def test_a_nodes_counters_that_no_check_reads_leave_no_history():
    health = NodeHealth()
    for n in range(50):
        metrics = [
            Sample("llm_engine_generation_tokens_total", {"engine": "e", "model": "m"}, n * 100.0),
            Sample("llm_engine_gc_collections_total", {"engine": "e", "generation": "2"}, float(n)),
        ]
        health.update(metrics, n * 5.0, wall=1e9 + n * 5.0)
    gc_key = ("llm_engine_gc_collections_total", ("engine", "e"), ("generation", "2"))
    tokens_key = ("llm_engine_generation_tokens_total", ("engine", "e"), ("model", "m"))
    assert health.latest.findings and health.latest.findings[0].kind == "gc_pauses"
    counters = health._counters  # noqa: SLF001 - what is kept is the point of this test
    assert counters.samples(gc_key, 300.0)
    assert counters.samples(tokens_key, 300.0) == []


def test_a_round_without_a_series_is_a_gap_and_a_horizon_without_it_forgets_it():
    """An engine's scrape that times out leaves its counters out of one round: the increase a check
    reads resumes across the gap instead of starting over (a finding would blink off for a window);
    a device gone for its whole horizon takes its history with it."""
    history = CounterHistory({KEY[0]: 300.0})
    for n in range(10):
        history.observe(KEY, n * 5.0, n * 2.0)
        history.forget_unseen({KEY}, n * 5.0)
    history.forget_unseen(set(), 50.0)  # this round's scrape failed
    history.observe(KEY, 55.0, 22.0)
    assert history.increase(KEY, 60.0) == 22.0
    history.forget_unseen(set(), 55.0 + 300.0)
    assert history.increase(KEY, 60.0) == 22.0  # gone for its horizon, not longer
    history.forget_unseen(set(), 55.0 + 301.0)
    assert history.increase(KEY, 60.0) is None


def test_a_series_points_are_doubles_in_arrays_not_float_objects():
    # points live up to an hour while the last is rewritten every round: as float objects they
    # were long-lived small objects among each round's short-lived ones (the soak's memory)
    import gc

    history = CounterHistory({KEY[0]: 3600.0})
    for n in range(2000):
        history.observe(KEY, n * 5.0, float(n // 7))
    assert len(history.samples(KEY, 3600.0)) >= 256  # a full horizon of points
    reachable, todo, floats = {id(history)}, [history], 0
    while todo:  # everything the history holds
        for held in gc.get_referents(todo.pop()):
            if id(held) not in reachable and not isinstance(held, type):
                reachable.add(id(held))
                todo.append(held)
                floats += type(held) is float
    assert floats <= 4, floats  # the horizon, the spacing, the last value (and its dict's horizon)
