"""The SLO pipeline step: one object the composition root calls once per published snapshot."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from exporter.model import Metric
from exporter.settings import SloTarget
from exporter.slo.attainment import DIMENSION_FAMILIES, DimensionAttainment, attainment_samples, evaluate
from exporter.slo.evidence import BurnTracker, evidence_lines
from exporter.slo.headroom import CapacityEstimator
from exporter.slo.otlp import RequestStore
from exporter.slo.refusals import Refusals, with_refusals
from exporter.slo.requests import request_samples
from exporter.slo.slices import (
    GATEWAY_FAMILIES,
    GATEWAY_REQUESTS_FAMILY,
    engine_point,
    evaluate_slices,
    gateway_point,
    slice_samples,
)

log = logging.getLogger(__name__)


class SloMonitor:
    """Attainment, goodput and capacity headroom of the configured SLOs, from each snapshot."""

    def __init__(
        self, slos: Sequence[SloTarget], window_seconds: float = 60.0, requests: RequestStore | None = None
    ) -> None:
        self.slos = tuple(slos)
        self.window_seconds = window_seconds
        #: per-request records from the OTLP receiver, when one runs
        self.requests = requests
        self.capacity = CapacityEstimator()
        self.burn = BurnTracker()
        #: requests refused at the door, counted as misses (exporter/slo/refusals.py)
        self.refusals = Refusals(window_seconds)
        #: diagnosis evidence lines per (engine, engine_type, model), from the last snapshot
        self.evidence: dict[tuple[str, str, str], list[str]] = {}
        #: the last snapshot's results, for the diagnosis evidence
        self.latest: list[DimensionAttainment] = []

    def update(self, metrics: Sequence[Metric], now: float) -> list[Metric]:
        if not self.slos and self.requests is None:
            return []
        try:
            self.latest = with_refusals(evaluate(self.slos, metrics), self.refusals.update(metrics, now))
            out = list(attainment_samples(self.latest, self.slos))
            out += slice_samples(evaluate_slices(self.slos, metrics, DIMENSION_FAMILIES, engine_point))
            out += slice_samples(
                evaluate_slices(self.slos, metrics, GATEWAY_FAMILIES, gateway_point, GATEWAY_REQUESTS_FAMILY)
            )
            out += self.capacity.update(self.slos, metrics, now)
            self.evidence = evidence_lines(self.latest, self.burn.update(self.latest, now), out, metrics)
            if self.requests is not None:
                out += request_samples(self.slos, self.requests, now, self.window_seconds)
        except Exception:  # a bug here must cost the SLO families, never the snapshot
            log.exception("slo: attainment or capacity failed; llm_slo_* and llm_capacity_* left out")
            return []
        return out
