"""An engine's series cut into slices (tenant, adapter, priority class: exporter/slicing.py).

A slice is read with the engine's own rules: tensor-parallel copies count once, data-parallel ranks
add up, a histogram needs its +Inf bucket. Only the series a slice label names go into a slice; the
totals are the mapping's as before, so slicing never changes an unsliced figure. Which values keep
their own slice and which fold into `other` is the engine source's call (it knows the windows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exporter.model import EngineReading, SliceKey
from exporter.promtext import LabelKey, ParsedSamples
from exporter.settings import ScrapeLimits
from exporter.slicing import slice_of
from exporter.sources.engines.common import DeclarativeMapping, first_present, read_histograms, reduce_by_model

#: the latency histograms a slice keeps: the ones an SLO judges (exporter/slo/attainment.py)
SLICED_HISTOGRAMS = ("time_to_first_token", "inter_token_latency", "e2e_request_latency")


def partition(series: Mapping[LabelKey, float], limits: ScrapeLimits) -> dict[SliceKey, dict[LabelKey, float]]:
    """The series of each slice; a series with labels of two dimensions is in a slice of each."""
    parts: dict[SliceKey, dict[LabelKey, float]] = {}
    for key, value in series.items():
        for slice_key in slice_of(dict(key), limits):
            parts.setdefault(slice_key, {})[key] = value
    return parts


def sliced_series(parsed: ParsedSamples, base: str, limits: ScrapeLimits) -> dict[SliceKey, ParsedSamples]:
    """A histogram's series (`base` + _bucket, _sum, _count) of each slice, as a parse of their own."""
    parts = {suffix: partition(parsed.get(base + suffix, {}), limits) for suffix in ("_bucket", "_sum", "_count")}
    return {
        slice_key: {
            base + "_bucket": buckets,
            base + "_sum": parts["_sum"].get(slice_key, {}),
            base + "_count": parts["_count"].get(slice_key, {}),
        }
        for slice_key, buckets in parts["_bucket"].items()
    }


def read_engine_slices(
    mapping: DeclarativeMapping,
    parsed: ParsedSamples,
    limits: ScrapeLimits,
    readings: Sequence[EngineReading],
    queue_counts: Mapping[str, Sequence[str]],
) -> None:
    """Fill `slice_running`, `slice_waiting` and `slice_histograms` of each model's reading from
    the slice-labelled series of the queue gauges (`queue_counts`: reading field → wire names) and
    of the mapping's latency histograms."""
    if limits.max_slices_per_dimension <= 0 or not readings:
        return
    by_model = {reading.model: reading for reading in readings}
    duplicates = mapping.duplicate_labels
    for field, names in queue_counts.items():
        target = "slice_running" if field == "requests_running" else "slice_waiting"
        for slice_key, part in partition(first_present(parsed, names), limits).items():
            for model, value in reduce_by_model(part, "sum", duplicates).items():
                if model in by_model:
                    getattr(by_model[model], target)[slice_key] = value
    for signal in mapping.histograms:
        if signal.key not in SLICED_HISTOGRAMS:
            continue
        base = next((name for name in signal.names if parsed.get(name + "_bucket")), None)
        if base is None:
            continue
        for slice_key, sliced in sliced_series(parsed, base, limits).items():
            for model, histogram in read_histograms(sliced, (base,), signal.scale, duplicates).items():
                if model in by_model:
                    by_model[model].slice_histograms.setdefault(slice_key, {})[signal.key] = histogram
