"""A dashboard under construction: rows of panels, placed on Grafana's 24-column grid.

`Board` keeps what the dashboards declare — rows in order, panels left to right, wrapping at 24
columns — and builds the grafanalib `Dashboard`. Panel ids are derived from each panel's `key`
(its title unless given), so adding, moving or removing a panel never changes another's id: links
into a dashboard (`?viewPanel=ID`) and the README's anchors keep working. `Board.panels()` lists
what each panel shows, for the README, the lint and the tests.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field

import attr
from grafanalib.core import Dashboard, DashboardLink, GridPos, Template, Templating, Time

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.panels import DATASOURCE, render, row
from exporter.monitoring.promql import series
from exporter.stages.panels import Link, PanelDef

GRID_COLUMNS = 24
# Grafana 10.4 to 11: every field emitted is of the current model, so no migration has to run.
SCHEMA_VERSION = 39
TAGS = ["llm", "llm-bottleneck-exporter"]
# The order the variables are chained in: each one's values are filtered by the ones before it.
VARIABLE_ORDER = ("datasource", "cluster", "namespace", "node", "model", "engine", "slice_by", "slice")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def summary(docstring: str | None) -> str:
    """The first paragraph of a module docstring, on one line: the dashboard's description."""
    return " ".join((docstring or "").strip().split("\n\n")[0].split())


def panel_id(key: str) -> int:
    """A stable id from the panel's key; unique ids within a dashboard are checked on build."""
    return 1 + zlib.crc32(key.encode()) % 999_983


@dataclass(frozen=True)
class PlacedPanel:
    """A panel as built: where it is and what it shows (for the README, lint and tests)."""

    dashboard_uid: str
    id: int
    key: str
    row: str
    definition: PanelDef

    @property
    def anchor(self) -> str:
        return f"{self.dashboard_uid}--{self.key}"


@attr.s
class Variable(Template):
    """A template variable whose "All" is selected by default and shown as the editor shows it."""

    def to_json_data(self) -> dict:
        data = super().to_json_data()
        data["definition"] = self.query if self.type == "query" else ""
        if self.includeAll:
            data["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        elif self.type == "datasource":
            data["current"] = {}
        return data


def variables(config: MonitoringConfig, names: tuple[str, ...], single_engine: bool = False) -> list[Template]:
    """Template variables `names` (a subset of VARIABLE_ORDER), each filtered by those before it.

    Every "All" is the regex `.*`, which also matches series without the label (engines found
    without Kubernetes carry no `namespace`), so "All" never hides a series.
    """
    unknown = set(names) - set(VARIABLE_ORDER)
    if unknown:
        raise ValueError(f"unknown variables {sorted(unknown)}")
    cluster, node, x = config.labels.cluster, config.labels.node, config.selectors.exporter
    matchers = {
        "cluster": f'{cluster}=~"$cluster"',
        "namespace": 'namespace=~"$namespace"',
        "node": f'{node}=~"$node"',
        "model": 'model=~"$model"',
        "engine": 'engine=~"$engine"',
        "slice_by": 'slice_by=~"$slice_by"',
    }
    # (family the values come from, its label, the earlier variables that family can be filtered by)
    sources = {
        "cluster": ("llm_exporter_build_info", cluster, ()),
        "namespace": ("llm_engine_up", "namespace", ("cluster",)),
        "node": ("llm_exporter_build_info", node, ("cluster",)),
        "model": ("llm_engine_up", "model", ("cluster", "namespace", "node")),
        "engine": ("llm_engine_up", "engine", ("cluster", "namespace", "node", "model")),
        # Slices (docs/metrics.md): the dimensions and values the SLOs are judged per.
        "slice_by": ("llm_slo_slice_attainment_ratio", "slice_by", ("cluster", "model", "engine")),
        "slice": ("llm_slo_slice_attainment_ratio", "slice", ("cluster", "model", "engine", "slice_by")),
    }
    labels = {
        "cluster": "Cluster",
        "namespace": "Namespace",
        "node": "Node",
        "model": "Model",
        "engine": "Engine",
        "slice_by": "Slice by",
        "slice": "Slice",
    }
    result: list[Template] = []
    for name in (n for n in VARIABLE_ORDER if n in names):
        if name == "datasource":
            result.append(
                Variable(
                    name="datasource", label="Data source", query="prometheus", type="datasource", refresh=1, hide=0
                )
            )
            continue
        family, label, filters = sources[name]
        selector = series(family, x, *(matchers[f] for f in filters if f in names))
        single = name == "engine" and single_engine
        result.append(
            Variable(
                name=name,
                label=labels[name],
                query=f"label_values({selector}, {label})",
                dataSource=DATASOURCE,
                refresh=2,
                sort=1,
                includeAll=not single,
                multi=not single,
                allValue=None if single else ".*",
            )
        )
    return result


@dataclass
class Board:
    config: MonitoringConfig
    uid: str
    title: str
    description: str
    variable_names: tuple[str, ...]
    #: the engine variable picks one engine (no "All")
    single_engine: bool = False
    _rows: list[tuple[str, str, list[PanelDef], bool]] = field(default_factory=list, init=False)
    _top: list[PanelDef] = field(default_factory=list, init=False)

    def top(self, *panels: PanelDef) -> None:
        """Panels above the first row (a dashboard's headline)."""
        self._top.extend(panels)

    def row(self, title: str, *panels: PanelDef, key: str = "", collapsed: bool = False) -> None:
        """A row of panels; `collapsed`: folded, its panels one click away."""
        self._rows.append((title, key or f"row-{slug(title)}", list(panels), collapsed))

    def _layout(self) -> tuple[list, list[PlacedPanel]]:
        built: list = []
        placed: list[PlacedPanel] = []
        seen: dict[int, str] = {}

        def take_id(key: str) -> int:
            pid = panel_id(f"{key}")
            if pid in seen:
                raise ValueError(f"{self.uid}: panels {seen[pid]!r} and {key!r} share id {pid}; give one a key")
            seen[pid] = key
            return pid

        y = 0

        def place(panels: list[PanelDef], row_title: str, y: int, into: list) -> int:
            x, line_height = 0, 0
            for panel in panels:
                if panel.width > GRID_COLUMNS:
                    raise ValueError(f"{panel.title}: wider than the grid")
                if x + panel.width > GRID_COLUMNS:
                    y, x, line_height = y + line_height, 0, 0
                key = panel.key or slug(panel.title)
                pid = take_id(key)
                into.append(render(panel, pid, GridPos(h=panel.height, w=panel.width, x=x, y=y)))
                placed.append(PlacedPanel(self.uid, pid, key, row_title, panel))
                x += panel.width
                line_height = max(line_height, panel.height)
            return y + line_height

        y = place(self._top, "", y, built)
        for title, key, panels, collapsed in self._rows:
            row_id = take_id(key)
            if collapsed:  # its panels inside it, placed as they unfold; the next row follows at once
                inside: list = []
                place(panels, title, y + 1, inside)
                built.append(row(title, row_id, y, tuple(inside)))
                y += 1
            else:
                built.append(row(title, row_id, y))
                y = place(panels, title, y + 1, built)
        return built, placed

    def panels(self) -> list[PlacedPanel]:
        return self._layout()[1]

    def row_anchor(self, title: str) -> str:
        for row_title, key, _, _ in self._rows:
            if row_title == title:
                return f"{self.uid}--{key}"
        raise KeyError(title)

    def rows(self) -> list[tuple[str, str]]:
        """(title, anchor) of each row, in order."""
        return [(title, f"{self.uid}--{key}") for title, key, _, _ in self._rows]

    def build(self) -> Dashboard:
        built, _ = self._layout()
        return Dashboard(
            title=self.title,
            uid=self.uid,
            description=self.description,
            tags=list(TAGS),
            panels=built,
            templating=Templating(list=variables(self.config, self.variable_names, self.single_engine)),
            time=Time("now-1h", "now"),
            refresh="30s",
            timezone="browser",
            schemaVersion=SCHEMA_VERSION,
            graphTooltip=1,
            editable=True,
            links=dashboard_links(self.config),
        )


def dashboard_links(config: MonitoringConfig) -> list[DashboardLink]:
    """Every dashboard's header: the others (by their common tag, with the time range and the
    variables carried over) and the runbooks' index."""
    return [
        DashboardLink(
            title="LLM dashboards",
            type="dashboards",
            tags=[TAGS[-1]],
            asDropdown=True,
            includeVars=True,
            keepTime=True,
        ),
        DashboardLink(
            title="Runbooks",
            type="link",
            uri=config.runbook_url("README"),
            icon="doc",
            targetBlank=True,
            tooltip="How to act on each alert, stage by stage (docs/runbooks/)",
        ),
    ]


def alert_runbook_links(config: MonitoringConfig, *alerts: str) -> tuple[Link, ...]:
    """A panel's links to the runbooks of the alerts that page on what it shows (docs/runbooks/)."""
    return tuple(Link(f"Runbook: {alert}", config.runbook_url(alert)) for alert in dict.fromkeys(alerts))
