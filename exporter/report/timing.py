"""When each figure is read: the data's scrape interval, the step, and every figure's look-back.

A figure's value at an instant looks back over some time before it: a `rate()` over its range,
the exporter's windowed quantiles and ratios over the exporter's own window (`window_seconds`), a
gauge over nothing. A value whose look-back reaches past its window's start mixes in what came
before (an incident's first minute read with a 5-minute rate is mostly the baseline), and one
whose look-back reaches past the start of the data Prometheus holds is extrapolated from part of
a range (a rate a fifth of the truth). So each figure is read only at instants whose look-back
lies inside its window and inside the data:

- the **scrape interval** is read from the data itself: the median spacing of the samples of
  `llm_engine_up` in each window (backfilled or federated data has no scrape configuration);
- the **step** (spacing of the per-interval values) is SCRAPES_PER_STEP scrape intervals, or
  coarser so that the longest window gives at most MAX_POINTS values: a target updates its
  counters on its own cadence (the exporter every few seconds), so one scrape interval holds one
  more or one fewer of its updates than the next, and a rate over one interval swings by that
  much (20 % with a 2-s exporter scraped every 5 s); over two the swing halves;
- the **rate range** is the step plus one scrape interval, so consecutive ranges share one
  sample and no increment: every value is the rate over its own interval (Grafana's
  `$__rate_interval` reasons the same way), independent of its neighbours as the test assumes;
- the exporter's **windowed** figures are read one exporter window apart, from one window after
  the start, so no two values overlap and none reaches back before the window.

Instants are anchored at the end of the window's data, `end, end - spacing, ...`, back to the
first one whose look-back fits. A window whose data cannot give MIN_VALUES rates is refused
with the shortest window that could.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from exporter.report.windows import Window

#: How a figure's value at an instant looks back: not at all (a gauge), over the rate range, over
#: the exporter's window (the prefix-cache hit ratio, host CPU, the diagnosis' verdicts), or, for a
#: latency quantile, over the rate range where Prometheus holds the engines' own histograms (the
#: recording rules' first choice) and over the exporter's window where it falls back to the
#: exporter's quantiles.
Reads = Literal["instant", "rate", "windowed", "quantile"]
#: Values of a figure in the longest window, at most (the step grows beyond it).
MAX_POINTS = 250
#: Scrape intervals per step, by default.
SCRAPES_PER_STEP = 2
#: Rate values a window must give: 3 against 5 or more can be significant (stats.judgeable).
MIN_VALUES = 3


class TooShort(ValueError):
    """A window whose data cannot be judged; the message names the shortest that could."""


@dataclass(frozen=True)
class Extent:
    """The data Prometheus holds in a window: its first and last `llm_engine_up` sample, and the
    median spacing of those samples (the scrape interval)."""

    first: float
    last: float
    interval: float


@dataclass(frozen=True)
class Plan:
    """The instants a figure is read at in one window: `first, first + spacing, ..., last`."""

    first: float
    last: float
    spacing: float

    @property
    def count(self) -> int:
        return round((self.last - self.first) / self.spacing) + 1


@dataclass(frozen=True)
class Timing:
    """Seconds: the data's scrape interval, the step, the range of every rate() and the exporter's
    `window_seconds`; `histograms`: Prometheus holds the engines' latency histograms (quantiles are
    then of bucket rates)."""

    scrape_interval: float
    step: float
    rate_range: float
    exporter_window: float
    histograms: bool = False

    def _kind(self, reads: Reads) -> Reads:
        if reads == "quantile":
            return "rate" if self.histograms else "windowed"
        return reads

    def lookback(self, reads: Reads) -> float:
        reads = self._kind(reads)
        if reads == "instant":
            return 0.0
        if reads == "rate":
            return self.rate_range
        return max(self.rate_range, self.exporter_window)

    def spacing(self, reads: Reads) -> float:
        """Values further apart than their look-back overlap no data with each other."""
        reads = self._kind(reads)
        if reads == "instant":
            return self.step
        if reads == "rate":
            return max(self.step, self.rate_range - self.scrape_interval)
        return max(self.step, self.exporter_window)

    @property
    def rate_interval(self) -> str:
        """The rate range as a PromQL duration."""
        return duration_text(self.rate_range)

    def plan(self, reads: Reads, window: Window, extent: Extent, spacing: float | None = None) -> Plan | None:
        """Where `reads` is read in `window` (None: its look-back fits nowhere in the data).

        The look-back must start at or after the window's start, and, for a rate, at or after the
        data's first sample (a rate over a range the series only partly covers is extrapolated
        from that part). The exporter's windowed figures cover what it saw before Prometheus's
        first sample too, which is the window's own when the window starts before the data.
        """
        spacing = spacing or self.spacing(reads)
        lookback = self.lookback(reads)
        from_data = self.rate_range if reads != "instant" else 0.0
        earliest = max(window.start + lookback, extent.first + from_data)
        last = min(window.end, extent.last)
        if last < earliest:
            return None
        count = math.floor((last - earliest) / spacing + 1e-9) + 1
        return Plan(last - (count - 1) * spacing, last, spacing)


def duration_text(seconds: float) -> str:
    """A PromQL duration: whole seconds as `15s`, else milliseconds."""
    return f"{seconds:.0f}s" if float(seconds).is_integer() else f"{round(seconds * 1000)}ms"


def choose(
    extents: Sequence[Extent],
    step: float | None = None,
    rate_range: float | None = None,
    exporter_window: float = 60.0,
    histograms: bool = False,
) -> Timing:
    """The timing for windows with these extents; a given step or rate range is kept as given."""
    scrape = max(e.interval for e in extents)
    longest = max(e.last - e.first for e in extents)
    if step is None:
        step = max(SCRAPES_PER_STEP * scrape, float(math.ceil(longest / MAX_POINTS)))
    rate_range = rate_range if rate_range is not None else step + scrape
    return Timing(scrape, step, rate_range, exporter_window, histograms)


def require_judgeable(timing: Timing, windows: Sequence[Window], extents: Sequence[Extent]) -> None:
    """TooShort for the first window whose data gives fewer than MIN_VALUES rates."""
    spacing = timing.spacing("rate")
    need = timing.rate_range + (MIN_VALUES - 1) * spacing
    for window, extent in zip(windows, extents):
        plan = timing.plan("rate", window, extent)
        if plan is None or plan.count < MIN_VALUES:
            held = max(0.0, min(window.end, extent.last) - max(window.start, extent.first))
            raise TooShort(
                f"--{window.name}: a window of {window.seconds:.0f} s (Prometheus holds data for {held:.0f} s "
                f"of it); the shortest window the report can judge holds {need:.0f} s of data "
                f"({timing.rate_range:g} s for the first rate "
                f"at the data's {timing.scrape_interval:g} s scrape interval, then {MIN_VALUES} values "
                f"{spacing:g} s apart): widen it"
                + (" or give a finer --step" if spacing > timing.scrape_interval else "")
            )


def extent_expr(up: str, window: Window) -> str:
    """One instant query, at the window's end, for its Extent: three series labelled `edge`.

    `timestamp()` inside a subquery gives, at each of its steps, the time of the latest raw sample,
    so the minimum and maximum over the subquery are the first and last samples whatever its
    resolution; samples at or before the start (the lookback's) are left out. Each series'
    spacing is its time span over its sample count less one; the median over series is the
    interval. Ranges stop a millisecond short of the start, where Prometheus 2 includes a sample
    at the range's very start and Prometheus 3 does not.
    """
    millis = max(1, round((window.end - window.start) * 1000) - 1)
    resolution = min(60, max(1, millis // 1_000_000))
    inside = f"(timestamp({up}) > {window.start:.3f})[{millis}ms:{resolution}s]"
    first, last = f"min_over_time({inside})", f"max_over_time({inside})"
    spacing = f"({last} - {first}) / ((count_over_time({up}[{millis}ms]) > 1) - 1)"
    edges = {"first": f"min({first})", "last": f"max({last})", "interval": f"quantile(0.5, {spacing})"}
    return " or ".join(f'label_replace({op}, "edge", "{edge}", "", "")' for edge, op in edges.items())


def extent_of(values: dict[str, float]) -> Extent | None:
    """The Extent from `extent_expr`'s answer (edge -> value); None where the window holds no data."""
    first, last, interval = (values.get(k) for k in ("first", "last", "interval"))
    if first is None or last is None or not (math.isfinite(first) and math.isfinite(last)):
        return None
    if interval is None or not math.isfinite(interval) or interval <= 0:
        return None  # one sample: nothing to take a rate of
    return Extent(first, last, interval)
