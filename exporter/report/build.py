"""Asks Prometheus for every figure of every window and assembles the report.

Queries run in parallel (a handful at a time, so a shared Prometheus is not flooded); each is
one `query_range` over one window at the report's step, so the points a figure's window mean is
taken over are exactly the instants `avg_over_time((expr)[window:step])` reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from exporter.report.causes import ENGINE_CONFIG_INFO, Cause, config_causes, mix_causes
from exporter.report.fix import FixVerdict, fix_verdict
from exporter.report.matrix import GroupKey, Row, build_rows, group_key
from exporter.report.prometheus import PrometheusClient, Series
from exporter.report.queries import FIGURES_BY_KEY, LEVELS, Level, QueryContext, all_figures, presence_expr
from exporter.report.slices import slice_figures
from exporter.report.walk import NONE, EngineStages, StageStep, cluster_primary, walk
from exporter.report.windows import Window
from exporter.stages import get as stage_record

PARALLEL_QUERIES = 8
#: Points of each plotted series over the whole span.
PLOT_POINTS = 240
PLOTTED = (
    "request_rate",
    "generation_tokens_rate",
    "mean_prompt_tokens",
    "e2e_p50",
    "e2e_p95",
    "e2e_p99",
    "ttft_p50",
    "ttft_p99",
    "gpu_utilization",
    "sm_active",
    "dram_active",
    "kv_usage_max",
    "waiting",
)


class NoData(RuntimeError):
    """The selector matches no series of the exporter in any window."""


@dataclass
class Timeline:
    """Each engine's primary stage over the whole span, at the plot step (None: no data)."""

    times: list[float]
    engines: dict[str, list[str | None]]


@dataclass
class Report:
    prometheus: str
    selector: str
    step: float
    rate_interval: str
    windows: list[Window]
    rows: list[Row]
    stages: dict[str, dict[str, EngineStages]]  # window -> engine -> stages
    engine_models: dict[str, str]
    primary: dict[str, str]  # window -> cluster-wide primary
    walk: list[StageStep]
    causes: list[Cause]
    actions: list[str]
    fix: FixVerdict | None
    plots: dict[str, list[Series]] = field(default_factory=dict)  # figure key -> cluster-level series
    timeline: Timeline | None = None
    generated_at: float = field(default_factory=time.time)
    elapsed_seconds: float = 0.0

    def window(self, name: str) -> Window | None:
        return next((w for w in self.windows if w.name == name), None)

    def cluster_rows(self) -> dict[str, Row]:
        """Figure key -> the first cluster's row (a report usually covers one cluster)."""
        out: dict[str, Row] = {}
        for row in self.rows:
            if row.level == "cluster" and row.figure.key not in out:
                out[row.figure.key] = row
        return out


def auto_step(windows: Sequence[Window]) -> float:
    """Whole seconds, at least 15 (a common scrape interval: finer steps repeat samples and
    inflate the test's counts) and at most 250 points in the longest window."""
    longest = max(w.seconds for w in windows)
    return float(max(15, math.ceil(longest / 250)))


def build_report(
    client: PrometheusClient,
    ctx: QueryContext,
    windows: Sequence[Window],
    step: float,
    engine_selector: str = "",
    plots: bool = True,
    chosen_slice: tuple[str, str] | None = None,
) -> Report:
    began = time.monotonic()
    windows = [w.aligned(step) for w in windows]
    names = [w.name for w in windows]
    span_start, span_end = min(w.start for w in windows), max(w.end for w in windows)
    found = client.query(presence_expr(ctx, span_end - span_start + step), span_end)
    if not found or not found[0].points or found[0].points[0][1] == 0:
        raise NoData(
            f"the selector {{{ctx.selector}}} matches no llm_engine_up series between the windows' start and end"
        )

    def ranged(expr: str, window: Window) -> list[Series]:
        if window.end < window.start + step:
            return []
        return client.query_range(expr, window.start + step, window.end, step)

    figures = all_figures() + slice_figures(chosen_slice)
    jobs: list[tuple[str, Level, str, Window]] = []
    for figure in figures:
        for level in LEVELS:
            expr = figure.build(ctx, level)
            if expr is not None:
                jobs += [(figure.key, level, expr, w) for w in windows]
    plot_step = float(max(step, math.ceil((span_end - span_start) / PLOT_POINTS)))
    with ThreadPoolExecutor(PARALLEL_QUERIES) as pool:
        figure_futures = [(key, level, w.name, pool.submit(ranged, expr, w)) for key, level, expr, w in jobs]
        primary_futures = {w.name: pool.submit(ranged, ctx.sel("llm_bottleneck_primary"), w) for w in windows}
        score_futures = {w.name: pool.submit(ranged, ctx.sel("llm_bottleneck_score"), w) for w in windows}
        config_futures = {
            (name, w.name): pool.submit(
                client.query, f"last_over_time({_sel(name, engine_selector)}[{max(1, round(w.seconds))}s])", w.end
            )
            for name in ENGINE_CONFIG_INFO
            for w in windows
        }
        plot_futures = {}
        timeline_future = None
        if plots:
            plot_futures = {
                key: pool.submit(
                    client.query_range, FIGURES_BY_KEY[key].build(ctx, "cluster") or "", span_start, span_end, plot_step
                )
                for key in PLOTTED
            }
            timeline_future = pool.submit(
                client.query_range, ctx.sel("llm_bottleneck_primary"), span_start, span_end, plot_step
            )
        values: dict[tuple[str, Level], dict[str, dict[GroupKey, list[float]]]] = {}
        for key, level, window_name, future in figure_futures:
            by_group = values.setdefault((key, level), {}).setdefault(window_name, {})
            for s in future.result():
                by_group.setdefault(group_key(level, s.labels, ctx.labels.cluster), []).extend(v for _, v in s.points)
        stages = {name: _engine_stages(primary_futures[name].result(), score_futures[name].result()) for name in names}
        config = {k: [s.labels for s in f.result()] for k, f in config_futures.items()}
        plot_series = {key: f.result() for key, f in plot_futures.items()}
        timeline = _timeline(timeline_future.result(), span_start, span_end, plot_step) if timeline_future else None
    has_after = "after" in names
    rows = [
        row
        for figure in figures
        for level in LEVELS
        if (figure.key, level) in values
        for row in build_rows(figure, level, values[(figure.key, level)], has_after)
    ]
    engine_models: dict[str, str] = {}
    for row in rows:
        if row.level == "engine":
            engine_models.setdefault(row.group[2], row.group[1])
    primary = {name: cluster_primary(stages[name]) for name in names}
    report = Report(
        prometheus=client.shown,
        selector=ctx.selector,
        step=step,
        rate_interval=ctx.rate_interval,
        windows=list(windows),
        rows=rows,
        stages=stages,
        engine_models=engine_models,
        primary=primary,
        walk=[],
        causes=[],
        actions=[],
        fix=None,
        plots=plot_series,
        timeline=timeline,
    )
    cluster_rows = report.cluster_rows()
    report.walk = walk(stages, cluster_rows)
    incident_stage = primary.get("incident", NONE)
    report.causes = mix_causes(cluster_rows, incident_stage)
    for name in ENGINE_CONFIG_INFO:
        report.causes += config_causes(name, config.get((name, "baseline"), []), config.get((name, "incident"), []))
        if has_after:
            report.causes += config_causes(
                name, config.get((name, "incident"), []), config.get((name, "after"), []), "after"
            )
    incident_record = stage_record(incident_stage)
    report.actions = incident_record.generic_actions if incident_record is not None else []
    if has_after:
        report.fix = fix_verdict(cluster_rows, incident_stage, primary.get("after", NONE))
    report.elapsed_seconds = time.monotonic() - began
    return report


def _sel(name: str, selector: str) -> str:
    return f"{name}{{{selector}}}" if selector else name


def _engine_stages(primary: list[Series], scores: list[Series]) -> dict[str, EngineStages]:
    shares: dict[str, dict[str, list[float]]] = {}
    steps: dict[str, int] = {}
    for s in primary:
        engine, stage = s.labels.get("engine", ""), s.labels.get("stage", "")
        values = [v for _, v in s.points if math.isfinite(v)]
        shares.setdefault(engine, {})[stage] = values
        steps[engine] = max(steps.get(engine, 0), len(values))
    mean_scores: dict[str, dict[str, float]] = {}
    for s in scores:
        values = [v for _, v in s.points if math.isfinite(v)]
        if values:
            mean_scores.setdefault(s.labels.get("engine", ""), {})[s.labels.get("stage", "")] = sum(values) / len(
                values
            )
    out = {}
    for engine, by_stage in shares.items():
        n = steps[engine]
        if n:
            out[engine] = EngineStages({st: sum(v) / n for st, v in by_stage.items()}, mean_scores.get(engine, {}), n)
    return out


def _timeline(primary: list[Series], start: float, end: float, step: float) -> Timeline:
    times = [start + i * step for i in range(int((end - start) // step) + 1)]
    index = {t: i for i, t in enumerate(times)}
    engines: dict[str, list[str | None]] = {}
    for s in primary:
        row = engines.setdefault(s.labels.get("engine", ""), [None] * len(times))
        for t, v in s.points:
            i = index.get(t)
            if i is not None and v == 1:
                row[i] = s.labels.get("stage", NONE)
    return Timeline(times, dict(sorted(engines.items())))


def rows_by(rows: Sequence[Row], level: Level) -> Mapping[GroupKey, list[Row]]:
    out: dict[GroupKey, list[Row]] = {}
    for row in rows:
        if row.level == level:
            out.setdefault(row.group, []).append(row)
    return out
