"""The rows each benchmark prints for docs/performance.md's table, all in one format.

Every script in tests/perf/ ends its output with its rows of that one table, so the document is
those rows pasted together, never figures copied by hand:

    | benchmark | figure | this tree | reference (same run) | ratio | budget | verdict |

The reference is what the script ran beside this tree in the same process or run (a baseline
commit, prometheus_client, node_exporter, the same server without the load); the ratio is this
tree over the reference, so below 1 is better for a cost. On a shared machine the ratio is the
figure to read: both sides saw the same load.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

HEADER = (
    "| benchmark | figure | this tree | reference (same run) | ratio | budget | verdict |\n"
    "|---|---|---:|---:|---:|---|---|"
)


@dataclass(frozen=True)
class Row:
    figure: str
    value: float | None
    unit: str = ""
    reference: float | None = None
    budget: str = ""
    #: whether the budget holds; None where there is none
    ok: bool | None = None


def machine() -> str:
    """The machine and its load as the figures were taken."""
    one, five, fifteen = os.getloadavg()
    return f"{platform.machine()}, {os.cpu_count()} CPUs, load average {one:.1f} / {five:.1f} / {fifteen:.1f}"


def number(value: float | None, unit: str = "") -> str:
    if value is None or value != value:
        return "—"
    magnitude = abs(value)
    whole = magnitude >= 100 or (magnitude >= 10 and float(value).is_integer())
    text = f"{value:,.0f}" if whole else f"{value:.1f}" if magnitude >= 10 else f"{value:.2f}"
    if magnitude and magnitude < 0.01:
        text = f"{value:.4f}"
    return f"{text} {unit}".strip()


def line(benchmark: str, row: Row) -> str:
    ratio = "—"
    if row.value is not None and row.reference:
        ratio = f"{row.value / row.reference:.2f}×"
    verdict = "" if row.ok is None else "holds" if row.ok else "MISSED"
    cells = (
        benchmark,
        row.figure,
        number(row.value, row.unit),
        number(row.reference, row.unit),
        ratio,
        row.budget,
        verdict,
    )
    return "| " + " | ".join(cells) + " |"


def print_rows(benchmark: str, rows: list[Row], reference: str = "") -> None:
    """The script's rows of docs/performance.md, after a line naming the machine and the reference."""
    print()
    print(f"rows for docs/performance.md ({machine()}" + (f"; reference: {reference}" if reference else "") + "):")
    print(HEADER)
    for row in rows:
        print(line(benchmark, row))
