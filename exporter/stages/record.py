"""What a stage is: one record that the diagnosis, the rules, the dashboards, the report, the demo
and the docs all read (kubernetes-mixin's one object, iterated by every consumer).

A record holds facts and small functions of plain inputs, never a consumer's own types: its
alerts are written against `AlertContext`, its dashboard row against `PanelScope` and its report
misreadings against `Readings`, protocols that the monitoring and report layers implement. So
the daemon imports a record without grafanalib, the PromQL parser or matplotlib, and a stage's
facts stay in its one module (exporter/stages/<id>.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Generic, Literal, Protocol, TypeVar

from exporter.settings import Thresholds
from exporter.stages.advice import Action, Settings, tailored
from exporter.stages.panels import Line, PanelDef, Query
from exporter.stages.signals import History

In = TypeVar("In")

_SHADES = ("super-light-", "light-", "", "semi-dark-", "dark-")
_HUES = {
    "red": ("#FF7383", "#F2495C", "#E02F44", "#C4162A", "#AD0317"),
    "orange": ("#FFB357", "#FF9830", "#FF780A", "#FA6400", "#E55400"),
    "yellow": ("#FFEE52", "#FADE2A", "#F2CC0C", "#E0B400", "#CC9D00"),
    "green": ("#96D98D", "#73BF69", "#56A64B", "#37872D", "#19730E"),
    "blue": ("#8AB8FF", "#5794F2", "#3274D9", "#1F60C4", "#1250B0"),
    "purple": ("#CA95E5", "#B877D9", "#A352CC", "#8F3BB8", "#7C2EA3"),
}
#: Grafana's named colours as its light theme draws them (grafana-data, createVisualizationColors'
#: light hues): a stage's colour is one name, which the dashboards use as it is and the report's
#: white pages by this value, so a stage looks the same in both.
GRAFANA_COLOURS: Mapping[str, str] = {
    f"{shade}{hue}": value for hue, values in _HUES.items() for shade, value in zip(_SHADES, values)
}
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_THRESHOLD_KEYS = frozenset(f.name for f in fields(Thresholds))


class Fmt:
    """Go-template formats of the figures an alert quotes."""

    PERCENT = "humanizePercentage"
    SECONDS = "humanizeDuration"
    COUNT = 'printf "%.0f"'
    RATE = 'printf "%.2f"'
    SCORE = 'printf "%.2f"'


#: The figures a responder needs, which every engine-stage alert may quote (AlertContext.figure).
EngineFigure = Literal[
    "running",
    "waiting",
    "kv",
    "itl_p95",
    "ttft_p95",
    "queue_p95",
    "preemptions",
    "prompt_rate",
    "engine_cpu",
    "dram",
    "sm",
    "tensor",
    "gpu_util",
    "rdma_util",
    "cnp",
    "retrans",
]


@dataclass
class StageResult:
    """A stage's score (0-1) for one engine or gateway, with evidence lines quoting its numbers."""

    score: float = 0.0
    evidence: list[str] = field(default_factory=list)
    #: actions worded for the state the scorer saw; when given, they stand for the record's `actions`
    actions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scope(Generic[In]):
    """Where a stage is scored, and so what its scorer reads (`In`): each engine's `History`, or
    each gateway's path reading (exporter/stages/path.py)."""

    name: str
    #: the rule group its alerts are generated in (`llm-bottleneck-exporter.<group>`)
    alert_group: str
    #: its alerts carry a `stage` label (the engine's stage alerts do; one engine's Alertmanager
    #: inhibition keys on it)
    stage_label: bool


ENGINE: Scope[History] = Scope("engine", alert_group="bottlenecks", stage_label=True)


class AlertContext(Protocol):
    """What a stage's alert is written with; exporter/monitoring/stage_alerts.py implements it."""

    diagnosis: Thresholds
    rate_interval: str
    #: "Engine {{ $labels.engine }} (...) on {{ $labels.<node> }}"
    engine: str
    #: "Gateway {{ $labels.gateway }} (...) on {{ $labels.<node> }}"
    gateway: str
    #: `by (cluster, node, gateway, gateway_type)`'s label list
    by_gateway: str

    def value(self, fmt: str) -> str:
        """The alert's own value in `fmt` (Fmt: `{{ $value | humanizePercentage }}`)."""
        ...

    def series(self, name: str, *matchers: str) -> str:
        """`name{exporter selector, matchers}`."""
        ...

    def score_while_active(self) -> str:
        """The stage's score while the exporter holds it active: the default expression."""
        ...

    def past_line(self, family: str, line: float) -> str:
        """`family >= line`, while the stage is active: where one family is the defining evidence."""
        ...

    def score(self) -> str:
        """The stage's score, as the page quotes it."""
        ...

    def figure(self, name: EngineFigure) -> str:
        """One of the figures a responder needs, looked up for the engine when the alert fires."""
        ...

    def of_gateway(self, template: str, fmt: str) -> str:
        """A figure of the gateway's own series; `@` in `template` stands for its matchers."""
        ...

    def percent(self, ratio: float) -> str: ...

    def alert_line(self, name: str) -> float:
        """A line of the monitoring configuration's `thresholds:` (alert-only lines)."""
        ...


@dataclass(frozen=True)
class Alert:
    """A stage's alert: the page, its defaults (`alerts.<name>` overrides them) and its runbook."""

    name: str
    severity: Literal["critical", "warning", "info"]
    for_: str
    summary: str
    description: Callable[[AlertContext], str]
    #: None: the stage's score while it is active
    expr: Callable[[AlertContext], str] | None = None

    @property
    def runbook(self) -> str:
        return f"docs/runbooks/{self.name}.md"


class PanelScope(Protocol):
    """What a stage's dashboard row is written with; the dashboards' `Scope` implements it."""

    #: the label naming the node
    node: str
    diagnosis: Thresholds

    def __call__(self, name: str, *extra: str, engine: bool = True) -> str:
        """`name{selectors}`, filtered by the dashboard's variables."""
        ...

    def rate(self, name: str, *extra: str, engine: bool = True) -> str: ...

    def by_node(self, *labels: str) -> str:
        """`by (cluster, node, labels...)`."""
        ...

    def quantile(self, family: str, quantile: str, by: str) -> str: ...

    def engine_p95(self, family: str) -> str:
        """The worst replica's p95 of an exporter summary, per engine."""
        ...

    def line(self, key: str, colour: str = "red") -> Line:
        """The diagnosis line `key` (a `diagnosis:` setting) drawn on a panel."""
        ...

    def score_lines(self) -> tuple[Line, ...]:
        """exit_score and enter_score, drawn on every score panel."""
        ...

    def itl_lines(self) -> tuple[Query, ...]:
        """Inter-token latency's lines as series: the model's own baseline times the slowdown
        ratio, and the threshold of an SLO that bounds it."""
        ...


@dataclass(frozen=True)
class Row:
    """A stage's row of the bottleneck-diagnosis dashboard."""

    title: str
    #: the evidence panels; an engine stage's row opens with its score panel, added for it
    panels: Callable[[PanelScope], tuple[PanelDef, ...]]
    #: width of that score panel; None: the row draws its own score (the path stages' row)
    score_width: int | None = 6
    #: how the dashboard's reading guide names the row ("KV cache"); the title lowercased if empty
    short: str = ""

    @property
    def walk_name(self) -> str:
        return self.short or self.title.lower()


class Readings(Protocol):
    """The report's matrix, as a stage's misreadings read it (exporter/report/walk.py)."""

    def value(self, key: str, window: str = "incident") -> float | None:
        """The cluster-wide figure `key` in a window."""
        ...

    def ratio(self, key: str) -> float | None:
        """The figure's incident value over its baseline value."""
        ...


@dataclass(frozen=True)
class Measure:
    """A report figure a stage brings: a family of the engines, per engine, model and cluster."""

    key: str
    label: str
    #: the report's unit ("s", "ratio", "/s", ...)
    unit: str
    family: str
    aggregate: Literal["max", "avg", "sum"] = "max"
    #: a counter: its rate over the report's rate window
    rate: bool = False
    better: Literal["higher", "lower", ""] = "lower"
    #: matchers of the family's series it reads (`part="transfer"`), "" for all
    match: str = ""


@dataclass(frozen=True)
class Stage(Generic[In]):
    """One stage of the request path, declared once (exporter/stages/<id>.py)."""

    #: the `stage` label value
    id: str
    #: its place on the request path, the order every consumer walks the stages in
    order: int
    scope: Scope[In]
    #: how titles and legends name it ("decode memory bandwidth")
    title: str
    #: a Grafana colour name (GRAFANA_COLOURS), for the dashboards, the report and the docs alike
    colour: str
    score: Callable[[In, Thresholds], StageResult]
    #: the question the walk asks at this stage, and what it looks like when the answer is yes
    question: str
    signature: str
    #: for docs/stages.md: the signals the scorer takes together, and what keeps it from firing wrongly
    reads: str
    guards: str
    #: the `diagnosis:` settings it scores against
    lines: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    alerts: tuple[Alert, ...] = ()
    row: Row | None = None
    #: the report's matrix figures that are its evidence, and the ones it brings
    figures: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    #: the report's request-mix figures that drive it: a significant, large change of one the way
    #: that asks more of the engines (the figure's `load` in exporter/report/queries.py) explains it
    #: becoming primary
    driven_by: tuple[str, ...] = ()
    #: the report's "not this" lines: (matrix, whether the stage became the bottleneck or worsened)
    misreadings: Callable[[Readings, bool], list[str]] | None = None
    #: the roles of a disaggregated deployment it is judged on (empty: every engine); a unified
    #: engine is judged on every stage
    roles: tuple[str, ...] = ()

    def judged_on(self, role: str) -> bool:
        return not self.roles or role == "unified" or role in self.roles

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"stage id {self.id!r}: lower-case letters, digits and _ only")
        if self.colour not in GRAFANA_COLOURS:
            raise ValueError(f"stage {self.id}: colour {self.colour!r} is not a Grafana colour name")
        unknown = set(self.lines) - _THRESHOLD_KEYS
        if unknown:
            raise ValueError(f"stage {self.id}: {sorted(unknown)} are not diagnosis settings")

    @property
    def hex(self) -> str:
        return GRAFANA_COLOURS[self.colour]

    def holds(self, score: float, was_active: bool, t: Thresholds) -> bool:
        """Active with hysteresis: it turns on at `enter_score` and off below `exit_score`."""
        return score >= (t.exit_score if was_active else t.enter_score)

    def actions_for(self, settings: Settings) -> list[str]:
        """The actions worded for an engine with these settings (exporter/stages/advice.py)."""
        return tailored(self.actions, settings)

    @property
    def generic_actions(self) -> list[str]:
        return [str(action) for action in self.actions]
