"""Windows over cumulative counters: increments that survive engine restarts.

Engines expose cumulative histograms and counters. Latency quantiles "now" and hit ratios "now"
need the increase over a recent window, computed the way Prometheus' `increase()` does: a value
that went down means the process restarted, and the new value is itself the increase since then.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import reduce
from operator import add, lt, sub
from typing import Any, Generic, TypeVar

from exporter.model import Histogram, QuantileSummary

K = TypeVar("K", bound=Hashable)


class DeltaWindow:
    """Sums per-scrape increments of a vector of counters over the last `window_seconds`.

    Memory is bounded by window / scrape interval entries (and `max_entries` in any case).

    The total is kept as a running sum (each increment added as it comes, subtracted as it
    expires), so a round costs one pass over the columns, not window / interval passes: at a 1 s
    interval and a 60 s window a histogram's ~30 columns were summed 60 deep, every round, per
    histogram (issue #23's per-target budget). Increments of counts are whole numbers, exact in
    either order; a float column (a histogram's sum) could drift by rounding, so the sum is
    folded afresh, in entry order, once as many changes as the window holds entries have gone
    by: the drift never outlives one window, at an amortized cost of one column pass per round.
    """

    def __init__(self, window_seconds: float, max_entries: int = 4096) -> None:
        self.window_seconds = window_seconds
        self._entries: deque[tuple[float, tuple[float, ...]]] = deque(maxlen=max_entries)
        self._last: tuple[float, ...] | None = None
        # when each entry's increment began (the observation before it), for span(); None: unknown
        self._starts: deque[float | None] = deque(maxlen=max_entries)
        self._last_time: float | None = None
        self._shape: object = None
        #: the running column sums of `_entries` (None while there are none)
        self._total: list[float] | None = None
        #: appends and expiries since `_total` was last folded afresh
        self._changes = 0

    def observe(self, now: float, values: Sequence[float], shape: object = None) -> None:
        """Record the cumulative `values` seen at `now`.

        `shape` identifies the layout of `values` (bucket bounds): a new layout starts afresh,
        since increments of different buckets cannot be added.
        """
        current = tuple(values)
        if shape != self._shape or (self._last is not None and len(current) != len(self._last)):
            self._clear()
            self._last = None
            self._shape = shape
        if self._last is not None:
            if any(map(lt, current, self._last)):  # compared in C, column by column
                increment = current  # counter reset: the engine restarted
            else:
                increment = tuple(map(sub, current, self._last))
            self._append(now, increment, self._last_time)
        self._last = current
        self._last_time = now
        self._expire(now)

    def seed_lifetime(self, now: float, values: Sequence[float], shape: object = None) -> None:
        """Count everything since the engine started as one increment (for one-shot collection)."""
        self._clear()
        self._shape = shape
        self._last = tuple(values)
        self._last_time = now
        self._append(now, tuple(values), None)  # since the engine started: a span this window cannot know

    def total(self) -> tuple[float, ...] | None:
        """Sum of increments inside the window; None before two observations."""
        if not self._entries or self._total is None:
            return None
        if self._changes > len(self._entries):
            self._total = self._folded()
            self._changes = 0
        return tuple(self._total)

    def _folded(self) -> list[float]:
        """Column sums in entry order, as a loop of `+=` from 0.0 gives, with the loops in C."""
        columns = zip(*(increment for _, increment in self._entries))
        return [reduce(add, column, 0.0) for column in columns]

    def _clear(self) -> None:
        self._entries.clear()
        self._starts.clear()
        self._total = None
        self._changes = 0

    def _append(self, now: float, increment: tuple[float, ...], start: float | None) -> None:
        if self._entries.maxlen is not None and len(self._entries) == self._entries.maxlen:
            self._drop_oldest()  # what deque's maxlen would drop, taken out of the sum first
        self._entries.append((now, increment))
        self._starts.append(start)
        if self._total is None:
            self._total = [0.0 + value for value in increment]
        else:
            self._total = list(map(add, self._total, increment))
        self._changes += 1

    def _drop_oldest(self) -> None:
        _, increment = self._entries.popleft()
        self._starts.popleft()
        if not self._entries:
            self._total = None
            self._changes = 0
            return
        assert self._total is not None
        self._total = list(map(sub, self._total, increment))
        self._changes += 1

    def _expire(self, now: float) -> None:
        horizon = now - self.window_seconds
        while self._entries and self._entries[0][0] <= horizon:
            self._drop_oldest()

    def span(self) -> float:
        """Seconds the increments in the window cover (NaN when unknown, as for a lifetime seed)."""
        if not self._entries or self._starts[0] is None:
            return math.nan
        return self._entries[-1][0] - self._starts[0]


class RateWindow:
    """The per-second increase of a never-decreasing value over the last `window_seconds`.

    What `DeltaWindow` gives for one monotonic counter with the clock beside it (the increments
    observed within the window, over the seconds they cover), kept as the first and last points:
    the byte counters here are already freed of wraps and resets, so no per-entry sums are needed.
    """

    def __init__(self, window_seconds: float, max_points: int = 4096) -> None:
        self.window_seconds = window_seconds
        self._points: deque[tuple[float, float]] = deque(maxlen=max_points)

    def observe(self, now: float, value: float) -> float | None:
        """Record `value` at `now`; the rate over the window, None until it holds an increment."""
        points = self._points
        points.append((now, value))
        horizon = now - self.window_seconds
        # an increment counts while the point it ends at is inside the window
        while len(points) > 1 and points[1][0] <= horizon:
            points.popleft()
        (first_time, first), (last_time, last) = points[0], points[-1]
        if len(points) < 2 or last_time <= first_time:
            return None
        return (last - first) / (last_time - first_time)


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float:
    """Prometheus' histogram_quantile on one histogram: linear interpolation inside the bucket.

    NaN for an empty histogram; a rank that falls in the +Inf bucket returns the highest finite
    bound, as Prometheus does.
    """
    if not bounds or math.isnan(q):
        return math.nan
    total = cumulative[-1]
    if total <= 0 or math.isnan(total):
        return math.nan
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(bounds, cumulative):
        if count >= rank:
            if math.isinf(bound):
                return previous_bound if len(bounds) > 1 else math.nan
            if bound <= 0 and previous_count == 0:
                return bound
            width = count - previous_count
            if width <= 0:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / width
        previous_bound, previous_count = bound, count
    return previous_bound


def window_histogram(window: DeltaWindow) -> tuple[tuple[float, ...], float, float] | None:
    """(cumulative buckets, sum, count) of a histogram window stored as buckets + [sum, count]."""
    totals = window.total()
    if totals is None:
        return None
    return totals[:-2], totals[-2], totals[-1]


def histogram_vector(histogram: Histogram) -> tuple[float, ...]:
    """The layout stored in a histogram window: cumulative buckets, then sum, then count."""
    return histogram.cumulative + (histogram.sum, histogram.count)


def observed(
    windows: dict[Any, DeltaWindow],
    key: Any,
    window_seconds: float,
    lifetime_baseline: bool,
    now: float,
    values: Sequence[float],
    shape: object = None,
) -> DeltaWindow:
    """The window of `key` in `windows` after it observed `values`: made on first use, and then
    seeded with the values as one increment when `lifetime_baseline` (one-shot collection, which
    has no earlier scrape to subtract)."""
    window = windows.get(key)
    if window is None:
        window = windows[key] = DeltaWindow(window_seconds)
        if lifetime_baseline:
            window.seed_lifetime(now, values, shape)
            return window
    window.observe(now, values, shape)
    return window


def windowed_summary(
    name: str, labels: Mapping[str, str], histogram: Histogram, window: DeltaWindow, quantiles: Sequence[float]
) -> QuantileSummary:
    """The summary sample of a cumulative histogram already observed into `window`: quantiles over
    the window's increase, the cumulative count and sum, and both histograms for the SLO
    attainment (exporter/slo/)."""
    totals = window_histogram(window)
    if totals is None:
        return QuantileSummary(
            name, labels, tuple((q, math.nan) for q in quantiles), histogram.count, histogram.sum, histogram=histogram
        )
    windowed = Histogram(histogram.bounds, totals[0], totals[1], totals[2])
    return QuantileSummary(
        name,
        labels,
        tuple((q, histogram_quantile(q, histogram.bounds, totals[0])) for q in quantiles),
        histogram.count,
        histogram.sum,
        histogram=histogram,
        window=windowed,
        window_seconds=window.span(),
    )


class LastSeen(Generic[K]):
    """When each key was last seen, for state kept per key (an engine and model, an SLO point) that
    must outlive a round the key is missing from: a failed scrape is a gap in a series, not its
    end, and state dropped at the first gap makes every figure built on it start over (the burn
    "over 5 s", the capacity fit from one point) exactly when an overloaded engine's scrapes time
    out. A key away for longer than `seconds` has gone (a target removed, a model rolled out)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._seen: dict[K, float] = {}

    def gone(self, seen: Iterable[K], now: float) -> list[K]:
        """Note the keys seen at `now`; return those away for longer than `seconds`, forgotten."""
        for key in seen:
            self._seen[key] = now
        away = [key for key, last in self._seen.items() if now - last > self.seconds]
        for key in away:
            del self._seen[key]
        return away
