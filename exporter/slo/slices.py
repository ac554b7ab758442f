"""Attainment and goodput of each SLO per slice: tenant, LoRA adapter, priority class.

A source that carries a slice (exporter/slicing.py) attaches each slice's histogram to its summary
(`QuantileSummary.slices`, already folded to the target's bound, `other` included); here each
SLO dimension is judged per slice exactly as attainment.py judges the whole: the lower bound at the
bucket edge, goodput as attainment times the slice's completed-request rate. Refusals are not
apportioned: an engine's admission counter carries no tenant, so a slice's attainment is over its
served requests, and the engine's own figure is where refusals count (refusals.py).

Interface (called by the SLO monitor once per snapshot, beside `evaluate`):
`evaluate_slices(slos, metrics, families, covers, requests_family, measured_at)` → a list of
SliceAttainment for every summary of `families` (dimension → summary family: the engine's
DIMENSION_FAMILIES, or a gateway's, points.GATEWAY_FAMILIES) whose measuring point
`covers(slo, labels)` says the SLO applies to (`engine_point`; at a gateway the rule its whole
attainment is judged by, points.gateway_covers); `slice_samples(results)` → the `llm_slo_slice_*`
samples, labelled with the measuring point's labels, `measured_at`, `slo`, `dimension`,
`slice_by` and `slice`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from exporter.model import Metric, QuantileSummary, Sample, SliceHistograms, SliceKey
from exporter.settings import SloTarget
from exporter.slo.attainment import REQUESTS_FAMILY, WithinCount, lower_share, within
from exporter.slo.legs import judged_dimensions
from exporter.slo.selectors import covers

Covers = Callable[[SloTarget, Mapping[str, str]], bool]


def engine_point(slo: SloTarget, labels: Mapping[str, str]) -> bool:
    """An SLO applies to an engine's slices where it covers the engine and model."""
    return covers(slo, labels.get("engine", ""), labels.get("model", ""))


@dataclass(frozen=True)
class SliceAttainment:
    """One SLO dimension on one slice of one measuring point over the window."""

    slo: SloTarget
    dimension: str
    labels: dict[str, str]
    slice: SliceKey
    window: WithinCount | None
    requests_per_second: float
    measured_at: str = "engine"

    @property
    def attainment(self) -> float:
        return lower_share(self.window)

    @property
    def goodput(self) -> float:
        return self.attainment * self.requests_per_second


def _rate(histograms: SliceHistograms | None) -> float:
    if histograms is None or histograms.window is None or not histograms.window_seconds > 0:
        return math.nan
    return histograms.window.count / histograms.window_seconds


def evaluate_slices(
    slos: Sequence[SloTarget],
    metrics: Iterable[Metric],
    families: Mapping[str, str],
    covers: Covers,
    requests_family: str = REQUESTS_FAMILY,
    measured_at: str = "engine",
) -> list[SliceAttainment]:
    read = {*families.values(), requests_family}  # this measuring point's summaries only
    by_point: dict[tuple[tuple[str, str], ...], dict[str, QuantileSummary]] = {}
    for metric in metrics:
        if isinstance(metric, QuantileSummary) and metric.slices and metric.name in read:
            by_point.setdefault(tuple(sorted(metric.labels.items())), {})[metric.name] = metric
    results = []
    for point, summaries in by_point.items():
        labels = dict(point)
        judged = judged_dimensions(labels)  # a disaggregated request is judged once (legs.py)
        requests = dict(summaries[requests_family].slices) if requests_family in summaries else {}
        for slo in slos:
            if not covers(slo, labels):
                continue
            for dimension, threshold in slo.thresholds():
                summary = summaries.get(families.get(dimension, ""))
                if summary is None or dimension not in judged:
                    continue
                for key, histograms in summary.slices:
                    window = None if histograms.window is None else within(threshold, histograms.window)
                    rate = _rate(requests.get(key))
                    results.append(SliceAttainment(slo, dimension, labels, key, window, rate, measured_at))
    return results


def slice_samples(results: Iterable[SliceAttainment]) -> Iterator[Sample]:
    for item in results:
        labels = {
            **item.labels,
            "measured_at": item.measured_at,
            "slo": item.slo.name,
            "dimension": item.dimension,
            "slice_by": item.slice[0],
            "slice": item.slice[1],
        }
        if not math.isnan(item.attainment):
            yield Sample("llm_slo_slice_attainment_ratio", labels, item.attainment)
        if not math.isnan(item.goodput):
            yield Sample("llm_slo_slice_goodput_requests_per_second", labels, item.goodput)
