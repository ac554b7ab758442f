"""Attainment and goodput of each SLO from the engines' own latency histograms.

A histogram only says how many observations fell at or below each bucket edge (`le`). For a
threshold T between two edges, the count within T is bounded: at least the count at the largest
edge ≤ T (every one of those met T), at most the count at the smallest edge ≥ T. The exporter
reports the lower bound as `llm_slo_attainment_ratio` (conservative: an SLO reported met is met)
and the upper one as `llm_slo_attainment_upper_bound_ratio`; they agree when T is an edge, so
choose thresholds on the engine's edges (vLLM TTFT: …0.5, 0.75, 1, 2.5…).

A request of a disaggregated model has a leg on a prefill and one on a decode worker, each counted
in its engine's histograms: it is judged once, on the decode worker, in the dimensions that worker
sees whole (exporter/slo/legs.py).

Each dimension is judged on its own histogram. Joint attainment — a request that met TTFT *and*
TPOT — cannot come from separate histograms (which requests were slow in one and fast in the
other is gone); it needs per-request data (exporter/slo/otlp.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.settings import SloTarget
from exporter.slo.legs import judged_dimensions
from exporter.slo.selectors import covers

#: the engine-histogram summary each SLO dimension is judged on
DIMENSION_FAMILIES = {
    "ttft": "llm_engine_time_to_first_token_seconds",
    # vLLM's inter-token histogram counts token gaps, not requests: this dimension's events are gaps.
    "itl": "llm_engine_inter_token_latency_seconds",
    "e2e": "llm_engine_e2e_request_latency_seconds",
}
REQUESTS_FAMILY = "llm_engine_e2e_request_latency_seconds"
#: where an attainment is measured, from the engine outwards: the engine's own histograms, the
#: gateway's (the client side of the engine, every request), the prober's (the client side of the
#: gateway, its own requests)
MEASURING_POINTS = ("engine", "gateway", "probe")
_EDGE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class WithinCount:
    """Observations within a threshold, bounded by the bucket edges around it."""

    lower: float  # at the largest edge ≤ threshold: certainly within
    upper: float  # at the smallest edge ≥ threshold: possibly within
    total: float


def lower_share(window: WithinCount | None) -> float:
    """The window's share of events certainly within the threshold (NaN with no events)."""
    if window is None or window.total <= 0:
        return math.nan
    return window.lower / window.total


def within(threshold: float, histogram: Histogram) -> WithinCount:
    lower = upper = 0.0
    for bound, count in zip(histogram.bounds, histogram.cumulative):
        if bound <= threshold * (1 + _EDGE_TOLERANCE):
            lower = count
        if bound >= threshold * (1 - _EDGE_TOLERANCE):
            upper = count
            break
    total = histogram.count if histogram.count > 0 else histogram.cumulative[-1]
    return WithinCount(lower, max(lower, upper), total)


@dataclass(frozen=True)
class DimensionAttainment:
    """One SLO dimension on one engine and model over the window."""

    slo: SloTarget
    dimension: str
    labels: dict[str, str]  # the measuring point's series labels (an engine's, a gateway's, a probe's)
    window: WithinCount | None  # None before the window has two scrapes
    lifetime: WithinCount
    requests_per_second: float  # completed requests over the window (NaN unknown)
    #: where the latency was measured (MEASURING_POINTS): the engine's own clock, or a clock
    #: nearer the client that also sees what happens before the engine (exporter/slo/points.py)
    measured_at: str = "engine"
    #: the span the window covers (NaN unknown), and the share of the window's arrivals refused at
    #: the door (exporter/slo/refusals.py), already counted in `window` for request dimensions
    window_seconds: float = math.nan
    refused_share: float = 0.0

    @property
    def attainment(self) -> float:
        return lower_share(self.window)

    @property
    def attainment_upper(self) -> float:
        if self.window is None or self.window.total <= 0:
            return math.nan
        return self.window.upper / self.window.total

    @property
    def goodput(self) -> float:
        """Requests per second within the threshold; for `itl` (events are token gaps) the
        fraction of gaps within it applied to the request rate, an estimate, less the share of
        arrivals refused (which a request dimension's attainment already counts as misses)."""
        if self.dimension == "itl":
            return self.attainment * self.requests_per_second * (1.0 - self.refused_share)
        return self.attainment * self.requests_per_second


def evaluate(slos: Sequence[SloTarget], metrics: Iterable[Metric]) -> list[DimensionAttainment]:
    summaries: dict[tuple[str, str], dict[str, QuantileSummary]] = {}
    for metric in metrics:
        if isinstance(metric, QuantileSummary) and metric.histogram is not None:
            key = (metric.labels.get("engine", ""), metric.labels.get("model", ""))
            summaries.setdefault(key, {})[metric.name] = metric
    result = []
    for (engine, model), families in summaries.items():
        judged = judged_dimensions(next(iter(families.values())).labels)
        dimension_families = {d: f for d, f in DIMENSION_FAMILIES.items() if d in judged}
        if not dimension_families:  # a prefill worker: its requests are counted on the decode side
            continue
        rate = request_rate(families.get(REQUESTS_FAMILY))
        for slo in slos:
            if not covers(slo, engine, model):
                continue
            result += judge(slo, families, dimension_families, rate, "engine")
    return result


def judge(
    slo: SloTarget,
    families: Mapping[str, QuantileSummary],
    dimension_families: Mapping[str, str],
    rate: float,
    measured_at: str,
) -> list[DimensionAttainment]:
    """Each dimension of `slo` that one measuring point has a histogram of."""
    out = []
    for dimension, threshold in slo.thresholds():
        summary = families.get(dimension_families.get(dimension, ""))
        if summary is None or summary.histogram is None:
            continue
        windowed = None if summary.window is None else within(threshold, summary.window)
        lifetime = within(threshold, summary.histogram)
        out.append(
            DimensionAttainment(
                slo, dimension, dict(summary.labels), windowed, lifetime, rate, measured_at, summary.window_seconds
            )
        )
    return out


def request_rate(summary: QuantileSummary | None) -> float:
    """Requests per second over a latency summary's window (NaN unknown)."""
    if summary is None or summary.window is None or not summary.window_seconds > 0:
        return math.nan
    return summary.window.count / summary.window_seconds


def attainment_samples(results: Iterable[DimensionAttainment], slos: Sequence[SloTarget]) -> Iterator[Metric]:
    """The `llm_slo_*` families: per SLO the objective and thresholds; per SLO, dimension, engine
    and model the window's attainment (both bounds) and goodput, and the cumulative event counts
    that the error-budget rules rate over their own windows."""
    for slo in slos:
        yield Sample("llm_slo_objective_ratio", {"slo": slo.name}, slo.objective)
        for dimension, threshold in slo.thresholds():
            yield Sample("llm_slo_threshold_seconds", {"slo": slo.name, "dimension": dimension}, threshold)
    for item in results:
        labels = {**item.labels, "slo": item.slo.name, "dimension": item.dimension, "measured_at": item.measured_at}
        yield Sample("llm_slo_events_total", labels, item.lifetime.total)
        yield Sample("llm_slo_good_events_total", labels, item.lifetime.lower)
        if not math.isnan(item.attainment):
            yield Sample("llm_slo_attainment_ratio", labels, item.attainment)
            yield Sample("llm_slo_attainment_upper_bound_ratio", labels, item.attainment_upper)
        if not math.isnan(item.goodput):
            yield Sample("llm_slo_goodput_requests_per_second", labels, item.goodput)
