"""Latency histograms the exporter builds itself, from single observations (the prober's requests,
a gateway's access-log lines), on one fixed set of bucket edges.

The edges are 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5 and 8 in every decade from 1 ms to 800 s, so
the usual SLO thresholds (20 ms, 100 ms, 0.25, 0.5, 0.75, 1, 1.5, 2.5 s) and every edge of vLLM's
TTFT, inter-token and e2e histograms below 100 s are edges here too: attainment at a threshold on
an edge is exact (exporter/slo/attainment.py bounds it between the edges around it otherwise).
"""

from __future__ import annotations

import bisect
import math

from exporter.model import Histogram

_MANTISSAS = ("1", "1.25", "1.5", "2", "2.5", "3", "4", "5", "6", "7.5", "8")
#: seconds, ascending, +Inf last; decimal literals, so 0.04 here is the float a configured 0.04 is
OBSERVATION_BOUNDS: tuple[float, ...] = (
    *(float(f"{m}e{exponent}") for exponent in range(-3, 3) for m in _MANTISSAS),
    math.inf,
)


class Observations:
    """A cumulative histogram of single observations on OBSERVATION_BOUNDS; not thread-safe
    (its owner holds the lock its readers take)."""

    def __init__(self) -> None:
        self._counts = [0] * len(OBSERVATION_BOUNDS)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        if not seconds >= 0 or math.isinf(seconds):
            return  # a negative or NaN timing is no observation
        self._counts[bisect.bisect_left(OBSERVATION_BOUNDS, seconds)] += 1
        self.sum += seconds
        self.count += 1

    def histogram(self) -> Histogram:
        cumulative, running = [], 0
        for count in self._counts:
            running += count
            cumulative.append(float(running))
        return Histogram(OBSERVATION_BOUNDS, tuple(cumulative), self.sum, float(self.count))
