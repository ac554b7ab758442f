"""Selectors of a dashboard and the PromQL shared by several dashboards.

`Scope` splices the exporter selector (`selectors.exporter`) and the dashboard's variables into a
family's selector, each variable only where the family carries that label (the catalogue says
which): RDMA ports have no `model`, bottleneck gauges no `namespace`. Recorded series (the alerts'
recording rules) carry only the cluster label and `model`, and no exporter selector.
"""

from __future__ import annotations

from exporter.catalogue import CATALOGUE
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import series
from exporter.monitoring.records import RecordNames
from exporter.stages import ENGINE, of
from exporter.stages.panels import LINE_LEGEND_SUFFIX, Line, Query

# A GPU shared by several engines names them all in one label (`engine="a,b"`).
_GPU_ENGINE = 'engine=~"(.*,)?($engine)(,.*)?"'
_SUMMARY_SUFFIXES = ("_count", "_sum")


def _q(value: str) -> str:
    return f'"{value}"'


def _stage(stage: str) -> str:
    return f"stage={_q(stage)}"


def _family(name: str) -> str:
    if name in CATALOGUE:
        return name
    for suffix in _SUMMARY_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and base in CATALOGUE and CATALOGUE[base].type == "summary":
            return base
    raise KeyError(f"{name} is not in the catalogue")


class Scope:
    def __init__(self, config: MonitoringConfig, variables: tuple[str, ...]) -> None:
        self.config = config
        self.variables = variables
        self.records = RecordNames(config)
        self.w = config.rate_interval
        self.cluster = config.labels.cluster
        self.node = config.labels.node
        self.diagnosis = config.diagnosis

    def __call__(self, name: str, *extra: str, engine: bool = True) -> str:
        """`name{exporter selector, variables, extra}`; `engine=False` leaves the engine variable out."""
        labels = CATALOGUE[_family(name)].labels
        matchers = [self.config.selectors.exporter]
        if "cluster" in self.variables:
            matchers.append(f'{self.cluster}=~"$cluster"')
        if "node" in self.variables:
            matchers.append(f'{self.node}=~"$node"')
        if "namespace" in self.variables and "namespace" in labels:
            matchers.append('namespace=~"$namespace"')
        if "model" in self.variables and "model" in labels:
            matchers.append('model=~"$model"')
        if engine and "engine" in self.variables and "engine" in labels:
            matchers.append(_GPU_ENGINE if name.startswith("llm_gpu_") else 'engine=~"$engine"')
        for label in ("slice_by", "slice"):
            if label in self.variables and label in labels:
                matchers.append(f'{label}=~"${label}"')
        return series(name, *matchers, *extra)

    def record(self, name: str, *extra: str) -> str:
        matchers = []
        if "cluster" in self.variables:
            matchers.append(f'{self.cluster}=~"$cluster"')
        if "model" in self.variables and name.startswith("model"):
            matchers.append('model=~"$model"')
        return series(name, *matchers, *extra)

    def rate(self, name: str, *extra: str, engine: bool = True) -> str:
        return f"rate({self(name, *extra, engine=engine)}[{self.w}])"

    def by_node(self, *labels: str) -> str:
        """`by (cluster, node, ...)`: aggregations keep where a series comes from."""
        return "by (" + ", ".join((self.cluster, self.node, *labels)) + ")"

    def stage_score(self, stage: str) -> str:
        return self("llm_bottleneck_score", _stage(stage))

    def engine_p95(self, family: str) -> str:
        return self.quantile(family, "0.95", self.by_node("engine"))

    def line(self, key: str, colour: str = "red") -> Line:
        return Line(getattr(self.diagnosis, key), colour, f"diagnosis.{key}")

    def score_lines(self) -> tuple[Line, ...]:
        return self.line("exit_score", "orange"), self.line("enter_score")

    def itl_lines(self) -> tuple[Query, ...]:
        """The lines inter-token latency is judged against, as series: the diagnosis' slowdown line,
        `itl_slowdown_ratio` times the model's best p95 over `baseline_seconds` (recorded), and the
        threshold of each SLO that bounds it and covers the selected engines."""
        d, r = self.diagnosis, self.records
        itl = 'dimension="itl"'
        slowdown = f"{d.itl_slowdown_ratio:g} * {self.record(r.itl_best)}"
        slo = (
            f"max by ({self.cluster}, slo) ({self('llm_slo_threshold_seconds', itl)})\n"
            f"and on ({self.cluster}, slo)\n{self('llm_slo_attainment_ratio', itl)}"
        )
        return (
            Query(slowdown, f"{{{{model}}}} {d.itl_slowdown_ratio:g}x best p95 over {r.baseline}{LINE_LEGEND_SUFFIX}"),
            Query(slo, f"SLO {{{{slo}}}}{LINE_LEGEND_SUFFIX}"),
        )

    def quantile(self, family: str, quantile: str, by: str) -> str:
        """The worst replica's windowed quantile of an exporter summary, per `by` clause."""
        return f"max {by} ({self(family, f'quantile={_q(quantile)}')})"

    def primary_stage_code(self) -> str:
        """Per engine, the code (stage_codes(); 0 for none) of its primary stage."""
        parts = [f"{self('llm_bottleneck_primary', _stage(stage))} * {code}" for stage, code in stage_codes().items()]
        joined = "\n  or\n  ".join(parts)
        return f"sum {self.by_node('engine')} (\n  {joined}\n)"

    def active_bottlenecks(self) -> str:
        """The score of every active stage: one row per engine and stage."""
        return f"{self('llm_bottleneck_score')}\nand\n{self('llm_bottleneck_active')} == 1"


def stage_codes() -> dict[str, int]:
    """Primary-stage codes of the state timelines, in request-path order; 0 is "none"."""
    return {stage.id: index for index, stage in enumerate(of(ENGINE), start=1)}


def stage_mappings() -> dict[int, tuple[str, str]]:
    """Each code's text and colour: the stage's title and colour from its record."""
    states = {0: ("none", "green")}
    states.update({index: (stage.title, stage.colour) for index, stage in enumerate(of(ENGINE), start=1)})
    return states
