"""Render a Snapshot as Prometheus text (0.0.4) or OpenMetrics with prometheus_client.

The custom collector builds metric families fresh from the snapshot, as prometheus_client intends
for exporters that proxy other systems: no global metric objects, nothing to reset. That collector
is the reference; bodies are written by exporter.render, which matches it byte for byte at a tenth
of the cost. Every format is rendered when a snapshot is published, so a scrape is a dictionary
lookup.
"""

from __future__ import annotations

import gzip
import platform
import threading
from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric as PromMetric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_CONTENT_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector, CollectorRegistry

from exporter import __version__
from exporter.catalogue import CATALOGUE
from exporter.loop import Snapshot
from exporter.model import Metric, QuantileSummary, Sample
from exporter.render import render_formats

# The text body is format 0.0.4 (docs/design.md#http-endpoints); prometheus_client >= 0.22 names its
# CONTENT_TYPE_LATEST "version=1.0.0" (the UTF-8 names format) for the same bytes.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _family_name(name: str, type_: str) -> str:
    # prometheus_client wants counter families named without `_total` and adds it to samples.
    return name[: -len("_total")] if type_ == "counter" and name.endswith("_total") else name


def snapshot_metrics(snapshot: Snapshot) -> list[Metric]:
    """The snapshot's own samples plus the exporter's self-observability samples."""
    metrics: list[Metric] = list(snapshot.metrics)
    for status in snapshot.statuses:
        labels = {"source": status.source, "target": status.target}
        metrics.append(Sample("llm_exporter_source_up", labels, 1.0 if status.up else 0.0))
        metrics.append(Sample("llm_exporter_collect_duration_seconds", labels, status.duration_seconds))
    for (source, target, reason), count in sorted(snapshot.error_counts.items()):
        metrics.append(
            Sample(
                "llm_exporter_source_errors_total", {"source": source, "target": target, "reason": reason}, float(count)
            )
        )
    metrics.append(
        Sample("llm_exporter_build_info", {"version": __version__, "python_version": platform.python_version()}, 1.0)
    )
    return metrics


def families(metrics: Iterable[Metric]) -> Iterator[PromMetric]:
    """Group normalized metrics into prometheus_client families, in catalogue order."""
    grouped: dict[str, list[Metric]] = {}
    for metric in metrics:
        grouped.setdefault(metric.name, []).append(metric)
    for name, spec in CATALOGUE.items():
        members = grouped.pop(name, None)
        if not members:
            continue
        family = PromMetric(_family_name(name, spec.type), spec.help, spec.type)
        for member in members:
            if isinstance(member, QuantileSummary):
                for quantile, value in member.quantiles:
                    family.add_sample(name, {**member.labels, "quantile": repr(quantile)}, value)
                family.add_sample(name + "_count", dict(member.labels), member.count)
                family.add_sample(name + "_sum", dict(member.labels), member.sum)
            else:
                family.add_sample(name, dict(member.labels), member.value)
        yield family
    if grouped:
        raise KeyError(f"families missing from the catalogue: {sorted(grouped)}")


class SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[PromMetric]:
        if self.snapshot is not None:
            yield from families(snapshot_metrics(self.snapshot))


class RenderedSnapshot:
    """The latest snapshot in every format a scraper asks for (text 0.0.4 and OpenMetrics, each
    plain and gzip'd), all prepared when the snapshot is published: a scrape is a dictionary
    lookup, never a render, even the first one after a new snapshot (Prometheus scrapes once per
    interval, so it always is the first one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._cache: dict[tuple[bool, bool], bytes] = _prepared(None)

    def publish(self, snapshot: Snapshot) -> None:
        prepared = _prepared(snapshot)
        with self._lock:
            self._snapshot = snapshot
            self._cache = prepared

    def body(self, openmetrics: bool, gzipped: bool) -> tuple[bytes, str]:
        content_type = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
        with self._lock:
            return self._cache[(openmetrics, gzipped)], content_type


#: gzip level for the prepared bodies: level 1 compresses an exposition body to within a few per
#: cent of level 6 in a third of the time (tests/perf/bench_render.py prints both), and every
#: snapshot is compressed twice whether or not anyone asks for gzip
GZIP_LEVEL = 1


def _prepared(snapshot: Snapshot | None) -> dict[tuple[bool, bool], bytes]:
    if snapshot is None:
        text, openmetrics = b"", b"# EOF\n"
    else:
        text, openmetrics = render_formats(snapshot_metrics(snapshot))
    return {
        (False, False): text,
        (True, False): openmetrics,
        (False, True): gzip.compress(text, compresslevel=GZIP_LEVEL),
        (True, True): gzip.compress(openmetrics, compresslevel=GZIP_LEVEL),
    }


def _render(snapshot: Snapshot | None, openmetrics: bool) -> bytes:
    """prometheus_client's own rendering of a snapshot: the reference `render_formats` must match
    byte for byte (tests/unit/test_exposition_render.py), and the baseline of bench_render.py."""
    registry = CollectorRegistry(auto_describe=False)
    collector = SnapshotCollector()
    collector.snapshot = snapshot
    registry.register(collector)
    return generate_openmetrics(registry) if openmetrics else generate_latest(registry)


def render_text(snapshot: Snapshot) -> bytes:
    """Text format 0.0.4 of one snapshot, for `once`."""
    return render_formats(snapshot_metrics(snapshot))[0]
