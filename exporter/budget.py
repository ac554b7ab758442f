"""The output budget: how many series the exporter publishes, per engine target and per node.

`max_series` bounds what the exporter *reads* from a target; it says nothing of what comes out,
and one engine with 5,000 model names (each well under the input cap) turned into 115,000
exported series. So the output is bounded too, in whole units, never in parts of one: a model is
exported with all its series or not at all, since half a model's series would read as a model
whose latency or queue vanished.

- per target (`ScrapeLimits.max_models`, `ScrapeLimits.max_exported_series`): the engine source
  keeps the models it already exported first, then new ones by name, and renders only those;
- per node (`Config.max_exported_series`): `Exporter.publish` keeps node series (GPUs, RDMA,
  host) first, then every engine's `llm_engine_up`, then engine models round-robin across
  engines, so one target cannot spend the whole budget; series the caller ranks last (those
  made from request spans a client sent, exporter/slo/requests.py) come only after all of these,
  so what a client sends can never push an engine's own series out.

What is left out is counted, one per collection that left something out, in
`llm_exporter_source_errors_total{reason="cardinality"}`: under the engine's own source and target
for the per-target caps, under `source="exporter", target=""` for the node cap, and under
`source="otlp", target=""` where span-made series were left out. The exporter's own
`llm_exporter_*` self-observability series are outside the budget: they are what reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from exporter.model import Metric, QuantileSummary

log = logging.getLogger(__name__)

CARDINALITY = "cardinality"
#: the (source, target) the node-wide cap counts under, and where it left out span-made series
NODE_BUDGET_KEY = ("exporter", "")
SPANS_BUDGET_KEY = ("otlp", "")

T = TypeVar("T")


def series_count(metric: Metric) -> int:
    """Exposition lines of one metric: a summary is its quantiles plus `_count` and `_sum`."""
    return len(metric.quantiles) + 2 if isinstance(metric, QuantileSummary) else 1


def keep_known_first(items: Sequence[T], name: Callable[[T], str], known: Iterable[str], limit: int) -> list[T]:
    """At most `limit` items: those already exported last time first (so a newcomer never pushes
    out a model that was being watched), then the rest by name."""
    order = {item: index for index, item in enumerate(known)}
    ranked = sorted(items, key=lambda item: (order.get(name(item), len(order)), name(item)))
    return ranked[:limit]


def fit_units(units: Sequence[Sequence[Metric]], limit: int) -> tuple[list[Metric], int]:
    """Whole units, in order, while they fit in `limit` series; a unit that does not fit is left
    out and a later, smaller one may still fit. Returns the kept metrics and the series left out."""
    kept: list[Metric] = []
    left = limit
    dropped = 0
    for unit in units:
        size = sum(series_count(metric) for metric in unit)
        if size <= left:
            kept.extend(unit)
            left -= size
        else:
            dropped += size
    return kept, dropped


def group_by(metrics: Iterable[Metric], key: Callable[[Metric], Hashable]) -> list[list[Metric]]:
    """Metrics grouped by `key`, groups in order of first appearance."""
    groups: dict[Hashable, list[Metric]] = {}
    for metric in metrics:
        groups.setdefault(key(metric), []).append(metric)
    return list(groups.values())


def _is_engine_series(metric: Metric) -> bool:
    return metric.name.startswith(("llm_engine_", "llm_bottleneck_")) and "engine" in metric.labels


def round_robin(groups: Sequence[Sequence[T]]) -> list[T]:
    """First of every group, then second of every group, and so on."""
    out: list[T] = []
    for rank in range(max((len(group) for group in groups), default=0)):
        out.extend(group[rank] for group in groups if rank < len(group))
    return out


def node_units(metrics: Sequence[Metric]) -> list[list[Metric]]:
    """The node cap's units in priority order: each node series alone, then each engine's
    `llm_engine_up`, then each (engine, model)'s other series, round-robin across engines."""
    node = [[m] for m in metrics if not _is_engine_series(m)]
    ups = [[m] for m in metrics if _is_engine_series(m) and m.name == "llm_engine_up"]
    rest = [m for m in metrics if _is_engine_series(m) and m.name != "llm_engine_up"]
    per_model = group_by(rest, lambda m: (m.labels["engine"], m.labels.get("model", "")))
    per_engine: dict[str, list[list[Metric]]] = {}
    for unit in per_model:
        per_engine.setdefault(unit[0].labels["engine"], []).append(unit)
    return [*node, *ups, *round_robin(list(per_engine.values()))]


def _never(_metric: Metric) -> bool:
    return False


class SeriesBudget:
    """The node-wide cap, applied where a snapshot is published; keeps its counts across rounds
    (and across reloads, since the Exporter that holds it outlives its loops)."""

    def __init__(self) -> None:
        self.trimmed_rounds: dict[tuple[str, str], int] = {NODE_BUDGET_KEY: 0, SPANS_BUDGET_KEY: 0}
        self._last_dropped = 0

    def apply(
        self,
        metrics: Sequence[Metric],
        error_counts: Mapping[tuple[str, str, str], int],
        limit: int,
        last: Callable[[Metric], bool] = _never,
    ) -> tuple[list[Metric], dict[tuple[str, str, str], int]]:
        """The metrics within `limit` series, and the error counts with this cap's counts added.
        Metrics for which `last` holds are kept only in what the others leave of the budget."""
        total = sum(series_count(metric) for metric in metrics)
        dropped = 0
        kept: list[Metric] = list(metrics)
        if total > limit:
            first, later = [m for m in metrics if not last(m)], [m for m in metrics if last(m)]
            chosen, dropped_first = fit_units(node_units(first), limit)
            room = limit - sum(series_count(metric) for metric in chosen)
            per_model = group_by(later, lambda m: (m.labels.get("engine", ""), m.labels.get("model", "")))
            chosen_later, dropped_later = fit_units(per_model, room)
            ids = {id(metric) for metric in (*chosen, *chosen_later)}
            kept = [metric for metric in metrics if id(metric) in ids]  # exposition order unchanged
            for key, count in ((NODE_BUDGET_KEY, dropped_first), (SPANS_BUDGET_KEY, dropped_later)):
                self.trimmed_rounds[key] += count > 0
            dropped = dropped_first + dropped_later
        if dropped != self._last_dropped:
            log.warning(
                "output budget: %d of %d series left out (max_exported_series=%d); see reason=cardinality",
                dropped,
                total,
                limit,
            )
            self._last_dropped = dropped
        counts = dict(error_counts)
        for key, rounds in self.trimmed_rounds.items():
            if rounds:
                counted = (*key, CARDINALITY)
                counts[counted] = counts.get(counted, 0) + rounds
        return kept, counts


def cap_target(metrics: Sequence[Metric], limit: int) -> tuple[list[Metric], int]:
    """One engine target's rendered output within `limit` series, whole models at a time; the
    first model is always kept, so the target's `llm_engine_up` never disappears."""
    units = group_by(metrics, lambda metric: metric.labels.get("model", ""))
    if not units:
        return [], 0
    first = units[0]
    kept, dropped = fit_units(units[1:], limit - sum(series_count(metric) for metric in first))
    return [*first, *kept], dropped
