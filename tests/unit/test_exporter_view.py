"""The reference the vLLM tier checks the exporter's windowed TTFT median against
(tests/integration/exporter_view.window_median_bounds): whatever the engine observes and whenever
the exporter and the test read it, within the stated timing, the exporter's median lies inside."""

from __future__ import annotations

import math
from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.window import DeltaWindow, histogram_quantile
from tests.integration.exporter_view import EngineSampler, EngineSnapshot, View, window_median_bounds

BOUNDS = (0.5, 1.0, 2.5, 5.0, 7.5, 10.0, math.inf)
WINDOW_S, INTERVAL_S = 20.0, 1.0
TIMING = {"lag_s": 3.0, "spacing_s": 2.0, "read_s": 1.0}
LAST_READ_S = 45.0
MAX_COLLECTIONS = int(LAST_READ_S / INTERVAL_S) + 1


class EngineHistogram:
    """The engine's cumulative histogram at any time, from observations sorted by time.

    Counts per bucket are summed once, so each read is a bisection: the property reads the
    engine about 160 times per example, and recounting every observation each time made it the
    slowest unit test."""

    def __init__(self, observations: list[tuple[float, float]]) -> None:
        self.times = [at for at, _ in observations]
        self.counts = [[0] * len(BOUNDS)]
        for _, value in observations:
            self.counts.append([c + (value <= b) for c, b in zip(self.counts[-1], BOUNDS)])

    def at(self, until: float) -> dict[float, float]:
        seen = self.counts[bisect_right(self.times, until)]
        return {b: float(c) for b, c in zip(BOUNDS, seen)}


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.2, 0.7, 2.0, 4.0, 6.0, 8.0, 12.0]), min_size=30, max_size=200),
    drift=st.booleans(),
    # One lateness per collection: 46 always reach past read_at (each is at least 1 s apart), so
    # drawing more only costs time.
    jitter=st.lists(st.floats(0.0, 0.9), min_size=MAX_COLLECTIONS, max_size=MAX_COLLECTIONS),
    read_at=st.floats(30.0, LAST_READ_S),
)
def test_the_exporters_median_lies_within_the_engine_bounds(values, drift, jitter, read_at) -> None:
    # Observations spread over 50 s; with drift, TTFTs grow over time (a queue building up).
    observations = sorted(((i * 50.0 / len(values)), v) for i, v in enumerate(sorted(values) if drift else values))
    # The exporter: a collection stamped every interval (late by up to 0.9 s), reading the engine
    # at its stamp, keeping a 20 s window; the last one before the view is at most lag_s old.
    histogram = EngineHistogram(observations)
    window = DeltaWindow(WINDOW_S)
    stamp, last_stamp = 0.0, 0.0
    for late in jitter:
        stamp += INTERVAL_S + late
        if stamp > read_at:
            break
        buckets = histogram.at(stamp)
        window.observe(stamp, [buckets[b] for b in BOUNDS])
        last_stamp = stamp
    totals = window.total()
    if totals is None or totals[-1] == 0 or read_at - last_stamp > TIMING["lag_s"]:
        return
    exporter_median = histogram_quantile(0.5, BOUNDS, totals)
    # The test's reads of the engine, every half second, each 0.1 s long.
    engine = EngineSampler(lambda: "")
    engine.snapshots = [EngineSnapshot(t, t + 0.1, histogram.at(t)) for t in (k * 0.5 for k in range(0, 120))]
    bounds = window_median_bounds(engine, View(read_at, ()), WINDOW_S, **TIMING)
    assert bounds is not None
    low, high, _ = bounds
    assert low <= exporter_median <= high, (exporter_median, low, high)


def test_a_steady_load_gives_the_bucket_of_its_median() -> None:
    observations = [(t * 0.25, 6.0) for t in range(200)]
    histogram = EngineHistogram(observations)
    engine = EngineSampler(lambda: "")
    engine.snapshots = [EngineSnapshot(t, t + 0.1, histogram.at(t)) for t in (k * 0.5 for k in range(100))]
    bounds = window_median_bounds(engine, View(45.0, ()), WINDOW_S, **TIMING)
    assert bounds is not None
    low, high, evidence = bounds
    assert (low, high) == (5.0, 7.5)
    assert evidence["inner_requests"] < 4 * WINDOW_S < evidence["outer_requests"]


def test_no_bounds_without_a_read_before_the_window() -> None:
    engine = EngineSampler(lambda: "")
    empty = EngineHistogram([])
    engine.snapshots = [EngineSnapshot(t, t + 0.1, empty.at(t)) for t in (k * 0.5 for k in range(40, 100))]
    assert window_median_bounds(engine, View(45.0, ()), WINDOW_S, **TIMING) is None
