"""Prometheus text as prometheus_client's `generate_latest` writes it, for the simulated engines.

Labels sorted by name, values through prometheus_client's own `floatToGoString`, counters as
`<base>_total` with a `_created` gauge beside every counter, histogram and summary, as a process
with prometheus_client's default registry prints them (vLLM). `created=None` leaves the `_created`
samples out, as prometheus_client's multiprocess collector does (SGLang runs it:
`PROMETHEUS_MULTIPROC_DIR`).
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.utils import floatToGoString

from exporter.simulate.stats import Histogram

Labels = dict[str, str]


class PromWriter:
    """Lines of one exposition, family by family in the order they are written."""

    def __init__(self, created: float | None) -> None:
        self.lines: list[str] = []
        self.created = created

    def family(self, name: str, help_: str, type_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {type_}")

    def sample(self, name: str, labels: Labels, value: float) -> None:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        self.lines.append(f"{name}{{{body}}} {floatToGoString(value)}" if body else f"{name} {floatToGoString(value)}")

    def gauge(self, name: str, help_: str, series: Sequence[tuple[Labels, float]]) -> None:
        self.family(name, help_, "gauge")
        for labels, value in series:
            self.sample(name, labels, value)

    def counter(self, base: str, help_: str, series: Sequence[tuple[Labels, float]]) -> None:
        self.family(base + "_total", help_, "counter")
        for labels, value in series:
            self.sample(base + "_total", labels, value)
        self._created(base, help_, [labels for labels, _ in series])

    def histogram(self, name: str, help_: str, labels: Labels, histogram: Histogram) -> None:
        self.family(name, help_, "histogram")
        self.histogram_samples(name, labels, histogram)
        self._created(name, help_, [labels])

    def histogram_samples(self, name: str, labels: Labels, histogram: Histogram) -> None:
        """One labelled series of a histogram family already declared (a family of several)."""
        for bound, count in zip((*histogram.bounds, float("inf")), histogram.cumulative()):
            self.sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, count)
        self.sample(name + "_count", labels, histogram.count)
        self.sample(name + "_sum", labels, histogram.sum)

    def summary(self, name: str, help_: str, labels: Labels, count: float, total: float) -> None:
        self.family(name, help_, "summary")
        self.sample(name + "_count", labels, count)
        self.sample(name + "_sum", labels, total)
        self._created(name, help_, [labels])

    def _created(self, base: str, help_: str, label_sets: list[Labels]) -> None:
        if self.created is None:
            return
        self.family(base + "_created", help_, "gauge")
        for labels in label_sets:
            self.sample(base + "_created", labels, self.created)
