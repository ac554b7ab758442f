"""Backfill a real Prometheus with the exporter's own snapshots, for the report's tests and bench.

Snapshots (from the simulator's offline mode with `exporter_view=True`, or built by the bench)
are written as OpenMetrics with timestamps, turned into TSDB blocks by `promtool tsdb
create-blocks-from openmetrics`, and a Prometheus is started on that data directory: the report
then reads a Prometheus as it would in production, hours of data in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from exporter.catalogue import CATALOGUE
from exporter.model import Metric, QuantileSummary, Sample
from tests.integration.monitoring_stack import Prometheus, run_tool

SCRAPE_LABELS = {"job": "llm-bottleneck-exporter", "cluster": "sim-cluster"}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_openmetrics(
    out: IO[str],
    snapshots: Iterable[tuple[float, Sequence[Metric]]],
    extra_labels: Mapping[str, str],
    engine: Mapping[str, Sequence[tuple[float, Mapping[str, str], float]]] | None = None,
) -> int:
    """OpenMetrics text of every (unix time, metrics) pair, family by family and series by series
    (the format forbids interleaving), and of the engines' own series as a Prometheus scraping
    them would store them (`engine`: sample name -> (time, labels, value); typed `unknown`, one
    family per sample name, so a histogram's buckets need no _count or _sum beside them);
    returns the number of sample lines."""
    by_family: dict[str, dict[tuple[tuple[str, str], ...], list[tuple[float, Metric]]]] = {}
    for t, metrics in snapshots:
        for m in metrics:
            labels = {**m.labels, **extra_labels}
            by_family.setdefault(m.name, {}).setdefault(tuple(sorted(labels.items())), []).append((t, m))
    lines = 0
    for name, series in by_family.items():
        kind = CATALOGUE[name].type
        family = name[: -len("_total")] if kind == "counter" else name
        out.write(f"# TYPE {family} {kind}\n")
        for key, points in series.items():
            labels = dict(key)
            for t, m in points:
                ts = f"{t:.3f}"
                if isinstance(m, QuantileSummary):
                    for q, v in m.quantiles:
                        out.write(f"{name}{_labels({**labels, 'quantile': f'{q:g}'})} {_number(v)} {ts}\n")
                    out.write(f"{name}_count{_labels(labels)} {_number(m.count)} {ts}\n")
                    out.write(f"{name}_sum{_labels(labels)} {_number(m.sum)} {ts}\n")
                    lines += len(m.quantiles) + 2
                elif isinstance(m, Sample):
                    out.write(f"{name}{_labels(labels)} {_number(m.value)} {ts}\n")
                    lines += 1
    for name, points in (engine or {}).items():
        out.write(f"# TYPE {name} unknown\n")
        by_series: dict[str, list[tuple[float, float]]] = {}
        for t, labels, value in points:
            by_series.setdefault(_labels(labels), []).append((t, value))
        for text, values in by_series.items():
            out.writelines(f"{name}{text} {_number(v)} {t:.3f}\n" for t, v in sorted(values))
            lines += len(values)
    out.write("# EOF\n")
    return lines


def backfilled_prometheus(openmetrics: Path, workdir: Path, timeout: float = 600) -> Prometheus:
    """A Prometheus whose TSDB holds the blocks promtool made of `openmetrics`."""
    data = workdir / "prometheus-data"
    data.mkdir(parents=True, exist_ok=True)
    done = run_tool(
        "promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data), timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"promtool create-blocks-from openmetrics failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return Prometheus({"global": {"scrape_interval": "15s"}}, workdir)
