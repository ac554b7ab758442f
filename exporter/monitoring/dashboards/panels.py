"""Panel factories: every panel of every dashboard is one call here, so they all look alike.

A factory returns a `PanelDef` — what the panel shows (queries, unit, the lines it draws) and how
big it is — and `board.Board` places it and turns it into a grafanalib panel with a stable id.
The hygiene of the research notes is applied once, here: datasource references on panel and
target, `intervalFactor` 1, no forced `maxDataPoints`, Stat panels reduce with `lastNotNull`,
heatmaps of pre-bucketed data say `calculate: false`.

Threshold lines are `Line`s built from the monitoring configuration by the dashboards, so the
line on a graph is the value an alert or the diagnosis compares against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import attr
from grafanalib.core import GridPos, Panel, RowPanel, Stat, StateTimeline, Table, Target, Text, TimeSeries

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Grafana unit ids; custom units are "suffix:<text>".
SECONDS = "s"
RATIO = "percentunit"
BYTES = "bytes"
BYTES_PER_SECOND = "Bps"
REQUESTS_PER_SECOND = "reqps"
PACKETS_PER_SECOND = "pps"
WATTS = "watt"
HERTZ = "hertz"
CELSIUS = "celsius"
COUNT = "short"
PER_SECOND = "suffix:/s"
TOKENS_PER_SECOND = "suffix: tok/s"
CPU_CORES = "suffix: cores"
# Scores (0-1) and state codes are dimensionless; "none" is the explicit choice.
SCORE = "none"
STATE = "none"

KINDS = ("timeseries", "stat", "heatmap", "table", "state-timeline", "text")


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Line:
    """A threshold drawn on the panel: from `value` up the panel turns `color`."""

    value: float
    color: str = "red"
    # Where the value comes from (`diagnosis.kv_usage_warning`), for the README and descriptions.
    source: str = ""


@dataclass(frozen=True)
class PanelDef:
    kind: str
    title: str
    queries: tuple[Query, ...]
    unit: str
    description: str = ""
    lines: tuple[Line, ...] = ()
    width: int = 8
    height: int = 8
    # Stable identity: the panel id and the README anchor derive from it, not from the position.
    key: str = ""
    # Set when the panel is empty unless something rare happens (an XID error): says what.
    rare: str = ""
    min: float | None = None
    max: float | None = None
    mappings: tuple[dict[str, Any], ...] = ()
    stack: bool = False
    instant: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown panel kind {self.kind!r}")
        if self.kind != "text" and not (self.queries and self.unit):
            raise ValueError(f"panel {self.title!r} needs queries and a unit")


def _def(kind: str, title: str, queries: tuple[Query | str, ...], unit: str, **options: Any) -> PanelDef:
    resolved = tuple(q if isinstance(q, Query) else Query(q) for q in queries)
    return PanelDef(kind, title, resolved, unit, **options)


def timeseries(title: str, *queries: Query | str, unit: str, **options: Any) -> PanelDef:
    return _def("timeseries", title, queries, unit, **options)


def stat(title: str, *queries: Query | str, unit: str, **options: Any) -> PanelDef:
    return _def("stat", title, queries, unit, **{"width": 4, "height": 4, **options})


def heatmap(title: str, *queries: Query | str, unit: str, **options: Any) -> PanelDef:
    return _def("heatmap", title, queries, unit, **options)


def table(title: str, *queries: Query | str, unit: str, **options: Any) -> PanelDef:
    return _def("table", title, queries, unit, **{"instant": True, **options})


def state_timeline(title: str, *queries: Query | str, unit: str = STATE, **options: Any) -> PanelDef:
    return _def("state-timeline", title, queries, unit, **options)


def text(title: str, content: str, **options: Any) -> PanelDef:
    return PanelDef("text", title, (), "", description=content, **options)


def value_mappings(states: dict[int, tuple[str, str]]) -> tuple[dict[str, Any], ...]:
    """{0: ("none", "green"), ...} as one Grafana value mapping."""
    options = {
        str(value): {"text": text_, "color": color, "index": index}
        for index, (value, (text_, color)) in enumerate(sorted(states.items()))
    }
    return ({"type": "value", "options": options},)


def _thresholds(lines: tuple[Line, ...], base: str = "green") -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"color": base, "value": None}]
    steps += [{"color": line.color, "value": line.value} for line in sorted(lines, key=lambda line: line.value)]
    return steps


def _targets(panel: PanelDef, heatmap_buckets: bool = False) -> list[Target]:
    refs = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    fmt = "heatmap" if heatmap_buckets else "table" if panel.kind == "table" else "time_series"
    return [
        Target(
            expr=q.expr,
            legendFormat=q.legend,
            refId=refs[i],
            intervalFactor=1,
            datasource=DATASOURCE,
            instant=panel.instant,
            format=fmt,
        )
        for i, q in enumerate(panel.queries)
    ]


def _description(panel: PanelDef) -> str:
    parts = [panel.description.strip()] if panel.description.strip() else []
    for line in panel.lines:
        if line.source:
            parts.append(f"Line at {line.value:g}: `{line.source}` of the monitoring configuration.")
    if panel.rare:
        parts.append(f"Empty unless {panel.rare}.")
    return " ".join(parts)


def _min_max(panel: PanelDef) -> dict[str, Any]:
    return {k: v for k, v in (("min", panel.min), ("max", panel.max)) if v is not None}


@attr.s
class HeatmapPanel(Panel):
    """Grafana's current heatmap (9.1+); grafanalib 0.7.1 only emits the legacy one. `calculate`
    is false: the data is already bucketed (`format: heatmap` of `le` series, or one row per
    series such as one per node)."""

    unit = attr.ib(default="")
    yAxisUnit = attr.ib(default="")
    bucketData = attr.ib(default=True)

    def to_json_data(self) -> dict[str, Any]:
        return self.panel_json(
            {
                "type": "heatmap",
                "fieldConfig": {
                    "defaults": {
                        "unit": self.unit,
                        "custom": {
                            "hideFrom": {"legend": False, "tooltip": False, "viz": False},
                            "scaleDistribution": {"type": "linear"},
                        },
                    },
                    "overrides": [],
                },
                "options": {
                    "calculate": False,
                    "cellGap": 1,
                    "color": {
                        "mode": "scheme",
                        "scheme": "Oranges",
                        "fill": "dark-orange",
                        "scale": "exponential",
                        "exponent": 0.5,
                        "steps": 64,
                        "reverse": False,
                    },
                    "exemplars": {"color": "rgba(255,0,255,0.7)"},
                    "filterValues": {"le": 1e-09},
                    "legend": {"show": True},
                    "rowsFrame": {"layout": "le" if self.bucketData else "unknown"},
                    "tooltip": {"mode": "single", "yHistogram": self.bucketData, "showColorScale": True},
                    "yAxis": {"axisPlacement": "left", "reverse": False, "unit": self.yAxisUnit},
                    "cellValues": {"unit": self.unit},
                },
            }
        )


def render(panel: PanelDef, panel_id: int, grid: GridPos) -> Panel:
    """The grafanalib panel for a definition placed at `grid` with id `panel_id`."""
    common: dict[str, Any] = dict(
        title=panel.title,
        id=panel_id,
        gridPos=grid,
        dataSource=DATASOURCE,
        description=_description(panel),
        maxDataPoints=None,
    )
    if panel.kind == "text":
        return Text(
            title=panel.title,
            id=panel_id,
            gridPos=grid,
            content=panel.description,
            mode="markdown",
            maxDataPoints=None,
            dataSource=None,
            description="",
        )
    extra = dict(panel.extra)
    if panel.kind == "timeseries":
        defaults = {"unit": panel.unit, **_min_max(panel)}
        if panel.stack:
            defaults["custom"] = {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 20}
        return TimeSeries(
            targets=_targets(panel),
            unit=panel.unit,
            thresholds=_thresholds(panel.lines),
            thresholdsStyleMode="dashed" if panel.lines else "off",
            tooltipMode="multi",
            tooltipSort="desc",
            legendDisplayMode="table",
            legendPlacement="bottom",
            legendCalcs=["lastNotNull", "max"],
            extraJson=_merge({"fieldConfig": {"defaults": defaults}}, extra),
            **common,
        )
    if panel.kind == "stat":
        return Stat(
            targets=_targets(panel),
            format=panel.unit,
            reduceCalc="lastNotNull",
            thresholds=_thresholds(panel.lines),
            mappings=list(panel.mappings),
            colorMode="value",
            graphMode="area",
            noValue="0" if panel.rare else "no data",
            extraJson=_merge(
                {"fieldConfig": {"defaults": {"color": {"mode": "thresholds"}, **_min_max(panel)}}}, extra
            ),
            **common,
        )
    if panel.kind == "heatmap":
        buckets = any("le" in q.legend for q in panel.queries)
        return HeatmapPanel(
            targets=_targets(panel, heatmap_buckets=buckets),
            unit=panel.unit,
            yAxisUnit=panel.unit if buckets else "",
            bucketData=buckets,
            extraJson=extra or None,
            **common,
        )
    if panel.kind == "table":
        return Table(
            targets=_targets(panel),
            unit=panel.unit,
            thresholds=_thresholds(panel.lines),
            extraJson=_merge(
                {
                    "fieldConfig": {
                        "defaults": {"custom": {"cellOptions": {"type": "color-text"}}, "color": {"mode": "thresholds"}}
                    }
                },
                extra,
            ),
            **common,
        )
    return StateTimeline(
        targets=_targets(panel),
        mappings=list(panel.mappings),
        thresholds=_thresholds(panel.lines, base="red"),
        showValue="never",
        mergeValues=True,
        rowHeight=0.8,
        extraJson=_merge({"fieldConfig": {"defaults": {"unit": panel.unit, "color": {"mode": "thresholds"}}}}, extra),
        **common,
    )


def row(title: str, panel_id: int, y: int) -> RowPanel:
    return RowPanel(title=title, id=panel_id, gridPos=GridPos(h=1, w=24, x=0, y=y), collapsed=False, maxDataPoints=None)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = value
    return result
