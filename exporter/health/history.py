"""The counter history the health checks take increases of: only the families a finding kind reads,
each for the longest window a kind reads it over, in a bounded number of points.

A check's threshold is stated over minutes to an hour (NVSentinel's symbol errors per hour), while
the exporter may collect every second: one point per round per series would keep thousands of
points of every counter on the node for an hour. Instead each series keeps its running increase
(resets counted as Prometheus' `increase` counts them, when they are observed) at points at least
`horizon / MAX_POINTS` apart: a round closer than that to the point before the last moves the last
point forward. An increase between any two kept points stays exact; a window's edge falls on the
nearest kept point, at most one spacing off. At the default 5 s interval a 5-minute window keeps
every round.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field

#: the most points a series keeps over its horizon (a few more until they are cut in a batch)
MAX_POINTS = 256
_CUT_BATCH = 32


def _doubles() -> array[float]:
    return array("d")


@dataclass
class _Series:
    """One counter series' points, in arrays of doubles rather than lists of float objects: the
    points live for up to an hour while the last one is rewritten every round, and long-lived
    small objects among each round's short-lived ones are what keeps the interpreter's allocator
    from handing memory back (the soak's RSS)."""

    spacing: float
    horizon: float
    times: array[float] = field(default_factory=_doubles)
    #: the increase since the series was first seen, at each of `times`
    totals: array[float] = field(default_factory=_doubles)
    last_value: float = 0.0

    def observe(self, now: float, value: float) -> None:
        if not self.times:
            self.times.append(now)
            self.totals.append(0.0)
            self.last_value = value
            return
        rose = value - self.last_value if value >= self.last_value else value  # a reset: counted from zero
        total = self.totals[-1] + rose
        self.last_value = value
        if len(self.times) >= 2 and now - self.times[-2] < self.spacing:
            self.times[-1], self.totals[-1] = now, total
        else:
            self.times.append(now)
            self.totals.append(total)
        cut = bisect_left(self.times, now - self.horizon)
        if cut > _CUT_BATCH:
            del self.times[:cut], self.totals[:cut]

    def first_within(self, seconds: float) -> int:
        return bisect_left(self.times, self.times[-1] - seconds)


class CounterHistory:
    """Per counter series of the families in `horizons` (family -> seconds kept), its increases."""

    def __init__(self, horizons: Mapping[str, float]) -> None:
        self.horizons = dict(horizons)
        self._series: dict[tuple, _Series] = {}

    def wants(self, family: str) -> bool:
        return family in self.horizons

    def observe(self, key: tuple, now: float, value: float) -> None:
        """`key` is (family, *label pairs); a family not in `horizons` is not kept."""
        series = self._series.get(key)
        if series is None:
            horizon = self.horizons.get(key[0])
            if horizon is None:
                return
            series = self._series[key] = _Series(horizon / MAX_POINTS, horizon)
        series.observe(now, value)

    def forget_unseen(self, seen: set[tuple], now: float) -> None:
        """Drop the series not in `seen` whose last point is older than their horizon. One round
        without a series (its source's scrape failed) is a gap: its increases resume after it."""
        gone = [k for k, s in self._series.items() if k not in seen and now - s.times[-1] > s.horizon]
        for key in gone:
            del self._series[key]

    def increase(self, key: tuple, seconds: float) -> float | None:
        """The increase over the last `seconds`; None without two points in the window."""
        series = self._series.get(key)
        if series is None or not series.times:
            return None
        first = series.first_within(seconds)
        if len(series.times) - first < 2:
            return None
        return series.totals[-1] - series.totals[first]

    def span(self, key: tuple, seconds: float) -> float:
        """Seconds the points of the last `seconds` cover."""
        series = self._series.get(key)
        if series is None or not series.times:
            return 0.0
        return series.times[-1] - series.times[series.first_within(seconds)]

    def samples(self, key: tuple, seconds: float) -> list[tuple[float, float]]:
        """(time, running increase) of the points of the last `seconds`: differences between two
        are the counter's increase between them, resets included."""
        series = self._series.get(key)
        if series is None or not series.times:
            return []
        first = series.first_within(seconds)
        return list(zip(series.times[first:], series.totals[first:]))
