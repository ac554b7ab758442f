"""Bottleneck diagnosis: the framework top to bottom, one row per stage, as the runbooks walk it.

Each row holds the stage's score from the exporter's diagnosis (line at `enter_score`, where the
stage turns active) and the evidence that proves or rules the stage out, with the diagnosis' own
lines drawn on it; each stage declares its row in its record (exporter/stages/<id>.py). Above the
rows, the primary stage of every engine over time and the stages active now. The first row scores
the path before the engine per gateway and splits its latency by window means: client network,
gateway, hop, engine.

Every panel of a stage's row links to the runbook of the stage's alert; the scores and the
primary-stage timeline link each engine's series to its exporter's /diagnosis and to the engine on
*Engine detail*. Without a gateway in the
deployed exporter configuration (`gateways:`, which `generate` reads as it reads the diagnosis
lines and SLOs), the ingress row is folded and says how to add one: its panels would stay empty.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, alert_runbook_links, slug, summary
from exporter.monitoring.dashboards.cluster_overview import active_bottlenecks_table
from exporter.monitoring.dashboards.engine_detail import UID as ENGINE_DETAIL
from exporter.monitoring.dashboards.queries import Scope, stage_mappings
from exporter.stages import of, stages
from exporter.stages.panels import Link, PanelDef, Query, Unit, prose, state_timeline, text, timeseries, value_mappings
from exporter.stages.path import PATH
from exporter.stages.record import Stage

UID = "llm-bottleneck-diagnosis"
TITLE = "LLM serving / Bottleneck diagnosis"
VARIABLES = ("datasource", "cluster", "namespace", "node", "model", "engine")


def reading_guide(rows: list[Stage]) -> str:
    walk = " → ".join(stage.row.walk_name for stage in rows if stage.row is not None)
    return prose(
        f"Walk it top to bottom, as every runbook does: **{walk}**. Each row starts with the stage's score (0-1) "
        "from the exporter's diagnosis — the dashed line is `diagnosis.enter_score`, where the stage turns active "
        "and its alert can fire — and continues with the evidence that proves or rules the stage out, with the "
        "same lines the diagnosis uses. Decide from several signals together, never from GPU utilization alone: "
        "in the seed case SM active was 45 % while DRAM active was 95 % — decode was memory-bandwidth-bound, not "
        "idle."
    )


def score(s: Scope, stage: Stage, width: int) -> PanelDef:
    return timeseries(
        f"Score: {stage.title}",
        Query(s.stage_score(stage.id), "{{engine}}"),
        unit=Unit.SCORE,
        min=0,
        max=1,
        lines=s.score_lines(),
        width=width,
        key=f"score-{stage.id}",
        description=f"The exporter's {stage.id} score per engine: "
        "active from enter_score until it falls below exit_score.",
    )


def series_links(config: MonitoringConfig) -> tuple[Link, ...]:
    """From an engine's series: its exporter's /diagnosis, and the engine on *Engine detail* (the
    time range and data source carried over)."""
    return (
        Link("/diagnosis of this node's exporter", config.diagnosis_link(), per_series=True),
        Link(
            "Engine detail: ${__field.labels.engine}",
            f"/d/{ENGINE_DETAIL}?var-engine=${{__field.labels.engine}}&${{__url_time_range}}"
            "&${datasource:queryparam}",
            per_series=True,
        ),
    )


def runbook_links(config: MonitoringConfig, stage: Stage[Any]) -> tuple[Link, ...]:
    """The runbooks of the stage's alerts, and of the stages its row covers (those of its scope
    without a row of their own)."""
    covered = [stage, *(s for s in of(stage.scope) if s.row is None and s is not stage)]
    return alert_runbook_links(config, *(a.name for s in covered for a in s.alerts))


def no_gateway_guide() -> str:
    return prose(
        "**No gateway is configured**, so the panels of this row would stay empty. The stages before the "
        "engine are scored per gateway: add the gateway in front of the engines to the exporter "
        "configuration's `gateways:` (its metrics URL and its type, one of the gateway types in docs/metrics.md; "
        "docs/configuration.md), and `probes:` through it for the client network, then "
        "regenerate the dashboards (`generate --exporter-config FILE`) to unfold this row."
    )


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    rows = [stage for stage in stages() if stage.row is not None]
    to_diagnosis = series_links(config)
    b.top(
        text("How to read this dashboard", reading_guide(rows), width=24, height=4, key="how-to-read"),
        state_timeline(
            "Primary bottleneck per engine",
            Query(s.primary_stage_code(), "{{engine}}"),
            mappings=value_mappings(stage_mappings()),
            width=16,
            height=9,
            description="The stage the exporter ranks first for each engine (none when no stage is active).",
            links=to_diagnosis,
        ),
        replace(active_bottlenecks_table(s, "Active stages", width=8, height=9), links=to_diagnosis),
    )
    for number, stage in enumerate(rows, start=1):
        assert stage.row is not None
        opening = () if stage.row.score_width is None else (score(s, stage, stage.row.score_width),)
        title = f"{number} · {stage.row.title}"
        idle = stage.scope is PATH and not config.gateways
        guide = (text("No gateway configured", no_gateway_guide(), width=24, height=3, key="no-gateway"),)
        runbooks = runbook_links(config, stage)
        panels = [
            replace(p, links=(*p.links, *runbooks, *(to_diagnosis if p.key.startswith("score-") else ())))
            for p in (*(guide if idle else ()), *opening, *stage.row.panels(s))
        ]
        b.row(
            f"{title} (no gateway configured)" if idle else title,
            *panels,
            key=f"row-{slug(title)}",
            collapsed=idle,
        )
    return b
