"""An engine's (or a gateway's) slices folded to the target's bound, with windows over each kept slice.

The mapping reads every slice the engine's series carry (exporter/sources/engines/slices.py); here
each dimension keeps `max_slices_per_dimension` values (exporter/slicing.py), the rest are added
into `other`, and each kept slice's histograms get a window like the engine's own, for the SLOs
(exporter/slo/slices.py). Activity, which decides who keeps a slice, is a slice's requests since
the engine started (its histograms' counts) plus its queue now: slow to change, so the set of
slices is stable, and a new tenant that outgrows a kept one twice over takes its place. When the
set of a dimension changes, that dimension's windows start afresh: `other` then holds different
values, and its counts before and after cannot be subtracted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from exporter.model import Histogram, Labels, Sample, SliceHistograms, SliceKey
from exporter.settings import ScrapeLimits
from exporter.slicing import OTHER, Fold, add_histograms, fold
from exporter.window import DeltaWindow, histogram_vector, observed, window_histogram

SliceWindows = dict[str, list[tuple[SliceKey, SliceHistograms]]]


class SliceFolder:
    """One target's slices: the values each model's dimensions keep, and their windows."""

    def __init__(self, window_seconds: float, lifetime_baseline: bool = False) -> None:
        self._window_seconds = window_seconds
        self._lifetime_baseline = lifetime_baseline
        self._kept: dict[tuple[str, str], tuple[str, ...]] = {}
        self._windows: dict[tuple[str, SliceKey, str], DeltaWindow] = {}

    def render(
        self,
        now: float,
        reading: Sliced,
        labels: Labels,
        limits: ScrapeLimits,
        model: str = "",
        prefix: str = "llm_engine",
    ) -> tuple[list[Sample], SliceWindows]:
        """The slice gauges of one model (an engine's; a gateway's is "") and, per histogram key,
        its slices' histograms; `prefix` names the families (`llm_engine`, `llm_gateway`)."""
        samples: list[Sample] = []
        windows: SliceWindows = {}
        for dimension in sorted({d for d, _ in _keys(reading)}):
            values = {v for d, v in _keys(reading) if d == dimension}
            activity = {v: _activity(reading, (dimension, v)) for v in values}
            folding = fold(activity, limits.max_slices_per_dimension, self._kept.get((model, dimension), ()))
            if self._kept.get((model, dimension)) != folding.kept:
                self._kept[(model, dimension)] = folding.kept
                self._forget(model, dimension)
            samples.append(
                Sample(f"{prefix}_slices_folded", {**labels, "slice_by": dimension}, float(len(folding.folded)))
            )
            for target in (*folding.kept, *([OTHER] if folding.folded else [])):
                key = (dimension, target)
                slice_labels = {**labels, "slice_by": dimension, "slice": target}
                for field, family in (
                    ("slice_running", "llm_engine_slice_requests_running"),
                    ("slice_waiting", "llm_engine_slice_requests_waiting"),
                ):
                    value = _folded_value(getattr(reading, field), dimension, target, folding)
                    if value is not None:
                        samples.append(Sample(family, slice_labels, value))
                for hist_key, histogram in _folded_histograms(reading, dimension, target, folding):
                    windows.setdefault(hist_key, []).append((key, self._windowed(now, model, key, hist_key, histogram)))
        return samples, windows

    def forget_models(self, models: set[str]) -> None:
        for key in [k for k in self._kept if k[0] not in models]:
            del self._kept[key]
        for wkey in [k for k in self._windows if k[0] not in models]:
            del self._windows[wkey]

    def _forget(self, model: str, dimension: str) -> None:
        for key in [k for k in self._windows if k[0] == model and k[1][0] == dimension]:
            del self._windows[key]

    def _windowed(self, now: float, model: str, key: SliceKey, hist_key: str, histogram: Histogram) -> SliceHistograms:
        window = observed(
            self._windows,
            (model, key, hist_key),
            self._window_seconds,
            self._lifetime_baseline,
            now,
            histogram_vector(histogram),
            histogram.bounds,
        )
        totals = window_histogram(window)
        windowed = None if totals is None else Histogram(histogram.bounds, totals[0], totals[1], totals[2])
        return SliceHistograms(histogram, windowed, window.span())


class Sliced(Protocol):
    """What a reading carries of its slices (EngineReading, GatewayReading)."""

    slice_running: dict[SliceKey, float]
    slice_waiting: dict[SliceKey, float]
    slice_histograms: dict[SliceKey, dict[str, Histogram]]


def _keys(reading: Sliced) -> set[SliceKey]:
    return set(reading.slice_running) | set(reading.slice_waiting) | set(reading.slice_histograms)


def _activity(reading: Sliced, key: SliceKey) -> float:
    histograms = reading.slice_histograms.get(key, {})
    requests = max((h.count for k, h in histograms.items() if k != "inter_token_latency"), default=0.0)
    return requests + reading.slice_running.get(key, 0.0) + reading.slice_waiting.get(key, 0.0)


def _folded_value(values: dict[SliceKey, float], dimension: str, target: str, folding: Fold) -> float | None:
    found = [v for (d, value), v in values.items() if d == dimension and folding.target(value) == target]
    return sum(found) if found else None


def _folded_histograms(reading: Sliced, dimension: str, target: str, folding: Fold) -> Iterator[tuple[str, Histogram]]:
    merged: dict[str, Histogram | None] = {}
    for (d, value), histograms in sorted(reading.slice_histograms.items()):
        if d != dimension or folding.target(value) != target:
            continue
        for hist_key, histogram in histograms.items():
            if hist_key not in merged:
                merged[hist_key] = histogram
            elif merged[hist_key] is not None:
                merged[hist_key] = add_histograms(merged[hist_key], histogram)  # type: ignore[arg-type]
    for hist_key, found in sorted(merged.items()):
        if found is not None:
            yield hist_key, found
