"""Each engine's inputs over time (History), with the window helpers the stages read.

Counters become rates here, reset-aware; latency quantiles are read over the stages' own window
(`level`). The inputs themselves are read from the normalized metrics by exporter/stages/inputs.py.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import fields
from statistics import fmean
from typing import Any

from exporter.health.finding import Finding
from exporter.stages.inputs import QUANTILE_OF, EngineInputs
from exporter.stages.pd_view import PdView
from exporter.window import histogram_quantile

#: the EngineInputs attributes that are numbers (or None): the columns History keeps
_NUMERIC = tuple(f.name for f in fields(EngineInputs) if f.type == "float | None")

#: the numeric attributes that are counters: their columns also keep a running increase
_COUNTERS = tuple(attr for attr in _NUMERIC if attr.endswith("_total"))


class History:
    """A bounded time series of one engine's inputs, with the window helpers stages use.

    The newest EngineInputs is kept whole (`latest`: its GPUs, settings, pools, ...); of the
    points before it only what a window reads is kept, in columns. Each numeric attribute is a
    column of (time, value) where it was present, arrays of doubles with a start offset (compacted
    now and then), so a window is a bisection and a slice in C, not a walk over every point. A
    point's lists and dicts, and a float object per number, would be a few hundred small objects
    per engine per round, kept for the baseline and freed all at once when the engine restarts:
    the interpreter's memory fragments around such waves, and a soaked exporter's RSS climbed with
    them. Counters keep a third column, the running increase (Prometheus-style across resets), so
    a rate is two lookups. Latency histograms are kept as columns too, each point's cumulative
    counts one array of doubles (the bounds shared while they stay the same); node-wide GPU ranges
    only for the points that carried them. Each helper's answer is remembered until the next
    point is added: the stages ask ~40 questions per engine per collection, half of them repeats,
    over windows up to the baseline's length (issue #23's per-target budget). Points are only ever
    added through `add`.
    """

    def __init__(self, horizon_seconds: float, max_points: int = 2048) -> None:
        self.horizon_seconds = horizon_seconds
        self.max_points = max_points
        #: the times of the points kept (the horizon's, at most `max_points`)
        self.times: array[float] = array("d")
        self._latest: EngineInputs | None = None
        self._times: dict[str, array[float]] = {attr: array("d") for attr in _NUMERIC}
        self._values: dict[str, array[float]] = {attr: array("d") for attr in _NUMERIC}
        #: per counter, the increase from its column's first entry to each entry
        self._increases: dict[str, array[float]] = {attr: array("d") for attr in _COUNTERS}
        #: per column, where its live entries start (the ones before are dropped, not yet removed)
        self._start: dict[str, int] = dict.fromkeys(_NUMERIC, 0)
        #: per latency histogram, (time, bounds, cumulative counts) of the points that carried it
        self._histograms: dict[str, deque[tuple[float, tuple[float, ...], array[float]]]] = {}
        #: (time, node-wide GPU ranges) of the points that carried any
        self._node_ranges: deque[tuple[float, dict[str, tuple[float, float]]]] = deque()
        self._answers: dict[tuple[Any, ...], Any] = {}
        #: the node's unattributed GPUs as last seen (a point whose GPU source missed the round
        #: has none, while the window's node-wide readings still count)
        self._unattributed: list[str] = []
        #: the models of the engine's GPUs as last read (a GPU's model outlives a missed round)
        self._gpu_models: list[str] = []
        #: the node's health findings this round (exporter/health/): evidence the stages quote
        #: where a finding of their topic explains them (`finding.lines_for`)
        self.findings: tuple[Finding, ...] = ()
        #: this engine's place in a disaggregated pair, worked out across engines each round by
        #: the diagnosis (exporter/diagnosis/pd.py); None for an engine of no pair
        self.pd: PdView | None = None

    def add(self, now: float, inputs: EngineInputs) -> None:
        """Keep `inputs` as the point at `now`: whole until the next one, in the columns after.
        Its histograms go into the columns at once; `latest()` has none (nothing reads a point's
        histograms but `_increase`, through the columns)."""
        histograms, inputs.histograms = inputs.histograms, {}
        for attr, histogram in histograms.items():
            kept = self._histograms.setdefault(attr, deque())
            bounds = histogram.bounds
            if kept and kept[-1][1] == bounds:
                bounds = kept[-1][1]
            kept.append((now, bounds, array("d", histogram.cumulative)))
        self.times.append(now)
        self._latest = inputs
        if inputs.node_gpu_range:
            self._node_ranges.append((now, inputs.node_gpu_range))
        if inputs.unattributed_gpus:
            self._unattributed = inputs.unattributed_gpus
        if inputs.gpu_models:
            self._gpu_models = inputs.gpu_models
        times = self.times
        gone = max(bisect_left(times, now - self.horizon_seconds), len(times) - self.max_points)
        if gone > 0:
            del times[:gone]
        oldest = times[0]  # what the horizon or max_points kept
        for kept in self._histograms.values():
            while kept and kept[0][0] < oldest:
                kept.popleft()
        while self._node_ranges and self._node_ranges[0][0] < oldest:
            self._node_ranges.popleft()
        increases = self._increases
        for attr in _NUMERIC:
            times, values = self._times[attr], self._values[attr]
            value = getattr(inputs, attr)
            if value is not None:
                if attr in increases:
                    column = increases[attr]
                    if values:
                        before = values[-1]
                        column.append(column[-1] + (value - before if value >= before else value))
                    else:
                        column.append(0.0)
                times.append(now)
                values.append(value)
            start = self._start[attr]
            if start < len(times) and times[start] < oldest:
                start = bisect_left(times, oldest, start)
                if start > 64 and start > len(times) // 2:  # compact: drop what no window reaches
                    del times[:start], values[:start]
                    if attr in increases:
                        del increases[attr][:start]
                    start = 0
                self._start[attr] = start
        self._answers.clear()

    def latest(self) -> EngineInputs:
        if self._latest is None:
            raise LookupError("no point added yet")
        return self._latest

    def gpu_models(self) -> list[str]:
        """The models of the engine's GPUs, from the latest point that read them: a round whose GPU
        source missed keeps the window's readings, so it keeps the peak they are a share of."""
        return self.latest().gpu_models or self._gpu_models

    def unattributed_gpus(self, seconds: float) -> list[str]:
        """The node's unattributed GPUs where any point of the last `seconds` read them: the
        window the stages' node-wide readings come from. The latest point alone would drop them
        (and the evidence saying so) for a round whose GPU source timed out on a busy host."""
        if self._node_ranges and self._node_ranges[-1][0] >= self.times[-1] - seconds:
            return self._unattributed
        return []

    def _first(self, attr: str, seconds: float) -> int:
        """The index of the first entry of `attr`'s column within the last `seconds`."""
        return bisect_left(self._times[attr], self.times[-1] - seconds, self._start[attr])

    def values(self, attr: str, seconds: float) -> Sequence[float]:
        """The readings of `attr` within the last `seconds`, oldest first."""
        key = ("values", attr, seconds)
        answers = self._answers
        if key in answers:
            return answers[key]
        found = self._values[attr][self._first(attr, seconds) :] if self.times else array("d")
        answers[key] = found
        return found

    def mean(self, attr: str, seconds: float) -> float | None:
        key = ("mean", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = fmean(values) if values else None
        return answers[key]

    def maximum(self, attr: str, seconds: float) -> float | None:
        key = ("maximum", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = max(values) if values else None
        return answers[key]

    def minimum(self, attr: str, seconds: float) -> float | None:
        key = ("minimum", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = min(values) if values else None
        return answers[key]

    def best_level(self, attr: str, seconds: float, span: float) -> float | None:
        """The lowest mean of `attr` over any `span` within the last `seconds`: an engine's best
        level, comparable with `level` over the same span. The lowest single reading is not: a
        reading is noisier than a span's mean (a window of a few tokens at the engine's start), so
        against it a steady engine would read slower than its best. None until the column reaches
        back a whole `span`."""
        key = ("best_level", attr, seconds, span)
        answers = self._answers
        if key in answers:
            return answers[key]
        found: float | None = None
        times, values = self._times[attr], self._values[attr]
        start = self._start[attr]
        if self.times and start < len(times):
            oldest = times[start]
            first = max(self._first(attr, seconds), bisect_left(times, oldest + span, start))
            if first < len(times):
                low = bisect_right(times, times[first] - span, start)
                total = sum(values[low:first])
                for i in range(first, len(times)):
                    total += values[i]
                    while times[low] <= times[i] - span:
                        total -= values[low]
                        low += 1
                    mean = total / (i - low + 1)
                    found = mean if found is None else min(found, mean)
        answers[key] = found
        return found

    def level(self, attr: str, seconds: float) -> float | None:
        """A latency quantile (`itl_p95`, `ttft_p95`, ...) over the last `seconds`: the lower of its
        quantile over that span, from the increase of the engine's cumulative histogram (None:
        nothing observed in it), and the mean of the exporter's windowed quantile. The windowed
        quantile spans the exporter's whole window, so its mean moved a minute and a half after the
        tokens did (in the seed case decode bandwidth stayed primary a minute after the remedies had
        cleared the queue); the span's own quantile moves with them, but one burst of slow tokens
        moves it too. The lower of the two leaves as the tokens recover and never arrives sooner or
        on less than before."""
        key = ("level", attr, seconds)
        answers = self._answers
        if key not in answers:
            windowed = self.mean(attr, seconds)
            span = self._increase(attr, seconds)
            if span is None:
                answers[key] = windowed
            else:
                value = histogram_quantile(QUANTILE_OF[attr], *span)
                answers[key] = None if math.isnan(value) else min(value, windowed or math.inf)
        return answers[key]

    def _increase(self, attr: str, seconds: float) -> tuple[tuple[float, ...], list[float]] | None:
        """(bounds, bucket increases) of histogram `attr` from the earliest point within the last
        `seconds` to the newest; None where fewer than two points carry it, or it was reset."""
        column = self._histograms.get(attr)
        if not self.times or not column or column[-1][0] != self.times[-1]:
            return None  # the newest point has none
        newest_at, bounds, last = column[-1]
        first = None
        for at, kept_bounds, cumulative in reversed(column):
            if at < newest_at - seconds:
                break
            if at < newest_at and kept_bounds == bounds:
                first = cumulative
        if first is None:
            return None
        increase = [after - before for after, before in zip(last, first)]
        return None if any(step < 0 for step in increase) else (bounds, increase)

    def node_range(self, attr: str, seconds: float) -> tuple[float, float] | None:
        """(mean of the lowest, mean of the highest) node-wide reading of GPU ratio `attr` over the
        last `seconds`: no unattributed GPU's own mean lies outside it. Remembered for the round
        like the other answers: every stage asks it of every engine."""
        key = ("node_range", attr, seconds)
        if key in self._answers:
            return self._answers[key]
        found: tuple[float, float] | None = None
        if self.times:
            start = self.times[-1] - seconds
            lows: list[float] = []
            highs: list[float] = []
            for t, ranges in reversed(self._node_ranges):
                if t < start:
                    break
                bounds = ranges.get(attr)
                if bounds is not None:
                    lows.append(bounds[0])
                    highs.append(bounds[1])
            found = (fmean(lows), fmean(highs)) if lows else None
        self._answers[key] = found
        return found

    def rate(self, attr: str, seconds: float) -> float | None:
        """Per-second increase of a counter over the last `seconds`, Prometheus-style on resets."""
        key = ("rate", attr, seconds)
        answers = self._answers
        if key in answers:
            return answers[key]
        found: float | None = None
        if self.times:
            times = self._times[attr]
            first, last = self._first(attr, seconds), len(times) - 1
            if last - first >= 1 and times[last] > times[first]:
                if attr in self._increases:
                    increases = self._increases[attr]
                    increase = increases[last] - increases[first]
                else:  # not a counter by its name: walked, as any series would be
                    values = self._values[attr]
                    increase = 0.0
                    for before, after in zip(values[first:last], values[first + 1 : last + 1]):
                        increase += after - before if after >= before else after
                found = increase / (times[last] - times[first])
        answers[key] = found
        return found

    def trend(self, attr: str, seconds: float) -> float | None:
        """Mean of the newest third minus mean of the oldest third of the window."""
        key = ("trend", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            if len(values) < 3:
                answers[key] = None
            else:
                third = max(1, len(values) // 3)
                answers[key] = fmean(values[-third:]) - fmean(values[:third])
        return answers[key]
