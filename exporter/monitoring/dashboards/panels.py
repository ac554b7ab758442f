"""Panels as grafanalib renders them: every panel of every dashboard goes through `render`, so
they all look alike.

A dashboard declares `PanelDef`s with the factories of exporter/stages/panels.py (what a panel
shows and how big it is) and `board.Board` places each and turns it into a grafanalib panel here,
with a stable id. The hygiene of the research notes is applied once, here: datasource references
on panel and target, `intervalFactor` 1, no forced `maxDataPoints`, Stat panels reduce with
`lastNotNull`, heatmaps of pre-bucketed data say `calculate: false`.
"""

from __future__ import annotations

from typing import Any

import attr
from grafanalib.core import GridPos, Panel, RowPanel, Stat, StateTimeline, Table, Target, Text, TimeSeries

from exporter.stages.panels import Line, Link, PanelDef

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


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


def _link(link: Link) -> dict[str, Any]:
    return {"title": link.title, "url": link.url, "targetBlank": True}


def render(panel: PanelDef, panel_id: int, grid: GridPos) -> Panel:
    """The grafanalib panel for a definition placed at `grid` with id `panel_id`."""
    links = [_link(link) for link in panel.links if not link.per_series]
    common: dict[str, Any] = dict(
        title=panel.title,
        id=panel_id,
        gridPos=grid,
        dataSource=DATASOURCE,
        description=_description(panel),
        maxDataPoints=None,
        links=links,
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
            links=links,
        )
    extra = dict(panel.extra)
    data_links = [_link(link) for link in panel.links if link.per_series]
    if data_links:  # per series: Grafana's data links, in the field defaults
        extra = _merge(extra, {"fieldConfig": {"defaults": {"links": data_links}}})
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


def row(title: str, panel_id: int, y: int, collapsed: tuple[Panel, ...] | None = None) -> RowPanel:
    """A row; `collapsed`: the row is folded, holding these panels (Grafana keeps a folded row's
    panels inside it)."""
    return RowPanel(
        title=title,
        id=panel_id,
        gridPos=GridPos(h=1, w=24, x=0, y=y),
        collapsed=collapsed is not None,
        panels=list(collapsed or ()),
        maxDataPoints=None,
    )


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = value
    return result
