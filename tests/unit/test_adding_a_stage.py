"""A stage is added by declaring one record: this module holds a made-up stage (its record and
its scorer, as exporter/stages/<id>.py would) and shows that the diagnosis, `/diagnosis` and
`/metrics`, the recording rules and alerts, the bottleneck dashboard, the report and the docs page
all pick it up with no other change, and drop it once it is unregistered (docs/adding-a-stage.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from exporter.app import Exporter, Pipeline
from exporter.diagnosis import Diagnoser
from exporter.model import Metric
from exporter.monitoring.alerts import rule_groups
from exporter.monitoring.config import LabelNames, MonitoringConfig, from_mapping
from exporter.monitoring.dashboards import bottleneck_diagnosis
from exporter.monitoring.dashboards.queries import stage_mappings
from exporter.monitoring.lint import counter_names, known_names, lint
from exporter.monitoring.promql import metric_names, template_queries
from exporter.monitoring.rule_files import PROMETHEUS_RULE_PATH, RULES_PATH, alert_files
from exporter.monitoring.stage_docs import stages_page
from exporter.report.causes import mix_causes
from exporter.report.matrix import Row as MatrixRow
from exporter.report.matrix import build_rows
from exporter.report.plots import stage_colours
from exporter.report.queries import FIGURES_BY_KEY, Figure, QueryContext, all_figures
from exporter.report.walk import EngineStages, walk
from exporter.settings import Config, GpuSettings, Thresholds
from exporter.sources.base import Source
from exporter.stages import ENGINE, Stage, of, register, stages, unregister
from exporter.stages.evidence import engine_p95
from exporter.stages.panels import PanelDef
from exporter.stages.record import Alert, AlertContext, Fmt, Measure, PanelScope, Readings, Row, StageResult
from exporter.stages.scoring import ramp
from exporter.stages.signals import History
from tests.unit.test_diagnosis import ENGINE as ENGINE_LABELS
from tests.unit.test_diagnosis import engine_metrics, run

# ---- the stage, as its own module would declare it -------------------------------------------


def score(h: History, t: Thresholds) -> StageResult:
    """Made up for the test: requests wait between prefill and decode, read from the queue-time p95."""
    result = StageResult()
    handover = h.mean("queue_p95", t.level_seconds)
    if handover is None:
        result.evidence.append("no queue-time quantile from this engine: the handover not assessed")
        return result
    result.score = ramp(handover, 0.2, 1.0)
    result.evidence.append(f"handover p95 {handover:.2f}s")
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: requests wait between prefill and decode (score {a.value(Fmt.SCORE)}), {a.figure('running')} run."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    return (engine_p95(s, "Handover p95", "llm_engine_queue_time_seconds", width=18),)


def _misreadings(readings: Readings, moved: bool) -> list[str]:
    return ["a long handover is not a slow prefill"] if moved else []


STAGE: Stage[History] = Stage(
    id="example_handover",
    order=47,  # between kv_transfer (45) and decode_memory_bandwidth (50)
    scope=ENGINE,
    title="example handover",
    colour="light-blue",
    score=score,
    question="do requests wait between prefill and decode?",
    signature="queue-time p95 up while prefill and decode are quick",
    reads="queue-time p95 (ramp 0.2-1 s)",
    guards="none: it is an example",
    lines=("level_seconds",),
    actions=("put prefill and decode of one request on one NVLink domain",),
    alerts=(
        Alert("LLMExampleHandoverSlow", "warning", "5m", "Requests wait between prefill and decode.", _description),
    ),
    row=Row("Handover", _row),
    figures=("queue_p99",),
    measures=(Measure("handover_p95", "Handover p95", "s", "llm_engine_queue_time_seconds", "max"),),
    driven_by=("request_rate",),
    misreadings=_misreadings,
)


def cluster_rows(figures: dict[Figure, tuple[float, float]]) -> dict[str, MatrixRow]:
    """The report's cluster rows of figures from their baseline and incident values."""
    data = {
        figure: {"baseline": {("c", "", ""): [base] * 4}, "incident": {("c", "", ""): [now] * 4}}
        for figure, (base, now) in figures.items()
    }
    return {figure.key: build_rows(figure, "cluster", values, has_after=False)[0] for figure, values in data.items()}


CONTEXT = QueryContext('job="x"', "5m", LabelNames())

# ---- what picks it up ------------------------------------------------------------------------


@pytest.fixture
def added() -> Iterator[Stage[History]]:
    register(STAGE)
    try:
        yield STAGE
    finally:
        unregister(STAGE.id)


def slow_handover(i: int) -> list[Metric]:
    return engine_metrics(queue_p95=2.0)


def test_the_registry_walks_it_in_its_place_on_the_path(added: Stage[History]) -> None:
    ids = [stage.id for stage in of(ENGINE)]
    assert ids.index("prefill_compute") < ids.index(added.id) < ids.index("decode_memory_bandwidth")
    with pytest.raises(ValueError, match="registered twice"):
        register(added)


def test_the_diagnosis_scores_it_names_it_primary_and_advises_its_actions(added: Stage[History]) -> None:
    d, gauges = run(Diagnoser(), 10, slow_handover)
    assert d.primary == added.id and d.active[added.id]
    assert f"{added.id} 1.00: handover p95 2.00s" in d.evidence
    assert d.actions == list(added.actions)
    primary = {m.labels["stage"]: m.value for m in gauges if m.name == "llm_bottleneck_primary"}
    assert primary[added.id] == 1.0 and sum(primary.values()) == 1.0


class SlowHandover(Source):
    name = "engine"
    target = "e0"
    timeout_seconds = 5.0

    def collect(self, now: float) -> list[Metric]:
        return slow_handover(0)


def test_the_exporter_serves_it_on_diagnosis_and_metrics(added: Stage[History]) -> None:
    clock = [0.0]
    exporter = Exporter(
        Config(gpu=GpuSettings("none"), interval_seconds=60.0),
        pipeline=Pipeline([SlowHandover()], []),
        clock=lambda: clock[0],
    )
    try:
        while clock[0] <= exporter.config.thresholds.level_seconds:  # an engine is judged after a level window
            exporter.collect_once()
            clock[0] += 5.0
        body = exporter.rendered.body(openmetrics=False, gzipped=False)[0].decode()
    finally:
        exporter.stop()
    (engine,) = exporter.diagnosis()["engines"]
    assert engine["engine"] == ENGINE_LABELS["engine"] and engine["primary"] == added.id
    assert engine["scores"][added.id] == 1.0 and engine["actions"] == list(added.actions)
    assert f'stage="{added.id}"' in body.split("# HELP llm_bottleneck_primary")[1]


def test_its_alert_is_generated_with_its_defaults_runbook_and_known_figures(added: Stage[History]) -> None:
    config = MonitoringConfig()
    (group,) = [g for g in rule_groups(config) if g.name.endswith(".bottlenecks")]
    (rule,) = [r for r in group.rules if getattr(r, "alert", "") == "LLMExampleHandoverSlow"]
    assert rule.labels == {"severity": "warning", "stage": added.id} and rule.for_ == "5m"
    assert rule.annotations["runbook_url"].endswith("docs/runbooks/LLMExampleHandoverSlow.md")
    assert f'llm_bottleneck_active{{job="llm-bottleneck-exporter", stage="{added.id}"}} == 1' in rule.expr
    known = known_names(MonitoringConfig())
    for query in [rule.expr, *template_queries(rule.annotations["description"])]:
        assert metric_names(query) <= known
        assert lint(query, known, counter_names()) == []
    files = alert_files(config)
    assert (
        "alert: LLMExampleHandoverSlow" in files[RULES_PATH] and "LLMExampleHandoverSlow" in files[PROMETHEUS_RULE_PATH]
    )
    # Its policy is a key of the monitoring configuration like every alert's.
    overridden = from_mapping({"alerts": {"LLMExampleHandoverSlow": {"for": "1m"}}})
    assert overridden.policy("LLMExampleHandoverSlow").for_ == "1m"


def test_the_dashboard_gives_it_a_row_a_score_panel_and_a_state(added: Stage[History]) -> None:
    board = bottleneck_diagnosis.board(MonitoringConfig())
    titles = [title for title, _ in board.rows()]
    assert titles[3:7] == ["4 · KV transfer", "5 · Handover", "6 · Decode", "7 · KV cache"]
    panels = {p.key: p for p in board.panels()}
    assert f'stage="{added.id}"' in panels[f"score-{added.id}"].definition.queries[0].expr
    assert panels["handover-p95"].row == "5 · Handover"
    assert (added.title, added.colour) in stage_mappings().values()
    assert "KV transfer → handover → decode" in " ".join(panels["how-to-read"].definition.description.split())


def test_the_report_walks_it_with_its_figures_causes_misreadings_and_colour(added: Stage[History]) -> None:
    (handover,) = [figure for figure in all_figures() if figure.key == "handover_p95"]
    assert handover.key not in FIGURES_BY_KEY  # the stage brought it
    assert (
        handover.build(CONTEXT, "engine") == 'max by (cluster, engine, model) (llm_engine_queue_time_seconds{job="x"})'
    )
    rows = cluster_rows(
        {FIGURES_BY_KEY["queue_p99"]: (0.1, 2.4), FIGURES_BY_KEY["request_rate"]: (10.0, 25.0), handover: (0.1, 2.0)}
    )
    engines = {
        "baseline": {"e0": EngineStages({"none": 1.0}, {added.id: 0.1}, 10)},
        "incident": {"e0": EngineStages({added.id: 1.0}, {added.id: 0.9}, 10)},
    }
    (step,) = [s for s in walk(engines, rows) if s.stage == added.id]
    assert step.verdict == "became the bottleneck"
    assert step.evidence == ["Queue time P99 100 ms → 2.40 s (×24)", "Handover p95 100 ms → 2.00 s (×20)"]
    assert step.not_this == ["a long handover is not a slow prefill"]
    assert [c.explains for c in mix_causes(rows, added.id)] == [True]
    assert stage_colours()[added.id] == added.hex == "#5794F2"  # Grafana light-blue, as its light theme draws it


def test_the_stages_page_lists_it(added: Stage[History]) -> None:
    page = stages_page(MonitoringConfig())
    assert f"| 6 | `{added.id}` | example handover | per engine | do requests wait between prefill and decode?" in page
    assert "[LLMExampleHandoverSlow](runbooks/LLMExampleHandoverSlow.md) (warning, for 5m)" in page


def test_unregistered_it_is_gone_from_every_consumer() -> None:
    register(STAGE)
    unregister(STAGE.id)
    assert STAGE.id not in {stage.id for stage in stages()}
    rules = [r for g in rule_groups(MonitoringConfig()) for r in g.rules]
    assert not [r for r in rules if getattr(r, "alert", "") == "LLMExampleHandoverSlow"]
    assert "Handover" not in " ".join(t for t, _ in bottleneck_diagnosis.board(MonitoringConfig()).rows())
    d, _ = run(Diagnoser(), 10, slow_handover)
    assert STAGE.id not in d.scores


def test_a_record_is_checked_when_declared_and_when_registered() -> None:
    with pytest.raises(ValueError, match="not a Grafana colour name"):
        replace(STAGE, colour="teal")
    with pytest.raises(ValueError, match="not diagnosis settings"):
        replace(STAGE, lines=("kv_usage_warnin",))
    with pytest.raises(ValueError, match="lower-case"):
        replace(STAGE, id="Example-Handover")
    with pytest.raises(ValueError, match="share order 40"):
        register(replace(STAGE, order=40))
    assert STAGE.id not in {stage.id for stage in stages()}
