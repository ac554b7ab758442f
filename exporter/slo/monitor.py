"""The SLO pipeline step: one object the composition root calls once per published snapshot."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from exporter.model import Metric
from exporter.settings import SloTarget
from exporter.slo.attainment import DimensionAttainment, attainment_samples, evaluate
from exporter.slo.headroom import CapacityEstimator

log = logging.getLogger(__name__)


class SloMonitor:
    """Attainment, goodput and capacity headroom of the configured SLOs, from each snapshot."""

    def __init__(self, slos: Sequence[SloTarget]) -> None:
        self.slos = tuple(slos)
        self.capacity = CapacityEstimator()
        #: the last snapshot's results, for the diagnosis evidence
        self.latest: list[DimensionAttainment] = []

    def update(self, metrics: Sequence[Metric], now: float) -> list[Metric]:
        if not self.slos:
            return []
        try:
            self.latest = evaluate(self.slos, metrics)
            out = list(attainment_samples(self.latest, self.slos))
            out += self.capacity.update(self.slos, metrics, now)
        except Exception:  # a bug here must cost the SLO families, never the snapshot
            log.exception("slo: attainment or capacity failed; llm_slo_* and llm_capacity_* left out")
            return []
        return out
