"""Dashboard panel declarations: what a panel shows and how big it is, as plain data.

They sit below the monitoring layer so that a stage's record can declare its own dashboard row
(exporter/stages/record.py: `Row`); every dashboard builds its panels from the same factories, and
exporter/monitoring/dashboards/panels.py renders them with grafanalib (datasource references,
thresholds, units, the hygiene rules). Threshold lines are `Line`s built from the monitoring
configuration, so the line on a graph is the value an alert or the diagnosis compares against.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any


class Unit:
    """Grafana unit ids; custom units are "suffix:<text>". Scores (0-1) and state codes are
    dimensionless: "none" is the explicit choice."""

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
class Link:
    """A link a panel offers: a runbook, /diagnosis. `per_series`: a data link, opened from one
    series, whose URL may name that series' labels (`${__field.labels.<label>}`)."""

    title: str
    url: str
    per_series: bool = False


#: how a query that draws a line (its legend ends in " line") is styled: dashed, in its colour
LINE_LEGEND_SUFFIX = " line"


def line_series_style(colours: dict[str, str]) -> dict[str, Any]:
    """Field overrides that draw the series whose legend matches each regex of `colours` as a
    dashed line of that colour: lines that are queries (a model's own baseline, an SLO) and so
    cannot be fixed thresholds."""
    return {
        "fieldConfig": {
            "overrides": [
                {
                    "matcher": {"id": "byRegexp", "options": pattern},
                    "properties": [
                        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                        {"id": "custom.fillOpacity", "value": 0},
                        {"id": "color", "value": {"mode": "fixed", "fixedColor": colour}},
                    ],
                }
                for pattern, colour in colours.items()
            ]
        }
    }


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
    links: tuple[Link, ...] = ()

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


def state_timeline(title: str, *queries: Query | str, unit: str = Unit.STATE, **options: Any) -> PanelDef:
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


def prose(paragraph: str) -> str:
    """Markdown for a text panel, wrapped at 98 columns as the dashboards' sources are: Markdown
    reads the breaks as spaces, and text composed from several records stays stable JSON."""
    return textwrap.fill(" ".join(paragraph.split()), 98)


def ratio(title: str, *queries: Query | str, **options: Any) -> PanelDef:
    """A 0-1 share over time (utilization, activity, usage)."""
    return timeseries(title, *queries, unit=Unit.RATIO, **{"min": 0, "max": 1, **options})
