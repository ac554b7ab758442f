"""What the HTML and Markdown pages show, computed once for both templates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.report.build import Report
from exporter.report.framework import after_window, framework_table
from exporter.report.matrix import Row
from exporter.report.render_json import iso
from exporter.report.render_text import fmt_p, fmt_relative, fmt_value

SIGNIFICANT = 0.05


@dataclass(frozen=True)
class Cell:
    text: str
    samples: int


def _direction(row: Row, relative: float | None) -> str:
    """`worse` / `better` / `` for colouring, from the figure's better direction."""
    if relative is None or not row.figure.better or abs(relative) < 0.05:
        return ""
    up = relative > 0
    return "better" if up == (row.figure.better == "higher") else "worse"


def table(report: Report, level: str) -> list[dict[str, Any]]:
    names = [w.name for w in report.windows]
    out = []
    for row in report.rows:
        if row.level != level:
            continue
        cells = {
            name: Cell(fmt_value(v.mean if v else None, row.figure.unit), v.samples if v else 0)
            for name in names
            for v in [row.values.get(name)]
        }
        item: dict[str, Any] = {
            "cells_text": [f"{cells[n].text} ({cells[n].samples})" for n in names],
            "group": " / ".join(part for part in row.group if part) or "(all)",
            "label": row.figure.label,
            "cells": cells,
            "change": fmt_relative(row.incident.relative),
            "p": fmt_p(row.incident.p_value),
            "significant": row.incident.p_value is not None and row.incident.p_value < SIGNIFICANT,
            "direction": _direction(row, row.incident.relative),
        }
        if row.after is not None:
            item["after_change"] = fmt_relative(row.after.relative)
            item["after_direction"] = _direction(row, row.after.relative)
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
    return {
        "walk": walk,
        "r": report,
        "names": names,
        "windows": [(w.name, iso(w.start), iso(w.end)) for w in report.windows],
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
        "has_after": "after" in names,
    }
