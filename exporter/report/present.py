"""What the HTML and Markdown pages show, computed once for both templates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exporter.report.build import Report
from exporter.report.framework import after_window, framework_table
from exporter.report.matrix import Comparison, Row
from exporter.report.render_text import fmt_change, fmt_interval, fmt_p, fmt_value
from exporter.report.stats import WindowValue

#: A change smaller than this is no news, whatever the test says.
NOTABLE = 0.05


@dataclass(frozen=True)
class Cell:
    text: str
    samples: int
    #: why there is no value although the window holds data ("" when there is one, or no data)
    unread: str = ""


def tone(row: Row, comparison: Comparison | None) -> str:
    """`good` / `bad` / `` for colouring a change, by what the figure means.

    A change is good or bad only when the test judged it significant (a change the counts cannot
    tell from noise, or an artefact of a window, is no news) and it is notable, and only for a
    figure that has a better direction (latency lower, throughput higher); the request mix and
    utilization stay neutral.
    """
    if comparison is None or not comparison.significant or not row.figure.better:
        return ""
    if comparison.relative is not None and abs(comparison.relative) < NOTABLE:
        return ""
    if comparison.absolute is None or comparison.absolute == 0:
        return ""
    return "good" if (comparison.absolute > 0) == (row.figure.better == "higher") else "bad"


def _clock(seconds: float) -> str:
    """A sample's time of day to the second (the dates are the window's)."""
    return datetime.fromtimestamp(round(seconds), UTC).strftime("%H:%M:%SZ")


def _moment(seconds: float) -> str:
    """A window's edge to the second, as people read it (the JSON keeps the fraction)."""
    return datetime.fromtimestamp(round(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _p(comparison: Comparison) -> str:
    if comparison.judged or comparison.samples == (0, 0):
        return fmt_p(comparison.p_value)
    return "too few (n={}, {})".format(*comparison.samples)


def _cell(value: WindowValue | None, unit: str) -> Cell:
    if value is None:
        return Cell(fmt_value(None, unit), 0)
    if value.mean is None and value.unread:
        return Cell("not read", 0, value.unread)
    return Cell(fmt_value(value.mean, unit), value.samples)


def table(report: Report, level: str) -> list[dict[str, Any]]:
    names = [w.name for w in report.windows]
    out = []
    for row in report.rows:
        if row.level != level:
            continue
        cells = {name: _cell(row.values.get(name), row.figure.unit) for name in names}
        unit = row.figure.unit
        item: dict[str, Any] = {
            "cells_text": [f"{cells[n].text} (n={cells[n].samples})" for n in names],
            "group": " / ".join(part for part in row.group if part) or "(all)",
            "label": row.figure.label,
            "cells": cells,
            "change": fmt_change(row.incident.absolute, row.incident.relative, unit),
            "p": _p(row.incident),
            "judged": row.incident.judged,
            "significant": row.incident.significant,
            "tone": tone(row, row.incident),
        }
        if row.after is not None:
            item["after_change"] = fmt_change(row.after.absolute, row.after.relative, unit)
            item["after_tone"] = tone(row, row.after)
        out.append(item)
    return out


def context(report: Report, images: list[dict[str, str]]) -> dict[str, Any]:
    names = [w.name for w in report.windows]
    engines = sorted({e for by in report.stages.values() for e in by})
    walk = [
        {
            "stage": s.stage,
            "scores_text": ["no data" if s.scores.get(n) is None else f"{s.scores[n]:.2f}" for n in names],
            "verdict": s.verdict,
            "evidence": s.evidence,
            "not_this": s.not_this,
        }
        for s in report.walk
    ]
    explaining = [c for c in report.causes if c.explains]
    return {
        "walk": walk,
        "r": report,
        "names": names,
        "windows": [
            (
                w.name,
                _moment(w.start),
                _moment(w.end),
                _clock(report.extents[w.name].first),
                _clock(report.extents[w.name].last),
            )
            for w in report.windows
        ],
        "explaining": explaining,
        "other_changes": [c for c in report.causes if not c.explains and c.window == "incident"],
        "fix_changes": [c for c in report.causes if c.window == "after"],
        "images": images,
        "cluster": table(report, "cluster"),
        "models": table(report, "model"),
        "engines_table": table(report, "engine"),
        "engines": [
            (
                e,
                report.engine_models.get(e, ""),
                [(n, s.primary if (s := report.stages[n].get(e)) else None) for n in names],
            )
            for e in engines
        ],
        "framework": [row.cells() for row in framework_table(report)],
        "framework_after": after_window(report),
        "fmt_value": fmt_value,
        "fmt_interval": fmt_interval,
        "fmt_p": fmt_p,
        "has_after": "after" in names,
    }
