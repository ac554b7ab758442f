"""The report as JSON for automation; the schema is documented in docs/report.md."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from exporter.report.build import Report
from exporter.report.framework import after_window, framework_table
from exporter.report.matrix import Comparison
from exporter.report.stats import WindowValue

SCHEMA = "llm-bottleneck-exporter/report/v1"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _value(value: WindowValue | None) -> dict[str, Any]:
    if value is None:
        return {"value": None, "samples": 0}
    out: dict[str, Any] = {"value": value.mean, "samples": value.samples}
    if value.unread:
        out["unread"] = value.unread
    return out


def _comparison(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "absolute": c.absolute,
        "relative": c.relative,
        "p_value": c.p_value,
        "judged": c.judged,
        "significant": c.significant,
    }


def document(report: Report) -> dict[str, Any]:
    names = [w.name for w in report.windows]
    return {
        "schema": SCHEMA,
        "generated_at": iso(report.generated_at),
        "prometheus": report.prometheus,
        "selector": "{" + report.selector + "}",
        "scrape_interval_seconds": report.timing.scrape_interval,
        "step_seconds": report.step,
        "rate_interval": report.rate_interval,
        "exporter_window_seconds": report.timing.exporter_window,
        "windows": {
            w.name: {
                "start": iso(w.start),
                "end": iso(w.end),
                "data_first": iso(report.extents[w.name].first),
                "data_last": iso(report.extents[w.name].last),
            }
            for w in report.windows
        },
        "warnings": report.warnings,
        "primary": {
            "cluster": dict(report.primary),
            "engines": [
                {
                    "engine": engine,
                    "model": report.engine_models.get(engine, ""),
                    "windows": {
                        name: (
                            {
                                "primary": stages.primary,
                                "primary_share": round(stages.primary_share.get(stages.primary, 0.0), 4),
                                "steps": stages.steps,
                                "scores": {k: round(v, 4) for k, v in sorted(stages.scores.items())},
                            }
                            if (stages := report.stages[name].get(engine)) is not None
                            else None
                        )
                        for name in names
                    },
                }
                for engine in sorted({e for by_engine in report.stages.values() for e in by_engine})
            ],
        },
        "matrix": [
            {
                "level": row.level,
                "cluster": row.group[0],
                "model": row.group[1],
                "engine": row.group[2],
                "figure": row.figure.key,
                "label": row.figure.label,
                "unit": row.figure.unit,
                "windows": {name: _value(row.values.get(name)) for name in names},
                "incident_vs_baseline": _comparison(row.incident),
                "after_vs_baseline": _comparison(row.after),
            }
            for row in report.rows
        ],
        "walk": [
            {
                "stage": step.stage,
                "verdict": step.verdict,
                "scores": dict(step.scores),
                "primary_share": dict(step.shares),
                "evidence": step.evidence,
                "not": step.not_this,
            }
            for step in report.walk
        ],
        "framework_table": {
            "after_window": after_window(report),
            "rows": [row.as_json() for row in framework_table(report)],
        },
        "causes": [asdict(c) for c in report.causes],
        "actions": report.actions,
        "fix": None if report.fix is None else asdict(report.fix),
    }


def render_json(report: Report) -> str:
    return json.dumps(document(report), indent=2, allow_nan=False) + "\n"
