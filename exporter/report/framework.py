"""The framework's validation table: QPS, P99 latency, GPU utilization, SLA attainment and cost per
query, before and after, with the change and the Mann-Whitney p-value the matrix computes.

The rows are the matrix's own cluster-wide rows (exporter/report/queries.py), picked and named as
the framework's validation step names them: "before" is the baseline window, "after" the after
window where the report has one (`--after`), else the incident.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.report.build import Report
from exporter.report.matrix import Comparison
from exporter.report.render_text import fmt_p, fmt_relative, fmt_value

#: (matrix figure key, the framework's name for it)
ROWS = (
    ("request_rate", "QPS"),
    ("e2e_p99", "P99 latency (end to end)"),
    ("gpu_utilization", "GPU utilization"),
    ("slo_attainment", "SLA attainment"),
    ("cost_per_request", "Cost per query"),
)


@dataclass(frozen=True)
class FrameworkRow:
    key: str
    label: str
    unit: str
    before: float | None
    after: float | None
    change: Comparison | None

    def cells(self) -> dict[str, str]:
        relative = self.change.relative if self.change is not None else None
        p_value = self.change.p_value if self.change is not None else None
        return {
            "label": self.label,
            "before": fmt_value(self.before, self.unit),
            "after": fmt_value(self.after, self.unit),
            "change": fmt_relative(relative),
            "p": fmt_p(p_value),
        }

    def as_json(self) -> dict[str, Any]:
        change = self.change
        return {
            "figure": self.key,
            "label": self.label,
            "unit": self.unit,
            "before": self.before,
            "after": self.after,
            "absolute": None if change is None else change.absolute,
            "relative": None if change is None else change.relative,
            "p_value": None if change is None else change.p_value,
        }


def after_window(report: Report) -> str:
    return "after" if report.window("after") is not None else "incident"


def framework_table(report: Report) -> list[FrameworkRow]:
    rows = report.cluster_rows()
    after = after_window(report)
    out = []
    for key, label in ROWS:
        row = rows.get(key)
        if row is None:
            out.append(FrameworkRow(key, label, "", None, None, None))
            continue
        change = row.after if after == "after" else row.incident
        out.append(FrameworkRow(key, label, row.figure.unit, row.value("baseline"), row.value(after), change))
    return out
