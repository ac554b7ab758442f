"""What the diagnosis reads of an engine's role and KV hand-over (catalogue/disagg.py's families).

Cumulative sums and counts are kept as counters (`*_total`), so a window's mean is the increase of
one over the increase of the other, with no sampling of quantiles in between: the time to first
token's parts must add up, and means do where percentiles do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from exporter.model import Metric, QuantileSummary, Sample


@dataclass
class HandOverInputs:
    """An engine's role and hand-over in one collection (the part of EngineInputs they fill)."""

    #: its part of a disaggregated deployment ("unified", "prefill", "decode", "encode"), where that
    #: comes from (`llm_engine_role_info`), and its series' labels (pod, namespace, role)
    role: str = "unified"
    role_source: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    ttft_sum_total: float | None = None
    ttft_count_total: float | None = None
    queue_sum_total: float | None = None
    queue_count_total: float | None = None
    kv_transfer_sum_total: float | None = None
    kv_transfer_count_total: float | None = None
    kv_transfer_p95: float | None = None
    kv_bytes_total: float | None = None
    kv_failures_total: float | None = None
    kv_expired_total: float | None = None
    kv_pending_sender: float | None = None
    kv_pending_receiver: float | None = None
    #: the connector the transfer figures come from ("" where the engine does not name one)
    kv_connector: str = ""


#: summaries whose cumulative sum and count the hand-over's means need: (sum column, count column)
_SUMS = {
    "llm_engine_time_to_first_token_seconds": ("ttft_sum_total", "ttft_count_total"),
    "llm_engine_queue_time_seconds": ("queue_sum_total", "queue_count_total"),
    "llm_kv_transfer_seconds": ("kv_transfer_sum_total", "kv_transfer_count_total"),
}
_COUNTERS = {
    "llm_kv_transfer_bytes_total": "kv_bytes_total",
    "llm_kv_transfer_failures_total": "kv_failures_total",
    "llm_kv_transfer_expired_total": "kv_expired_total",
}
HAND_OVER_FAMILIES = frozenset({*_SUMS, *_COUNTERS, "llm_kv_transfer_pending_requests", "llm_engine_role_info"})


def absorb(inputs: HandOverInputs, metric: Metric) -> None:
    """Add one hand-over series to an engine's inputs (several connectors and kinds add up)."""
    name = metric.name
    if isinstance(metric, QuantileSummary):
        columns = _SUMS.get(name)
        if columns is None or math.isnan(metric.sum):
            return
        _add(inputs, columns[0], metric.sum)
        _add(inputs, columns[1], metric.count)
        if name == "llm_kv_transfer_seconds":
            inputs.kv_connector = metric.labels.get("connector", "")
            p95 = dict(metric.quantiles).get(0.95)
            if p95 is not None and not math.isnan(p95):
                inputs.kv_transfer_p95 = max(p95, inputs.kv_transfer_p95 or 0.0)
        return
    assert isinstance(metric, Sample)
    if name == "llm_engine_role_info":
        inputs.role = metric.labels.get("role", inputs.role)
        inputs.role_source = metric.labels.get("source", "")
    elif name == "llm_kv_transfer_pending_requests":
        side = metric.labels.get("side", "")
        _add(inputs, "kv_pending_sender" if side == "sender" else "kv_pending_receiver", metric.value)
    elif name in _COUNTERS:
        _add(inputs, _COUNTERS[name], metric.value)


def _add(inputs: HandOverInputs, column: str, value: float) -> None:
    before = getattr(inputs, column)
    setattr(inputs, column, value if before is None else before + value)
