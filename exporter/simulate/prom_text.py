"""Prometheus text as prometheus_client's `generate_latest` writes it, for the simulated engines.

vLLM's writer (vllm_text.py: labels sorted by name, values through prometheus_client's own
`floatToGoString`, counters as `<base>_total` with a `_created` gauge beside every counter, histogram
and summary), with what the P/D texts add: `created=None` leaves the `_created` samples out, as
prometheus_client's multiprocess collector does (SGLang runs it: `PROMETHEUS_MULTIPROC_DIR`), and
a histogram family can hold several labelled series.
"""

from __future__ import annotations

from exporter.simulate.stats import Histogram
from exporter.simulate.vllm_text import Labels, TextWriter

__all__ = ["Labels", "PromWriter"]


class PromWriter(TextWriter):
    """Lines of one exposition, family by family in the order they are written."""

    def __init__(self, created: float | None) -> None:
        super().__init__(0.0)
        self.multiprocess = created is None
        self.created = created or 0.0

    def histogram_samples(self, name: str, labels: Labels, histogram: Histogram) -> None:
        """One labelled series of a histogram family already declared (a family of several)."""
        start, multiprocess = len(self.lines), self.multiprocess
        self.multiprocess = True  # no `_created` per series
        self.histogram(name, "", labels, histogram)
        self.multiprocess = multiprocess
        del self.lines[start : start + 2]  # the family was declared once, before its first series

    def _created(self, base: str, help_: str, label_sets: list[Labels]) -> None:
        if not self.multiprocess:
            super()._created(base, help_, label_sets)
