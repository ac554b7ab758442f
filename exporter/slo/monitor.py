"""The SLO pipeline step: one object the composition root calls once per published snapshot.

Per snapshot: each SLO's attainment at every measuring point (the engines', the gateways', the
prober's), the capacity headroom, and the decisions made from it (docs/capacity.md): replicas to
reach the SLO, the concurrency to run at, what a request costs, with the gap between the
client-side and the engine-side attainment put on the part of the path that holds it, and an
outside planner's figures beside ours.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from exporter.model import Metric
from exporter.settings import CapacitySettings, GatewayTarget, ProbeTarget, SloTarget
from exporter.slo.attainment import DIMENSION_FAMILIES, DimensionAttainment, attainment_samples, evaluate
from exporter.slo.concurrency import ConcurrencyAdvice, advise
from exporter.slo.concurrency import samples as concurrency_samples
from exporter.slo.cost import EngineCost, MixWindow, costs
from exporter.slo.evidence import BurnTracker, evidence_lines
from exporter.slo.gap import Gap, explain
from exporter.slo.headroom import CapacityEstimator
from exporter.slo.legs import NotJudged, not_judged
from exporter.slo.otlp import RequestStore
from exporter.slo.planners import compare
from exporter.slo.points import GATEWAY_FAMILIES, PathLayout, evaluate_client_side, gateway_covers
from exporter.slo.refusals import Refusals, with_refusals
from exporter.slo.replicas import ReplicaPlanner, estimates
from exporter.slo.requests import request_samples
from exporter.slo.slices import engine_point, evaluate_slices, slice_samples

log = logging.getLogger(__name__)


class SloMonitor:
    """Attainment, goodput, capacity headroom and the decisions of the configured SLOs."""

    def __init__(
        self,
        slos: Sequence[SloTarget],
        window_seconds: float = 60.0,
        requests: RequestStore | None = None,
        capacity: CapacitySettings | None = None,
        gateways: Sequence[GatewayTarget] = (),
        probes: Sequence[ProbeTarget] = (),
    ) -> None:
        self.slos = tuple(slos)
        self.window_seconds = window_seconds
        #: per-request records from the OTLP receiver, when one runs
        self.requests = requests
        self.settings = capacity or CapacitySettings()
        self.layout = PathLayout.of(gateways, probes)
        self.capacity = CapacityEstimator()
        self.burn = BurnTracker()
        #: requests refused at the door, counted as misses at their measuring point (refusals.py)
        self.refusals = Refusals(window_seconds)
        self.replicas = ReplicaPlanner(self.settings, window_seconds)
        self.mix = MixWindow(window_seconds)
        #: diagnosis evidence lines and actions per (engine, engine_type, model), from the last snapshot
        self.evidence: dict[tuple[str, str, str], list[str]] = {}
        self.actions: dict[tuple[str, str, str], list[str]] = {}
        #: the last snapshot's results, for the diagnosis evidence
        self.latest: list[DimensionAttainment] = []
        #: engines' dimensions left unjudged, a disaggregated request being judged once (legs.py)
        self.unjudged: list[NotJudged] = []
        self.gaps: list[Gap] = []
        self.advice: list[ConcurrencyAdvice] = []
        self.costs: list[EngineCost] = []
        self.planners: list[dict[str, Any]] = []

    def same_settings(self, slos: Sequence[SloTarget], window_seconds: float, capacity: CapacitySettings) -> bool:
        return tuple(slos) == self.slos and window_seconds == self.window_seconds and capacity == self.settings

    def update(self, metrics: Sequence[Metric], now: float) -> list[Metric]:
        if not self.slos and self.requests is None and not self.settings.gpu_hour_price:
            return []
        try:
            return self._update(metrics, now)
        except Exception:  # a bug here must cost the SLO families, never the snapshot
            log.exception("slo: attainment or capacity failed; llm_slo_*, llm_capacity_* and llm_cost_* left out")
            return []

    def _update(self, metrics: Sequence[Metric], now: float) -> list[Metric]:
        # Each point counts the refusals it sees as misses: an engine its admission rejections, a
        # gateway its 429s and 503s (an engine's 503 passed through among them).
        refusals = self.refusals.update(metrics, now)
        engine_side = with_refusals(evaluate(self.slos, metrics), refusals)
        client_side = with_refusals(evaluate_client_side(self.slos, metrics, self.layout), refusals)
        self.latest = engine_side + client_side
        nearer = {(r.slo.name, r.dimension) for r in client_side}
        self.unjudged = not_judged(self.slos, metrics, DIMENSION_FAMILIES, nearer)
        out = list(attainment_samples(self.latest, self.slos))
        out += slice_samples(evaluate_slices(self.slos, metrics, DIMENSION_FAMILIES, engine_point))
        at_gateway = gateway_covers(self.layout, metrics)
        gateway_requests = GATEWAY_FAMILIES["e2e"]
        out += slice_samples(
            evaluate_slices(self.slos, metrics, GATEWAY_FAMILIES, at_gateway, gateway_requests, "gateway")
        )
        capacity = self.capacity.update(self.slos, metrics, now, self.settings.max_num_seqs)
        out += capacity
        found = estimates(capacity)
        out += self.replicas.update(found, metrics, now)
        mixes = self.mix.update(metrics, now)
        self.advice = advise(found, mixes, self.settings)
        out += concurrency_samples(self.advice)
        self.costs = costs(metrics, mixes, found, self.settings.gpu_hour_price)
        out += [s for c in self.costs for s in c.samples()]
        self.gaps = explain(self.latest, metrics, self.layout)
        self.planners = compare(metrics, self.replicas.pools)
        self.evidence = evidence_lines(engine_side, self.burn.update(engine_side, now), found, metrics)
        self.actions = {}
        for item in self.unjudged:
            key = (item.labels.get("engine", ""), item.labels.get("engine_type", ""), item.labels.get("model", ""))
            self.evidence.setdefault(key, []).append(item.line())
        for gap in self.gaps:
            if gap.holder is not None:
                for key in gap.engines:
                    self.evidence.setdefault(key, []).append(gap.line())
        for advice in self.advice:
            key = (advice.engine, advice.labels.get("engine_type", ""), advice.model)
            self.evidence.setdefault(key, []).append(advice.line())
            if advice.action is not None:
                self.actions.setdefault(key, []).append(advice.action)
        if self.requests is not None:
            out += request_samples(self.slos, self.requests, now, self.window_seconds)
        return out

    def report(self) -> dict[str, Any]:
        """The /diagnosis `slo` section: where each SLO was measured (and which engines' histograms
        are left out of it, a disaggregated request being judged once), the client/engine gap and who
        holds it, replicas per model and pool, concurrency per engine, cost, and outside planners."""
        return {
            "attainment": [
                {
                    "slo": r.slo.name,
                    "dimension": r.dimension,
                    "measured_at": r.measured_at,
                    "point": {k: v for k, v in r.labels.items() if k in ("engine", "model", "gateway", "probe")},
                    "attainment": round(r.attainment, 4),
                    "objective": r.slo.objective,
                }
                for r in self.latest
                if r.attainment == r.attainment  # NaN: no window yet
            ],
            "not_judged_at_engine": [u.as_json() for u in self.unjudged],
            "client_engine_gap": [g.as_json() for g in self.gaps],
            "replicas": [p.as_json() for p in self.replicas.pools],
            "concurrency": [a.as_json() for a in self.advice],
            "cost": [c.as_json() for c in self.costs],
            "planners": self.planners,
        }
