"""SLOs: per configured SLO, attainment against its objective, error-budget burn against the
paging lines, goodput, and the capacity headroom left before the SLO breaks.

One row per SLO of the exporter's `slos:` (the same list the burn-rate alerts are generated
from). Attainment is the lower bound at the threshold's bucket edge (docs/slo.md); headroom is
an estimate with its confidence, the answer to "GPU utilization is low: can we add load?".
"""

from __future__ import annotations

from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.monitoring.promql import percent
from exporter.monitoring.slo_rules import FAST_BURN, SLOW_BURN, SloRecordNames
from exporter.settings import SloTarget
from exporter.stages.panels import Line, PanelDef, Query, Unit, text, timeseries

UID = "llm-slo"
TITLE = "LLM serving / SLOs"
VARIABLES = ("datasource", "cluster", "model", "engine", "slice_by", "slice")


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    if not config.slos:
        b.top(
            text(
                "No SLOs configured",
                "Add `slos:` to the exporter configuration (docs/configuration.md#latency-slos) and "
                "regenerate: each SLO gets a row here and its burn-rate alerts.",
                width=24,
                height=4,
            )
        )
    for slo in config.slos:
        b.row(_title(slo), *_panels(s, slo), key=f"slo-{slo.name}")
    return b


def _title(slo: SloTarget) -> str:
    parts = [f"{d} ≤ {t:g}s" for d, t in slo.thresholds()]
    return f"SLO {slo.name}: {', '.join(parts)} for {percent(slo.objective)}"


def _panels(s: Scope, slo: SloTarget) -> tuple[PanelDef, ...]:
    name = f'slo="{slo.name}"'
    cluster = f'{s.cluster}=~"$cluster"'
    model = 'model=~"$model"'
    objective = (Line(slo.objective, "green", f"slos.{slo.name}.objective"),)
    burn_lines = tuple(Line(c.factor, "red" if c.factor > 5 else "orange") for c in FAST_BURN + SLOW_BURN[:1])
    requests = f"sum by ({s.cluster}, engine) ({s.rate('llm_engine_e2e_request_latency_seconds_count')})"

    def panel(key: str, title: str, *queries: Query, **options: Any) -> PanelDef:
        """One of this SLO's panels; its key is the SLO's."""
        return timeseries(title, *queries, key=f"{slo.name}-{key}", **options)

    def per_engine(op: str, family: str, legend: str = "{{engine}}", by: str = "engine") -> Query:
        return Query(f"{op} by ({s.cluster}, {by}) ({s(family, name)})", legend)

    def recorded(record: str, legend: str, *matchers: str) -> Query:
        return Query(f"{record}{{{', '.join((name, cluster, *matchers))}}}", legend)

    return (
        panel(
            "attainment",
            "Attainment per model",
            recorded(SloRecordNames.model_attainment(s.w), "{{model}} {{dimension}}", model),
            unit=Unit.RATIO,
            max=1,
            lines=objective,
            description="Fraction of events within the threshold across the model's replicas (lower bound at the "
            "bucket edge; per token gap for itl). Below the line, the SLO is missed over this window.",
        ),
        panel(
            "burn",
            "Error-budget burn rate",
            *(recorded(SloRecordNames.burn_rate(w), f"{{{{dimension}}}} over {w}") for w in ("1h", "6h", "3d")),
            unit=Unit.SCORE,
            min=0,
            lines=burn_lines,
            description="Error ratio over the error budget (1 - objective): 1 spends the budget exactly in 30 days. "
            "LLMSLOErrorBudgetBurnFast pages at 14.4 over 1h (and 5m) or 6 over 6h (and 30m).",
        ),
        panel(
            "goodput",
            "Goodput per engine",
            per_engine("sum", "llm_slo_goodput_requests_per_second", "{{engine}} {{dimension}}", "engine, dimension"),
            Query(requests, "{{engine}} all requests"),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="Requests per second within the threshold, beside all completed requests.",
        ),
        panel(
            "slice-attainment",
            "Attainment per slice",
            per_engine(
                "min",
                "llm_slo_slice_attainment_ratio",
                "{{slice_by}}={{slice}} {{dimension}}",
                "slice_by, slice, dimension",
            ),
            unit=Unit.RATIO,
            max=1,
            lines=objective,
            description="Per tenant, LoRA adapter and priority class where the sources label requests with one "
            "(docs/metrics.md, Slices), the lowest across engines and gateways; filter with the Slice variables. "
            'slice="other" holds the values past max_slices_per_dimension.',
            rare="an engine or gateway labels its requests with a tenant, adapter or priority class",
        ),
        panel(
            "slice-goodput",
            "Goodput and queue per slice",
            per_engine(
                "sum",
                "llm_slo_slice_goodput_requests_per_second",
                "{{slice_by}}={{slice}} {{dimension}} goodput",
                "slice_by, slice, dimension",
            ),
            Query(
                f"sum by ({s.cluster}, slice_by, slice) ({s('llm_engine_slice_requests_waiting')})",
                "{{slice_by}}={{slice}} waiting",
            ),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="Requests per second within the threshold per slice, beside the requests each slice has "
            "waiting where the engine reports its queue per slice (SGLang's priority classes).",
            rare="an engine or gateway labels its requests with a tenant, adapter or priority class",
        ),
        panel(
            "capacity",
            "Capacity under the SLO vs load",
            per_engine("max", "llm_capacity_max_request_rate", "{{engine}} max"),
            Query(requests, "{{engine}} now"),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="The estimated largest request rate at which the engine still meets the SLO at today's "
            "request mix (exporter/slo/headroom.py), beside the rate it serves.",
        ),
        panel(
            "headroom",
            "Headroom",
            per_engine("min", "llm_capacity_headroom_ratio"),
            recorded(SloRecordNames.model_headroom, "model {{model}}", model),
            unit=Unit.RATIO,
            max=1,
            lines=(Line(0.0, "red"),),
            description="1 - load / capacity under the SLO, per engine and per model across replicas. Low GPU "
            "utilization with little headroom means added concurrency would break the SLO.",
        ),
        panel(
            "confidence",
            "Capacity estimate confidence",
            per_engine("min", "llm_capacity_estimate_confidence_ratio"),
            unit=Unit.RATIO,
            min=0,
            max=1,
            description="0.3 on the model's prior alone; higher as the engine's own load history spans more of the "
            "range the estimate extrapolates over.",
        ),
    )
