"""SLOs: per configured SLO, attainment against its objective, error-budget burn against the
paging lines, goodput, and the capacity headroom left before the SLO breaks.

One row per SLO of the exporter's `slos:` (the same list the burn-rate alerts are generated
from). Attainment is the lower bound at the threshold's bucket edge (docs/slo.md); headroom is
an estimate with its confidence, the answer to "GPU utilization is low: can we add load?".
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.monitoring.promql import percent
from exporter.monitoring.slo_rules import FAST_BURN, SLOW_BURN, SloRecordNames
from exporter.settings import SloTarget
from exporter.stages.panels import RATIO, REQUESTS_PER_SECOND, SCORE, Line, Query, text, timeseries

UID = "llm-slo"
TITLE = "LLM serving / SLOs"
VARIABLES = ("datasource", "cluster", "model", "engine")


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


def _panels(s: Scope, slo: SloTarget) -> tuple:
    name = f'slo="{slo.name}"'
    cluster = f'{s.cluster}=~"$cluster"'
    model = 'model=~"$model"'
    engine_legend = "{{engine}} {{dimension}}"
    objective = (Line(slo.objective, "green", f"slos.{slo.name}.objective"),)
    burn_lines = tuple(Line(c.factor, "red" if c.factor > 5 else "orange") for c in FAST_BURN + SLOW_BURN[:1])
    requests = f"sum by ({s.cluster}, engine) ({s.rate('llm_engine_e2e_request_latency_seconds_count')})"
    return (
        timeseries(
            "Attainment per model",
            Query(
                f"{SloRecordNames.model_attainment(s.w)}{{{name}, {cluster}, {model}}}",
                "{{model}} {{dimension}}",
            ),
            unit=RATIO,
            max=1,
            lines=objective,
            description="Fraction of events within the threshold across the model's replicas (lower bound at the "
            "bucket edge; per token gap for itl). Below the line, the SLO is missed over this window.",
            key=f"{slo.name}-attainment",
        ),
        timeseries(
            "Error-budget burn rate",
            *(
                Query(f"{SloRecordNames.burn_rate(w)}{{{name}, {cluster}}}", f"{{{{dimension}}}} over {w}")
                for w in ("1h", "6h", "3d")
            ),
            unit=SCORE,
            min=0,
            lines=burn_lines,
            description="Error ratio over the error budget (1 - objective): 1 spends the budget exactly in 30 days. "
            "LLMSLOErrorBudgetBurnFast pages at 14.4 over 1h (and 5m) or 6 over 6h (and 30m).",
            key=f"{slo.name}-burn",
        ),
        timeseries(
            "Goodput per engine",
            Query(
                f"sum by ({s.cluster}, engine, dimension) ({s('llm_slo_goodput_requests_per_second', name)})",
                engine_legend,
            ),
            Query(requests, "{{engine}} all requests"),
            unit=REQUESTS_PER_SECOND,
            min=0,
            description="Requests per second within the threshold, beside all completed requests.",
            key=f"{slo.name}-goodput",
        ),
        timeseries(
            "Capacity under the SLO vs load",
            Query(f"max by ({s.cluster}, engine) ({s('llm_capacity_max_request_rate', name)})", "{{engine}} max"),
            Query(requests, "{{engine}} now"),
            unit=REQUESTS_PER_SECOND,
            min=0,
            description="The estimated largest request rate at which the engine still meets the SLO at today's "
            "request mix (exporter/slo/headroom.py), beside the rate it serves.",
            key=f"{slo.name}-capacity",
        ),
        timeseries(
            "Headroom",
            Query(f"min by ({s.cluster}, engine) ({s('llm_capacity_headroom_ratio', name)})", "{{engine}}"),
            Query(f"{SloRecordNames.model_headroom}{{{name}, {cluster}, {model}}}", "model {{model}}"),
            unit=RATIO,
            max=1,
            lines=(Line(0.0, "red"),),
            description="1 - load / capacity under the SLO, per engine and per model across replicas. Low GPU "
            "utilization with little headroom means added concurrency would break the SLO.",
            key=f"{slo.name}-headroom",
        ),
        timeseries(
            "Capacity estimate confidence",
            Query(f"min by ({s.cluster}, engine) ({s('llm_capacity_estimate_confidence_ratio', name)})", "{{engine}}"),
            unit=RATIO,
            min=0,
            max=1,
            description="0.3 on the model's prior alone; higher as the engine's own load history spans more of the "
            "range the estimate extrapolates over.",
            key=f"{slo.name}-confidence",
        ),
    )
