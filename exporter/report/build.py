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

from exporter.monitoring.config import LabelNames
from exporter.report.causes import ENGINE_CONFIG_INFO, Cause, config_causes, mix_causes
from exporter.report.fix import FixVerdict, fix_verdict
from exporter.report.matrix import GroupKey, Row, build_rows, group_key
from exporter.report.prometheus import PrometheusClient, Series
from exporter.report.queries import FIGURES_BY_KEY, LEVELS, Level, QueryContext, all_figures, histograms_expr
from exporter.report.render_text import fmt_seconds
from exporter.report.restarts import restart_warnings
from exporter.report.slices import slice_figures
from exporter.report.timing import (
    Extent,
    Plan,
    Timing,
    choose,
    duration_text,
    extent_expr,
    extent_of,
    require_judgeable,
)
from exporter.report.walk import NONE, EngineStages, StageStep, cluster_primary, walk
from exporter.report.windows import Window
from exporter.settings import Config
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
    """The selector matches no series of the exporter in a window."""


@dataclass(frozen=True)
class ReadSettings:
    """What the command line may fix; None: chosen from the data (timing.py)."""

    step: float | None = None
    rate_range: float | None = None
    #: the exporter's `window_seconds`, over which it computes its quantiles and ratios
    exporter_window: float = Config().window_seconds
    #: matchers of the engines' own series (histograms, configuration info), if Prometheus has them
    engine_selector: str = ""


DEFAULT_SETTINGS = ReadSettings()
DEFAULT_LABELS = LabelNames()


@dataclass
class Timeline:
    """Each engine's primary stage over the whole span, at the plot step (None: no data)."""

    times: list[float]
    engines: dict[str, list[str | None]]


@dataclass
class Report:
    prometheus: str
    selector: str
    timing: Timing
    windows: list[Window]
    extents: dict[str, Extent]  # window -> the data Prometheus holds in it
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
    warnings: list[str] = field(default_factory=list)
    generated_at: float = field(default_factory=time.time)
    elapsed_seconds: float = 0.0

    @property
    def step(self) -> float:
        return self.timing.step

    @property
    def rate_interval(self) -> str:
        return self.timing.rate_interval

    def window(self, name: str) -> Window | None:
        return next((w for w in self.windows if w.name == name), None)

    def cluster_rows(self) -> dict[str, Row]:
        """Figure key -> the first cluster's row (a report usually covers one cluster)."""
        out: dict[str, Row] = {}
        for row in self.rows:
            if row.level == "cluster" and row.figure.key not in out:
                out[row.figure.key] = row
        return out


def read_extents(client: PrometheusClient, selector: str, windows: Sequence[Window]) -> dict[str, Extent]:
    """The data each window holds; NoData naming the first window that holds none."""
    up = QueryContext(selector, "1m", LabelNames()).sel("llm_engine_up")
    extents = {}
    for window in windows:
        answer = client.query(extent_expr(up, window), window.end)
        extent = extent_of({s.labels.get("edge", ""): s.points[0][1] for s in answer if s.points})
        if extent is None:
            raise NoData(
                f"--{window.name}: the selector {{{selector}}} matches no llm_engine_up series with two samples "
                "or more in this window"
            )
        extents[window.name] = extent
    return extents


def build_report(
    client: PrometheusClient,
    selector: str,
    windows: Sequence[Window],
    settings: ReadSettings = DEFAULT_SETTINGS,
    labels: LabelNames = DEFAULT_LABELS,
    plots: bool = True,
    chosen_slice: tuple[str, str] | None = None,
) -> Report:
    """The report over `windows`; NoData or timing.TooShort where a window cannot be judged."""
    began = time.monotonic()
    names = [w.name for w in windows]
    extents = read_extents(client, selector, windows)
    span_start, span_end = min(w.start for w in windows), max(min(w.end, extents[w.name].last) for w in windows)
    histograms = all(_has_histograms(client, settings.engine_selector, w, extents[w.name]) for w in windows)
    timing = choose(
        [extents[n] for n in names], settings.step, settings.rate_range, settings.exporter_window, histograms
    )
    require_judgeable(timing, windows, [extents[n] for n in names])
    ctx = QueryContext(selector, timing.rate_interval, labels, settings.engine_selector)

    def ranged(expr: str, plan: Plan | None) -> list[Series]:
        return [] if plan is None else client.query_range(expr, plan.first, plan.last, plan.spacing)

    figures = all_figures() + slice_figures(chosen_slice)
    jobs: list[tuple[str, Level, str, Window, Plan | None]] = []
    unread: dict[str, dict[str, str]] = {}  # figure key -> window -> why it has no value there
    for figure in figures:
        for w in windows:
            plan = timing.plan(figure.reads, w, extents[w.name])
            if plan is None:
                look = timing.lookback(figure.reads)
                unread.setdefault(figure.key, {})[w.name] = (
                    f"the window is shorter than its {fmt_seconds(look)} look-back"
                )
            for level in LEVELS:
                expr = figure.build(ctx, level)
                if expr is not None:
                    jobs.append((figure.key, level, expr, w, plan))
    verdicts = {w.name: timing.plan("windowed", w, extents[w.name], spacing=timing.step) for w in windows}
    plot_step = float(max(timing.step, math.ceil((span_end - span_start) / PLOT_POINTS)))
    plot_ctx = QueryContext(
        selector, duration_text(plot_step + timing.scrape_interval), labels, settings.engine_selector
    )
    with ThreadPoolExecutor(PARALLEL_QUERIES) as pool:
        figure_futures = [(key, level, w.name, pool.submit(ranged, expr, plan)) for key, level, expr, w, plan in jobs]
        primary_futures = {n: pool.submit(ranged, ctx.sel("llm_bottleneck_primary"), verdicts[n]) for n in names}
        score_futures = {n: pool.submit(ranged, ctx.sel("llm_bottleneck_score"), verdicts[n]) for n in names}
        config_futures = {
            (name, w.name): pool.submit(
                client.query,
                f"last_over_time({_sel(name, settings.engine_selector)}[{max(1, round(w.seconds))}s])",
                min(w.end, extents[w.name].last),
            )
            for name in ENGINE_CONFIG_INFO
            for w in windows
        }
        plot_futures = {}
        timeline_future = None
        if plots:
            plot_futures = {
                key: pool.submit(
                    client.query_range,
                    FIGURES_BY_KEY[key].build(plot_ctx, "cluster") or "",
                    span_start,
                    span_end,
                    plot_step,
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
        for row in build_rows(figure, level, values[(figure.key, level)], has_after, unread.get(figure.key, {}))
    ]
    engine_models: dict[str, str] = {}
    for row in rows:
        if row.level == "engine":
            engine_models.setdefault(row.group[2], row.group[1])
    primary = {name: cluster_primary(stages[name]) for name in names}
    report = Report(
        prometheus=client.shown,
        selector=ctx.selector,
        timing=timing,
        windows=list(windows),
        extents=extents,
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
        after = report.window("after")
        after_seconds = after.seconds if after is not None else None
        report.fix = fix_verdict(
            cluster_rows, incident_stage, primary.get("after", NONE), after_seconds, timing.lookback("quantile")
        )
    report.warnings = _warnings(report)
    report.warnings += restart_warnings(client, selector, windows, {n: e.last for n, e in extents.items()})
    report.elapsed_seconds = time.monotonic() - began
    return report


def _warnings(report: Report) -> list[str]:
    """What a reader must know before trusting the figures: windows the data covers only in part,
    and headline figures with too few values to judge."""
    out = []
    for w in report.windows:
        extent = report.extents[w.name]
        gaps = []
        if extent.first > w.start + report.timing.scrape_interval:
            gaps.append(f"begins {fmt_seconds(extent.first - w.start)} after its start")
        if extent.last < w.end - report.timing.scrape_interval:
            gaps.append(f"ends {fmt_seconds(w.end - extent.last)} before its end")
        if gaps:
            out.append(f"{w.name}: the data Prometheus holds {' and '.join(gaps)}; the figures cover only that part")
    timing = report.timing
    if timing.step < timing.scrape_interval:
        out.append(
            f"the step ({timing.step:g} s) is finer than the data's scrape interval ({timing.scrape_interval:g} s): "
            "values repeat samples, so the counts overstate what the test has and its p-values are too small"
        )
    rows = report.cluster_rows()
    short = [
        row.figure.label for key in HEADLINE_FIGURES if (row := rows.get(key)) is not None and not row.incident.judged
    ]
    if short:
        out.append(
            f"too few values to judge the incident against the baseline: {', '.join(short)} "
            "(a difference could not be significant with so few; widen the windows)"
        )
    return out


#: The figures whose judgement the summary warns about when it cannot be made.
HEADLINE_FIGURES = ("request_rate", "generation_tokens_rate", "mean_prompt_tokens", "e2e_p99", "ttft_p99", "itl_p50")


def _has_histograms(client: PrometheusClient, engine_selector: str, window: Window, extent: Extent) -> bool:
    """Whether Prometheus holds engine latency histograms in the window's last minutes of data
    (a look at its end, not its whole span: a day of bucket series is millions of samples)."""
    last = min(window.end, extent.last)
    found = client.query(histograms_expr(engine_selector, min(last - window.start, HISTOGRAM_LOOK)), last)
    return bool(found and found[0].points and found[0].points[0][1] > 0)


#: How far back from a window's end to look for the engines' histograms.
HISTOGRAM_LOOK = 600.0


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
    """Each engine's primary stage at each step of the range query. A point belongs to the step
    nearest it: Prometheus evaluates at start + k * step as the request wrote them, to the
    millisecond, so a step like 12.0684 s does not land on this grid's floats exactly."""
    times = [start + i * step for i in range(int((end - start) // step) + 1)]
    engines: dict[str, list[str | None]] = {}
    for s in primary:
        row = engines.setdefault(s.labels.get("engine", ""), [None] * len(times))
        for t, v in s.points:
            i = round((t - start) / step)
            if 0 <= i < len(times) and v == 1:
                row[i] = s.labels.get("stage", NONE)
    return Timeline(times, dict(sorted(engines.items())))


def rows_by(rows: Sequence[Row], level: Level) -> Mapping[GroupKey, list[Row]]:
    out: dict[GroupKey, list[Row]] = {}
    for row in rows:
        if row.level == level:
            out.setdefault(row.group, []).append(row)
    return out
