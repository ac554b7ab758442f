"""The report's plots as SVG text, drawn with matplotlib.

Figures are built with matplotlib's object API (`Figure`, no pyplot state, no GUI backend) and
written as SVG with the glyphs as paths, so a page that inlines them needs no font, script or
request at view time. Every time axis shades the windows, in the same colours as the tables.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.textpath import TextPath
from matplotlib.ticker import LogFormatter

from exporter.report.build import Report, Timeline
from exporter.report.prometheus import Series
from exporter.report.windows import Window
from exporter.stages import ENGINE, of

WINDOW_COLOURS = {"baseline": "#2e7d32", "incident": "#c62828", "after": "#1565c0"}
#: Steps where no stage was primary; each stage is drawn in its record's colour (the dashboards').
NONE_COLOUR = "#e0e0e0"
NO_DATA_COLOUR = "#ffffff"


def stage_colours() -> dict[str, str]:
    """Primary-stage value -> colour on the timeline: the engine stages' own colours, and none."""
    return {"none": NONE_COLOUR, **{stage.id: stage.hex for stage in of(ENGINE)}}


@dataclass(frozen=True)
class Plot:
    key: str
    title: str
    svg: str


def line_points(series: Series) -> tuple[list[datetime], list[float]]:
    """Times and values, with a gap (NaN) where Prometheus returned no point for a step or more, so
    a line does not draw across missing data as if it had been there."""
    points = series.points
    step = min((b[0] - a[0] for a, b in zip(points, points[1:])), default=0.0)
    times, values = [], []
    for i, (t, v) in enumerate(points):
        if i and step and t - points[i - 1][0] > 1.5 * step:
            times.append(datetime.fromtimestamp(t - step, UTC))
            values.append(math.nan)
        times.append(datetime.fromtimestamp(t, UTC))
        values.append(v if math.isfinite(v) else math.nan)
    return times, values


#: Window names on the plots: their font size (points) and the gap kept between two of them.
LABEL_SIZE = 8
LABEL_GAP = 0.006  # axes fraction


def label_rows(labels: Sequence[tuple[float, float]]) -> list[tuple[float, int]]:
    """(x, row) for labels given as (x, width) in axes fraction: each label starts at its x (moved
    left when it would run off the right edge) on the first row, from the top, where it overlaps
    no label already there, so no two labels ever overlap however narrow their windows."""
    placed: list[list[tuple[float, float]]] = []
    out = []
    for x, width in labels:
        x = max(0.0, min(x, 1.0 - width))
        row = next(
            (
                i
                for i, taken in enumerate(placed)
                if all(x >= b + LABEL_GAP or x + width + LABEL_GAP <= a for a, b in taken)
            ),
            len(placed),
        )
        if row == len(placed):
            placed.append([])
        placed[row].append((x, x + width))
        out.append((x, row))
    return out


def _label_width(text: str, axes_inches: float) -> float:
    """The text's width as a fraction of an axes `axes_inches` wide (glyph outlines, no renderer)."""
    return TextPath((0, 0), text, size=LABEL_SIZE).get_extents().width / 72 / axes_inches


def _axes(title: str, windows: Sequence[Window], height: float = 2.3):  # noqa: ANN202 - (Figure, Axes)
    figure = Figure(figsize=(9.5, height), dpi=96)
    # The same margins on every plot (not a layout engine's per-plot fit), so the windows line up
    # down the page; the left one holds the timeline's engine names.
    left, right, top, bottom = 0.17, 0.985, 0.88, 0.2 if height < 3 else 0.12
    figure.subplots_adjust(left=left, right=right, top=top, bottom=bottom)
    ax = figure.add_subplot()
    ax.set_title(title, loc="left", fontsize=10)
    start, end = (
        date2num(datetime.fromtimestamp(t, UTC)) for t in (min(w.start for w in windows), max(w.end for w in windows))
    )
    ax.set_xlim(start, end)  # every plot spans the windows alike
    ordered = sorted(windows, key=lambda w: w.start)
    axes_inches = 9.5 * (right - left)
    spans = [
        (date2num(datetime.fromtimestamp(w.start, UTC)), date2num(datetime.fromtimestamp(w.end, UTC))) for w in ordered
    ]
    for window, (a, b) in zip(ordered, spans):
        ax.axvspan(a, b, color=WINDOW_COLOURS.get(window.name, "#888888"), alpha=0.10, linewidth=0)
    names = [f" {w.name}" for w in ordered]
    wanted = [((a - start) / (end - start), _label_width(name, axes_inches)) for name, (a, _) in zip(names, spans)]
    line = 1.3 * LABEL_SIZE / 72 / (height * (top - bottom))  # one line of labels, in axes fraction
    for window, name, (x, row) in zip(ordered, names, label_rows(wanted)):
        ax.text(
            x,
            1.0 - row * line,
            name,
            transform=ax.transAxes,
            va="top",
            fontsize=LABEL_SIZE,
            color=WINDOW_COLOURS.get(window.name, "#444444"),
            # Over the timeline's bars and the lines, legible: drawn last on a pale ground.
            zorder=5,
            bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 0.3},
        )
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.grid(True, alpha=0.3, linewidth=0.5)
    ax.tick_params(labelsize=8)
    return figure, ax


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    # The page inlines the element: the XML prolog and DOCTYPE belong to a standalone file only,
    # and the RDF metadata block (creator, format) is nine copies of links nobody follows.
    text = text[text.index("<svg") :]
    return _METADATA.sub("", text, count=1)


_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)


def _lines(
    report: Report, key: str, title: str, keys: Sequence[tuple[str, str]], ylabel: str, scale: float = 1.0
) -> Plot | None:
    figure, ax = _axes(title, report.windows)
    drawn = 0
    for figure_key, label in keys:
        for s in report.plots.get(figure_key, []):
            times, values = line_points(s)
            ax.plot(times, [v * scale for v in values], label=label, linewidth=1.2)
            drawn += 1
    if not drawn:
        return None
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper right")
    return Plot(key, title, _svg(figure))


class PlainLogFormatter(LogFormatter):
    """A log axis's ticks as numbers are written ("20", "0.1"), not "2 × 10¹" or "1e-01": which
    ticks carry a label stays matplotlib's choice (minor ones only where the axis spans about a
    decade or less)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def _band(report: Report, key: str, title: str, prefix: str) -> Plot | None:
    """P50 line, the P50-P99 band and the P95 line: the tail's width shows, not only its middle."""
    figure, ax = _axes(title, report.windows)
    p50, p95, p99 = (report.plots.get(f"{prefix}_p{q}", []) for q in (50, 95, 99))
    if not p50 and not p99:
        return None
    for low, high in zip(p50, p99):
        times, lows = line_points(low)
        highs_by_time = dict(high.points)
        _, highs = line_points(Series(low.labels, [(t, highs_by_time.get(t, math.nan)) for t, _ in low.points]))
        ax.fill_between(times, lows, highs, alpha=0.25, color="#c62828", linewidth=0, label="P50–P99")
    for series, label, style in ((p50, "P50", "-"), (p95, "P95", "--"), (p99, "P99", ":")):
        for s in series:
            times, values = line_points(s)
            ax.plot(times, values, style, label=label, linewidth=1.1, color="#b71c1c")
    ax.set_ylabel("seconds", fontsize=8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(PlainLogFormatter())
    ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))
    ax.legend(fontsize=8, loc="upper right")
    return Plot(key, title, _svg(figure))


def _timeline_plot(report: Report, timeline: Timeline | None) -> Plot | None:
    if timeline is None or not timeline.engines or len(timeline.times) < 2:
        return None
    rows = len(timeline.engines)
    figure, ax = _axes(
        "Primary stage per engine (llm_bottleneck_primary)", report.windows, height=1.2 + 0.22 * min(rows, 40)
    )
    step = timeline.times[1] - timeline.times[0]
    colours = stage_colours()
    for y, stages in enumerate(timeline.engines.values()):
        # Runs of one stage as one bar each: a day of 32 engines is a few hundred rectangles,
        # not one per step.
        spans: dict[str, list[tuple[float, float]]] = {}
        run_start, run_stage = timeline.times[0], stages[0]
        for t, stage in [*zip(timeline.times[1:], stages[1:]), (timeline.times[-1] + step, "<end>")]:
            if stage != run_stage:
                start = date2num(datetime.fromtimestamp(run_start, UTC))
                spans.setdefault(run_stage or "", []).append((start, (t - run_start) / 86400))
                run_start, run_stage = t, stage
        for stage, items in spans.items():
            colour = colours.get(stage, NO_DATA_COLOUR) if stage else NO_DATA_COLOUR
            # broken_barh takes (start, width) in the axis' units: days since the epoch on a date axis.
            ax.broken_barh(items, (y - 0.4, 0.8), facecolors=colour, linewidth=0)
    names = list(timeline.engines)
    ax.set_yticks(range(rows), names if rows <= 40 else [""] * rows, fontsize=7)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.invert_yaxis()
    present = {s for stages in timeline.engines.values() for s in stages if s}
    handles = [Patch(color=colour, label=s) for s, colour in colours.items() if s in present]
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, frameon=False)
    return Plot("timeline", "Stage timeline", _svg(figure))


def plots(report: Report) -> list[Plot]:
    made = [
        _timeline_plot(report, report.timeline),
        _band(report, "e2e", "End-to-end latency, P50–P99 (cluster, worst model)", "e2e"),
        _band(report, "ttft", "Time to first token, P50–P99 (cluster, worst model)", "ttft"),
        _lines(report, "throughput", "Request rate", [("request_rate", "requests/s")], "req/s"),
        _lines(report, "tokens", "Generation tokens/s", [("generation_tokens_rate", "tokens/s")], "tok/s"),
        _lines(
            report,
            "prompt",
            "Mean prompt tokens per request",
            [("mean_prompt_tokens", "prompt tokens / request")],
            "tokens",
        ),
        _lines(
            report,
            "gpu",
            "GPU: utilization, SM active, DRAM active",
            [("gpu_utilization", "utilization"), ("sm_active", "SM active"), ("dram_active", "DRAM active")],
            "%",
            100.0,
        ),
        _lines(report, "kv", "KV-cache usage (max over engines)", [("kv_usage_max", "KV usage")], "%", 100.0),
        _lines(report, "waiting", "Waiting requests (sum)", [("waiting", "waiting")], "requests"),
    ]
    return [p for p in made if p is not None]
