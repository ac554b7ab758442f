"""Joint attainment, goodput and the request mix from per-request records (OTLP spans).

A request is good when it meets every threshold of the SLO at once, as vLLM's
`bench serve --goodput` counts it: ttft ≤ T_ttft, tpot = (e2e - ttft) / (n - 1) ≤ T_itl (0 for a
single token), e2e ≤ T_e2e. Attainment is good / all requests that finished in the window;
goodput is good requests per second of the window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from exporter.catalogue import QUANTILES
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import SloTarget
from exporter.slo.otlp import EngineKey, RequestRecord, RequestStore
from exporter.slo.selectors import covers


def is_good(slo: SloTarget, record: RequestRecord) -> bool:
    limits = dict(slo.thresholds())
    return (
        record.ttft <= limits.get("ttft", math.inf)
        and record.tpot <= limits.get("itl", math.inf)
        and record.e2e <= limits.get("e2e", math.inf)
    )


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest rank, as the benchmarks' percentiles of per-request values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


#: the families made from request spans: the output budget ranks them after every engine's own
#: series (exporter/budget.py), so spans can never push an engine's series out of /metrics
SPAN_FAMILIES = frozenset(
    {
        "llm_slo_joint_attainment_ratio",
        "llm_slo_joint_goodput_requests_per_second",
        "llm_request_prompt_tokens",
        "llm_request_generation_tokens",
    }
)


def from_spans(metric: Metric) -> bool:
    return metric.name in SPAN_FAMILIES


def request_samples(
    slos: Sequence[SloTarget], store: RequestStore, now: float, window_seconds: float
) -> Iterator[Metric]:
    """Per (engine, engine_type, model) the spans were admitted under (exporter/slo/otlp.py)."""
    groups: dict[EngineKey, list[RequestRecord]] = {}
    for record in store.since(now - window_seconds):
        groups.setdefault(record.key, []).append(record)
    for key, items in groups.items():
        engine, engine_type, model = key
        labels = {"engine": engine, "engine_type": engine_type, "model": model}
        for slo in slos:
            if not covers(slo, engine, model):
                continue
            good = sum(1 for r in items if is_good(slo, r))
            series = {**labels, "slo": slo.name}
            yield Sample("llm_slo_joint_attainment_ratio", series, good / len(items))
            yield Sample("llm_slo_joint_goodput_requests_per_second", series, good / window_seconds)
        totals = store.totals.get(key, [0.0, 0.0, 0.0])
        for name, values, total in (
            ("llm_request_prompt_tokens", [r.prompt_tokens for r in items], totals[1]),
            ("llm_request_generation_tokens", [r.completion_tokens for r in items], totals[2]),
        ):
            quantiles = tuple((q, float(_quantile(values, q))) for q in QUANTILES)
            yield QuantileSummary(name, labels, quantiles, totals[0], total)
    yield from receiver_samples(store.counts.items())


def receiver_samples(counts: Iterable[tuple[str, int]]) -> Iterator[Metric]:
    for key, value in counts:
        kind, _, result = key.partition("_")
        family = "llm_otlp_spans_total" if kind == "span" else "llm_otlp_payloads_total"
        yield Sample(family, {"result": result}, float(value))
