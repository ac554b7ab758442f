"""The stage walk: the framework's stages in order, each with its score over every window, a
verdict, the evidence with numbers, and what it is not (each from the stage's record: the
figures that are its evidence, its misreadings).

The per-engine stages are the exporter's own verdicts as Prometheus stored them
(`llm_bottleneck_primary`, `llm_bottleneck_score`): the report does not diagnose again, it reads
how the running diagnosis judged each engine over the window. An engine's primary stage for a
window is the stage that was primary for the largest share of its steps there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from exporter.report.matrix import Row
from exporter.report.render_text import fmt_change, fmt_value
from exporter.stages import ENGINE, of

NONE = "none"
#: A stage leads a window when it was primary in at least this share of the engines' steps.
LEAD_SHARE = 0.25
#: A score change below this is noise: the diagnosis' own scores move this much between steps.
SCORE_CHANGE = 0.15


@dataclass(frozen=True)
class EngineStages:
    """One engine in one window: the share of steps each stage was primary, and mean scores."""

    primary_share: Mapping[str, float]
    scores: Mapping[str, float]
    steps: int

    @property
    def primary(self) -> str:
        if not self.primary_share:
            return NONE
        return max(self.primary_share, key=lambda s: (self.primary_share[s], s == NONE))


@dataclass(frozen=True)
class StageStep:
    stage: str
    scores: Mapping[str, float | None]  # window -> mean score over engines
    shares: Mapping[str, float | None]  # window -> share of engine-steps where it was primary
    verdict: str
    evidence: list[str] = field(default_factory=list)
    not_this: list[str] = field(default_factory=list)


def cluster_primary(engines: Mapping[str, EngineStages]) -> str:
    """The stage most engines had as their primary; `none` when no engine has data."""
    counts: dict[str, int] = {}
    for stages in engines.values():
        counts[stages.primary] = counts.get(stages.primary, 0) + 1
    return max(counts, key=lambda s: (counts[s], s != NONE)) if counts else NONE


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def verdict(
    base_share: float | None, incident_share: float | None, base_score: float | None, incident_score: float | None
) -> str:
    if incident_share is None or base_share is None:
        return "no data"
    if incident_share >= LEAD_SHARE > base_share:
        return "became the bottleneck"
    if base_share >= LEAD_SHARE > incident_share:
        return "eased"
    if base_score is not None and incident_score is not None:
        if incident_score - base_score >= SCORE_CHANGE:
            return "worsened"
        if base_score - incident_score >= SCORE_CHANGE:
            return "improved"
    return "unchanged"


def walk(
    stages: Mapping[str, Mapping[str, EngineStages]],  # window -> engine -> stages
    cluster_rows: Mapping[str, Row],  # figure key -> cluster-wide row (first cluster)
) -> list[StageStep]:
    steps = []
    readings = _Readings(cluster_rows)
    for stage in of(ENGINE):
        scores: dict[str, float | None] = {}
        shares: dict[str, float | None] = {}
        for window, engines in stages.items():
            scores[window] = _mean([e.scores[stage.id] for e in engines.values() if stage.id in e.scores])
            shares[window] = _mean([e.primary_share.get(stage.id, 0.0) for e in engines.values()]) if engines else None
        step = StageStep(
            stage.id,
            scores,
            shares,
            verdict(shares.get("baseline"), shares.get("incident"), scores.get("baseline"), scores.get("incident")),
        )
        figures = (*stage.figures, *(m.key for m in stage.measures))
        step.evidence.extend(change_line(cluster_rows[key]) for key in figures if key in cluster_rows)
        if stage.misreadings is not None:
            step.not_this.extend(stage.misreadings(readings, step.verdict in ("became the bottleneck", "worsened")))
        steps.append(step)
    return steps


def change_line(row: Row, window: str = "incident") -> str:
    base, other = row.value("baseline"), row.value(window)
    unit = row.figure.unit
    text = f"{row.figure.label} {fmt_value(base, unit)} → {fmt_value(other, unit)}"
    comparison = row.incident if window == "incident" else row.after
    if comparison is not None and comparison.absolute is not None:
        text += f" ({fmt_change(comparison.absolute, comparison.relative, unit)})"
    return text


class _Readings:
    """The cluster-wide rows as a stage's misreadings read them (exporter/stages/record.py)."""

    def __init__(self, rows: Mapping[str, Row]) -> None:
        self._rows = rows

    def value(self, key: str, window: str = "incident") -> float | None:
        row = self._rows.get(key)
        return row.value(window) if row is not None else None

    def ratio(self, key: str) -> float | None:
        base, incident = self.value(key, "baseline"), self.value(key)
        if base is None or incident is None or base <= 0:
            return None
        return incident / base
