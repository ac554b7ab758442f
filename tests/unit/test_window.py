"""Windows over cumulative counters, histogram_quantile, and the collection loop that feeds them.

Quantile expectations are worked out by hand from Prometheus' histogram_quantile: find the first
bucket whose cumulative count reaches q * total, then interpolate linearly inside it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator

import pytest

from exporter.loop import TIMEOUT_GRACE_SECONDS, CollectionLoop, Snapshot
from exporter.model import Histogram, Metric, Sample
from exporter.sources.base import Source, SourceError
from exporter.window import DeltaWindow, histogram_quantile, histogram_vector, window_histogram

INF = math.inf

# --- DeltaWindow ------------------------------------------------------------------------------


def test_first_observation_is_only_a_baseline() -> None:
    window = DeltaWindow(60)
    window.observe(0, (10, 100))
    assert window.total() is None


def test_increments_between_observations_are_summed() -> None:
    window = DeltaWindow(60)
    window.observe(0, (10, 100))
    window.observe(5, (13, 150))
    window.observe(10, (15, 160))
    assert window.total() == (5, 60)


def test_unchanged_counters_give_a_zero_increment_not_none() -> None:
    window = DeltaWindow(60)
    window.observe(0, (7,))
    window.observe(5, (7,))
    assert window.total() == (0,)


def test_increments_older_than_the_window_expire() -> None:
    window = DeltaWindow(60)
    window.observe(0, (0,))
    window.observe(5, (3,))  # +3 at t=5
    window.observe(10, (5,))  # +2 at t=10
    window.observe(64, (5,))
    assert window.total() == (5,)
    window.observe(65, (5,))  # t=5 is now exactly one window old
    assert window.total() == (2,)
    window.observe(71, (5,))
    assert window.total() == (0,)


def test_counter_reset_counts_the_new_value_as_the_increase() -> None:
    # Prometheus' increase(): a drop means the process restarted from zero, so the value after
    # the drop is itself the increase since the restart.
    window = DeltaWindow(60)
    window.observe(0, (100, 1000))
    window.observe(5, (110, 1100))  # +10, +100
    window.observe(10, (4, 30))  # restart: +4, +30
    window.observe(15, (6, 45))  # +2, +15
    assert window.total() == (16, 145)


def test_a_drop_in_any_member_resets_the_whole_vector() -> None:
    # One histogram restarts as a whole: its buckets are never mixed from before and after.
    window = DeltaWindow(60)
    window.observe(0, (5, 50, 500))
    window.observe(5, (1, 60, 600))
    assert window.total() == (1, 60, 600)


def test_increments_are_never_negative_across_a_restart() -> None:
    window = DeltaWindow(60)
    window.observe(0, (94, 94))
    window.observe(5, (0, 0))
    assert window.total() == (0, 0)


def test_a_new_bucket_layout_restarts_the_window() -> None:
    window = DeltaWindow(60)
    window.observe(0, (1, 2), shape=(0.5, INF))
    window.observe(5, (3, 4), shape=(0.5, INF))
    assert window.total() == (2, 2)
    window.observe(10, (3, 4, 9), shape=(0.1, 0.5, INF))
    assert window.total() is None  # a baseline again: old increments cannot be added to new buckets
    window.observe(15, (4, 6, 12), shape=(0.1, 0.5, INF))
    assert window.total() == (1, 2, 3)


def test_a_different_length_restarts_the_window_even_with_the_same_shape() -> None:
    window = DeltaWindow(60)
    window.observe(0, (1, 2))
    window.observe(5, (3, 4))
    window.observe(10, (5, 6, 7))
    assert window.total() is None


def test_seed_lifetime_counts_everything_since_the_engine_started() -> None:
    window = DeltaWindow(60)
    window.seed_lifetime(0, (30, 64), shape="layout")
    assert window.total() == (30, 64)
    window.observe(5, (32, 70), shape="layout")
    assert window.total() == (32, 70)


def test_entries_are_bounded() -> None:
    window = DeltaWindow(1e9, max_entries=3)
    for t in range(10):
        window.observe(t, (t,))
    assert window.total() == (3,)  # only the last three one-per-step increments remain


def test_the_running_total_matches_a_fresh_sum_of_the_increments_in_the_window() -> None:
    # The total is kept as a running sum (issue #23: one column pass per round, not window deep);
    # it must stay what summing the increments still inside the window gives: whole-number
    # columns exactly, a float column (a histogram's sum) to rounding, restarts included.
    import random

    rng = random.Random(23)
    window = DeltaWindow(20)
    counts, total_seconds = 0.0, 0.0
    seen: list[tuple[float, tuple[float, float]]] = []  # (time, increment) as the window should hold
    previous: tuple[float, float] | None = None
    for step in range(400):
        if rng.random() < 0.02:
            counts, total_seconds = 0.0, 0.0  # the engine restarted
        counts += rng.randrange(0, 5)
        total_seconds += rng.random() * 0.37
        now = float(step)
        window.observe(now, (counts, total_seconds))
        current = (counts, total_seconds)
        if previous is not None:
            restarted = any(c < p for c, p in zip(current, previous))
            seen.append((now, current if restarted else (current[0] - previous[0], current[1] - previous[1])))
        previous = current
        inside = [increment for t, increment in seen if t > now - 20]
        totals = window.total()
        if not inside:
            assert totals is None
            continue
        assert totals is not None
        assert totals[0] == sum(increment[0] for increment in inside)
        assert totals[1] == pytest.approx(sum(increment[1] for increment in inside), rel=1e-12, abs=1e-12)


def test_the_total_is_folded_afresh_once_a_window_not_every_round(monkeypatch) -> None:
    # A refold is the window-deep pass the running total exists to avoid; it must come once per
    # window's worth of changes. Once the first refold came, every later total() refolded (the
    # change count was never reset): 0.75 ms per vLLM target per round at 60 entries.
    window = DeltaWindow(60)
    folds = 0
    fold = window._folded

    def counted() -> list[float]:
        nonlocal folds
        folds += 1
        return fold()

    monkeypatch.setattr(window, "_folded", counted)
    for step in range(600):
        window.observe(float(step), (float(step), step * 0.1))
        assert window.total() is not None or step == 0
    # 600 rounds, two changes each (an append and an expiry) past the first 60: a refold every
    # ~30 rounds, so about 20 of them, not one per round.
    assert 10 <= folds <= 25, folds


# --- histogram_quantile -----------------------------------------------------------------------

BOUNDS = (0.1, 0.5, 1.0, INF)


def test_quantile_interpolates_inside_the_bucket() -> None:
    cumulative = (10, 30, 40, 40)
    # rank 20 lies in (0.1, 0.5]: 10 below it, 20 inside -> 0.1 + 0.4 * 10/20
    assert histogram_quantile(0.5, BOUNDS, cumulative) == pytest.approx(0.3)
    # rank 36 lies in (0.5, 1.0]: 30 below, 10 inside -> 0.5 + 0.5 * 6/10
    assert histogram_quantile(0.9, BOUNDS, cumulative) == pytest.approx(0.8)


def test_quantile_in_the_first_bucket_interpolates_from_zero() -> None:
    assert histogram_quantile(0.25, BOUNDS, (8, 8, 8, 8)) == pytest.approx(0.025)


def test_quantile_in_the_inf_bucket_returns_the_highest_finite_bound() -> None:
    assert histogram_quantile(0.99, BOUNDS, (1, 2, 3, 100)) == 1.0


def test_empty_histogram_gives_nan() -> None:
    assert math.isnan(histogram_quantile(0.5, BOUNDS, (0, 0, 0, 0)))


def test_histogram_with_only_an_inf_bucket_gives_nan() -> None:
    assert math.isnan(histogram_quantile(0.5, (INF,), (10,)))


def test_quantile_zero_is_the_bottom_of_the_first_bucket() -> None:
    assert histogram_quantile(0.0, BOUNDS, (10, 30, 40, 40)) == 0.0


def test_quantile_one_is_the_top_of_the_highest_non_empty_bucket() -> None:
    assert histogram_quantile(1.0, BOUNDS, (10, 30, 30, 30)) == pytest.approx(0.5)


def test_quantile_one_with_observations_above_every_bound_is_the_highest_finite_bound() -> None:
    assert histogram_quantile(1.0, BOUNDS, (10, 30, 40, 41)) == 1.0


def test_nan_quantile_gives_nan() -> None:
    assert math.isnan(histogram_quantile(math.nan, BOUNDS, (10, 30, 40, 40)))


def test_quantiles_over_a_window_use_the_increments_only() -> None:
    histogram_before = Histogram(bounds=BOUNDS, cumulative=(100, 100, 100, 100), sum=5.0, count=100)
    # 20 new observations, all in (0.5, 1.0]: the old 100 fast ones must not drag p50 down.
    histogram_after = Histogram(bounds=BOUNDS, cumulative=(100, 100, 120, 120), sum=20.0, count=120)
    window = DeltaWindow(60)
    window.observe(0, histogram_vector(histogram_before), BOUNDS)
    window.observe(5, histogram_vector(histogram_after), BOUNDS)
    buckets, total_sum, count = window_histogram(window)
    assert (buckets, total_sum, count) == ((0, 0, 20, 20), 15.0, 20)
    assert histogram_quantile(0.5, BOUNDS, buckets) == pytest.approx(0.75)


def test_window_histogram_is_none_before_two_observations() -> None:
    window = DeltaWindow(60)
    window.observe(0, histogram_vector(Histogram(BOUNDS, (1, 1, 1, 1), 0.05, 1)), BOUNDS)
    assert window_histogram(window) is None


# --- CollectionLoop with in-process sources ---------------------------------------------------


class FixedSource(Source):
    name = "fake"

    def __init__(self, target: str, value: float = 1.0) -> None:
        self.target = target
        self.value = value
        self.calls = 0
        self.closed = False

    def collect(self, now: float) -> list[Metric]:
        self.calls += 1
        return [Sample("llm_engine_requests_running", {"engine": self.target}, self.value)]

    def down_metrics(self) -> list[Metric]:
        return [Sample("llm_engine_up", {"engine": self.target}, 0.0)]

    def close(self) -> None:
        self.closed = True


class BlockingSource(FixedSource):
    """Blocks in collect until released (or 30 s: a loop that waited for it would show)."""

    def __init__(self, target: str, timeout_seconds: float) -> None:
        super().__init__(target)
        self.timeout_seconds = timeout_seconds
        self.release = threading.Event()
        self.running = 0
        self.max_running = 0
        self._lock = threading.Lock()

    def collect(self, now: float) -> list[Metric]:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            self.release.wait(30)
            return [Sample("llm_engine_requests_running", {"engine": self.target}, 7.0)]
        finally:
            with self._lock:
                self.running -= 1


class RaisingSource(FixedSource):
    def __init__(self, target: str, error: BaseException) -> None:
        super().__init__(target)
        self.error = error

    def collect(self, now: float) -> list[Metric]:
        self.calls += 1
        raise self.error


def values(snapshot: Snapshot, name: str) -> dict[str, float]:
    return {m.labels["engine"]: m.value for m in snapshot.metrics if isinstance(m, Sample) and m.name == name}


def status_of(snapshot: Snapshot, target: str):
    (status,) = [s for s in snapshot.statuses if s.target == target]
    return status


@pytest.fixture
def loops() -> Iterator[list[CollectionLoop]]:
    made: list[CollectionLoop] = []
    yield made
    for loop in made:
        for source in loop.sources:
            if isinstance(source, BlockingSource):
                source.release.set()
        loop.stop()


def test_slow_source_delays_the_others_no_longer_than_its_timeout(loops) -> None:
    slow = BlockingSource("slow", timeout_seconds=0.3)
    fast = FixedSource("fast")
    published: list[Snapshot] = []
    loop = CollectionLoop([slow, fast], interval_seconds=5, on_snapshot=published.append)
    loops.append(loop)
    started = time.monotonic()
    snapshot = loop.collect_once()
    elapsed = time.monotonic() - started
    # Generous slack for a loaded machine, far below the 30 s the slow source would block.
    assert elapsed < slow.timeout_seconds + TIMEOUT_GRACE_SECONDS + 5
    # The first round showed the fast source while the slow one ran (#17.10), then the complete one.
    assert published[-1] == snapshot and all(not s.complete for s in published[:-1])
    for partial in published[:-1]:
        assert partial.pending == (("fake", "slow"),) and values(partial, "llm_engine_requests_running") == {
            "fast": 1.0
        }
    assert values(snapshot, "llm_engine_requests_running") == {"fast": 1.0}
    assert values(snapshot, "llm_engine_up") == {"slow": 0.0}
    assert status_of(snapshot, "fast").up
    assert (status_of(snapshot, "slow").up, status_of(snapshot, "slow").error) == (False, "timeout")
    assert snapshot.error_counts == {("fake", "slow", "timeout"): 1}


def test_source_still_running_is_not_started_twice(loops) -> None:
    slow = BlockingSource("slow", timeout_seconds=0.2)
    fast = FixedSource("fast")
    loop = CollectionLoop([slow, fast], interval_seconds=5)
    loops.append(loop)
    loop.collect_once()
    second = loop.collect_once()
    assert slow.calls == 1 and slow.max_running == 1
    assert fast.calls == 2
    assert status_of(second, "slow").error == "timeout"
    assert second.error_counts[("fake", "slow", "timeout")] == 2

    # Once it returns, the loop takes its late result, then starts it afresh the round after.
    slow.release.set()
    deadline = time.monotonic() + 10
    third = loop.collect_once()
    while not status_of(third, "slow").up and time.monotonic() < deadline:
        time.sleep(0.01)
        third = loop.collect_once()
    assert status_of(third, "slow").up
    assert values(third, "llm_engine_requests_running")["slow"] == 7.0
    assert slow.calls == 1
    loop.collect_once()
    assert slow.calls == 2


def test_raising_source_is_reported_as_exception(loops) -> None:
    broken = RaisingSource("broken", ZeroDivisionError("bug in a mapping"))
    fine = FixedSource("fine", value=3.0)
    loop = CollectionLoop([broken, fine], interval_seconds=5)
    loops.append(loop)
    snapshot = loop.collect_once()
    assert (status_of(snapshot, "broken").up, status_of(snapshot, "broken").error) == (False, "exception")
    assert snapshot.error_counts == {("fake", "broken", "exception"): 1}
    assert values(snapshot, "llm_engine_requests_running") == {"fine": 3.0}


def test_source_error_reason_is_counted_per_round(loops) -> None:
    refusing = RaisingSource("refusing", SourceError("connection", "connection refused"))
    loop = CollectionLoop([refusing, FixedSource("fine")], interval_seconds=5)
    loops.append(loop)
    loop.collect_once()
    snapshot = loop.collect_once()
    assert status_of(snapshot, "refusing").error == "connection"
    assert snapshot.error_counts == {("fake", "refusing", "connection"): 2}


def test_failing_source_exports_its_down_metrics(loops) -> None:
    refusing = RaisingSource("refusing", SourceError("http_status", "HTTP 500"))
    loop = CollectionLoop([refusing, FixedSource("fine")], interval_seconds=5)
    loops.append(loop)
    snapshot = loop.collect_once()
    assert values(snapshot, "llm_engine_up") == {"refusing": 0.0}
    assert "refusing" not in values(snapshot, "llm_engine_requests_running")


def test_background_loop_keeps_publishing_while_a_source_hangs(loops) -> None:
    slow = BlockingSource("slow", timeout_seconds=0.1)
    fast = FixedSource("fast")
    published: list[Snapshot] = []
    loop = CollectionLoop([slow, fast], interval_seconds=0.05, on_snapshot=published.append)
    loops.append(loop)
    loop.start()
    deadline = time.monotonic() + 20
    while len([s for s in published if s.complete]) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    complete = [s for s in published if s.complete]  # the first round may publish partial ones too
    assert len(complete) >= 5
    assert [s.sequence for s in complete[:5]] == [1, 2, 3, 4, 5]
    assert all(values(s, "llm_engine_requests_running") == {"fast": 1.0} for s in published[:5])
    assert slow.calls == 1
    assert loop.is_alive()


def test_stop_closes_every_source(loops) -> None:
    sources = [FixedSource("a"), FixedSource("b")]
    loop = CollectionLoop(sources, interval_seconds=0.05)
    loop.start()
    loop.stop()
    assert not loop.is_alive()
    assert all(source.closed for source in sources)


class ManualClock:
    """A clock that moves only when told; it notes when `watched`'s worker reads it after
    `watched.collect` returned (its end-of-run reading), so a test can order events without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0
        self.watched: TrackedSource | None = None
        self.read_after_watched = threading.Event()

    def __call__(self) -> float:
        now = self.now  # read before signalling, so the slow source's step cannot slip in between
        watched = self.watched
        if watched is not None and watched.returned_in == threading.get_ident():
            self.read_after_watched.set()
        return now


class TrackedSource(FixedSource):
    """Remembers the thread its collect returned in."""

    returned_in: int | None = None

    def collect(self, now: float) -> list[Metric]:
        metrics = super().collect(now)
        self.returned_in = threading.get_ident()
        return metrics


class TenSecondSource(FixedSource):
    """Takes ten seconds of the manual clock once the watched source's run is over (or after 1 s of
    real time, well inside its 2 s timeout, for a loop that never reads the clock in the worker)."""

    def __init__(self, target: str, clock: ManualClock) -> None:
        super().__init__(target)
        self.clock = clock

    def collect(self, now: float) -> list[Metric]:
        self.clock.read_after_watched.wait(1)
        self.clock.now += 10.0
        return super().collect(now)


def test_each_source_reports_its_own_duration_not_the_wait_for_a_slower_one(loops) -> None:
    clock = ManualClock()
    quick = TrackedSource("quick")
    clock.watched = quick
    slow = TenSecondSource("slow", clock)
    # The slow source comes first: the loop waits for it before it looks at the quick one.
    loop = CollectionLoop([slow, quick], interval_seconds=5, clock=clock)
    loops.append(loop)
    snapshot = loop.collect_once()
    assert status_of(snapshot, "slow").duration_seconds == 10.0
    assert status_of(snapshot, "quick").duration_seconds == 0.0


class TrackedRefusingSource(TrackedSource):
    def collect(self, now: float) -> list[Metric]:
        super().collect(now)
        raise SourceError("connection", "connection refused")


def test_a_failing_source_reports_its_own_duration_too(loops) -> None:
    clock = ManualClock()
    refusing = TrackedRefusingSource("refusing")
    clock.watched = refusing
    loop = CollectionLoop([TenSecondSource("slow", clock), refusing], interval_seconds=5, clock=clock)
    loops.append(loop)
    status = status_of(loop.collect_once(), "refusing")
    assert (status.up, status.error, status.duration_seconds) == (False, "connection", 0.0)
