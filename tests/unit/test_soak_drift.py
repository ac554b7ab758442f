"""The soaks' judgement of /metrics p99 drift (tests/perf/drift.py): over budget only when the late
p99 is above budget and told apart from the early one by the scrapes measured."""

from __future__ import annotations

import random

from tests.perf.drift import OK, OVER, Window, judge, p99, p99_interval


def _latencies(scale: float = 1.0, seed: int = 7, n: int = 1400) -> list[float]:
    """n scrapes' latencies (seconds): log-normal, the median 2 ms and the p99 some 20 times that,
    the long tail of scrapes that wait on the collection's hold of the interpreter."""
    rng = random.Random(seed)
    return [scale * 0.002 * rng.lognormvariate(0.0, 1.3) for _ in range(n)]


def _p99_verdict(early: list[float], late: list[float]):
    windows = (Window("early", latencies=early), Window("late", latencies=late))
    return next(v for v in judge(windows, windows, 0) if v.name == "/metrics p99")


def test_the_interval_is_the_binomial_ranks_around_the_99th_percentile():
    values = [float(i) for i in range(1, 1401)]
    random.Random(1).shuffle(values)
    assert p99(values) == 1387.0
    # n p = 1386, 1.645 sqrt(n p (1 - p)) = 6.1: ranks 1379 and 1393
    assert p99_interval(values) == (1379.0, 1393.0)


def test_a_p99_within_what_the_scrapes_tell_apart_is_not_a_finding():
    # one exporter twice over (other scrapes of one distribution): a pair where the p99 reads over
    # budget by chance alone is not a finding
    early, late = next(
        (early, late)
        for seed in range(100)
        if p99(late := _latencies(seed=seed + 100)) > 1.25 * p99(early := _latencies(seed=seed))
    )
    verdict = _p99_verdict(early, late)
    assert verdict.status == OK and "not told apart" in verdict.reason


def test_a_slower_exporter_is_over_budget():
    early, late = _latencies(seed=7), _latencies(scale=2.0, seed=8)
    verdict = _p99_verdict(early, late)
    assert verdict.status == OVER and not verdict.reason


def test_within_budget_needs_no_interval():
    verdict = _p99_verdict(_latencies(seed=7), _latencies(scale=1.1, seed=8))
    assert verdict.status == OK and not verdict.reason
