"""Bottleneck diagnosis: the framework top to bottom, one row per stage, as the runbooks walk it.

Each row holds the stage's score from the exporter's diagnosis (line at `enter_score`, where the
stage turns active) and the evidence that proves or rules the stage out, with the diagnosis' own
lines drawn on it; each stage declares its row in its record (exporter/stages/<id>.py). Above the
rows, the primary stage of every engine over time and the stages active now. The first row scores
the path before the engine per gateway and splits its latency by window means: client network,
gateway, hop, engine.
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.cluster_overview import active_bottlenecks_table
from exporter.monitoring.dashboards.queries import Scope, stage_mappings
from exporter.stages import stages
from exporter.stages.panels import PanelDef, Query, Unit, prose, state_timeline, text, timeseries, value_mappings
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


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    rows = [stage for stage in stages() if stage.row is not None]
    b.top(
        text("How to read this dashboard", reading_guide(rows), width=24, height=4, key="how-to-read"),
        state_timeline(
            "Primary bottleneck per engine",
            Query(s.primary_stage_code(), "{{engine}}"),
            mappings=value_mappings(stage_mappings()),
            width=16,
            height=9,
            description="The stage the exporter ranks first for each engine (none when no stage is active).",
        ),
        active_bottlenecks_table(s, "Active stages", width=8, height=9),
    )
    for number, stage in enumerate(rows, start=1):
        assert stage.row is not None
        opening = () if stage.row.score_width is None else (score(s, stage, stage.row.score_width),)
        b.row(f"{number} · {stage.row.title}", *opening, *stage.row.panels(s))
    return b
