"""Replicas to reach the SLO: how many replicas of a model its load needs, from the capacity
estimate of each replica (exporter/slo/headroom.py) at today's request mix.

A replica at load λ with capacity μ under the SLO needs λ / (u·μ) replicas of its own kind, u the
configured target utilization (`capacity.target_utilization`): the share of the capacity under the
SLO an autoscaler lets a replica fill, so replicas come before the SLO breaks. A model's need is
the sum over its replicas, which adds across nodes: each exporter exports its replicas' shares
(`llm_capacity_desired_replicas`, fractional) and the recording rule
`slo_model:llm_capacity_desired_replicas:ceil` sums them cluster-wide and rounds up; an autoscaler
reads that (deploy/autoscaling/).

The load is the demand, not only what completes: where requests pile up in the engine (running and
waiting grow over the window), the growth is demand the completions do not show, added to the
completion rate (flow conservation), so an overloaded replica asks for more than its throughput.

Scale-down hysteresis: each share is the highest of the last `scale_down_stabilization_seconds`,
so a rise counts at once and a fall only once it has lasted (the HPA's scale-down stabilization
window; the HPA applies its own on top). Disaggregated serving scales each pool on its own: shares
group by the engine's `role` label (prefill, decode) where it carries one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.model import Metric, Sample
from exporter.settings import CapacitySettings
from exporter.window import LastSeen

#: engine key: (engine, model)
Key = tuple[str, str]


@dataclass(frozen=True)
class Estimate:
    """One engine's capacity under one SLO, as the estimator exported it."""

    labels: Mapping[str, str]
    slo: str
    max_rate: float
    rate: float
    max_concurrency: float
    confidence: float


def estimates(samples: Iterable[Metric]) -> list[Estimate]:
    """The `llm_capacity_*` samples of one snapshot, one Estimate per engine, model and SLO."""
    values: dict[tuple[str, str, str], dict[str, float]] = {}
    labels: dict[tuple[str, str, str], Mapping[str, str]] = {}
    for s in samples:
        if isinstance(s, Sample) and s.name.startswith("llm_capacity_") and "slo" in s.labels:
            key = (s.labels.get("engine", ""), s.labels.get("model", ""), s.labels["slo"])
            values.setdefault(key, {})[s.name] = s.value
            labels[key] = {k: v for k, v in s.labels.items() if k != "slo"}
    out = []
    for key, found in values.items():
        max_rate = found.get("llm_capacity_max_request_rate", math.nan)
        headroom = found.get("llm_capacity_headroom_ratio", math.nan)
        out.append(
            Estimate(
                labels[key],
                key[2],
                max_rate,
                max_rate * (1 - headroom) if math.isfinite(headroom) else math.nan,
                found.get("llm_capacity_max_concurrency", math.nan),
                found.get("llm_capacity_estimate_confidence_ratio", math.nan),
            )
        )
    return out


@dataclass(frozen=True)
class PoolNeed:
    """One model's pool (a `role`, "" for aggregated serving) under one SLO, on this node."""

    model: str
    role: str
    slo: str
    replicas: int  # engines of this pool the node sees
    demand: float  # req/s, summed
    capacity: float  # req/s under the SLO, the replicas' mean
    share: float  # desired replicas (sum of the held shares)
    confidence: float  # the least confident replica's
    target_utilization: float

    @property
    def desired(self) -> int:
        return max(1, math.ceil(self.share - 1e-9))

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "role": self.role or "aggregated",
            "slo": self.slo,
            "desired_replicas": self.desired,
            "replicas_seen": self.replicas,
            "inputs": {
                "demand_requests_per_second": round(self.demand, 3),
                "capacity_per_replica_requests_per_second": round(self.capacity, 3),
                "target_utilization": self.target_utilization,
                "desired_replicas_unrounded": round(self.share, 3),
            },
            "confidence": round(self.confidence, 3),
        }


class ReplicaPlanner:
    """Per engine and SLO the held share of replicas; per model, role and SLO the need."""

    def __init__(self, settings: CapacitySettings, window_seconds: float) -> None:
        self.settings = settings
        self.window_seconds = window_seconds
        self._in_system: dict[Key, deque[tuple[float, float]]] = {}
        self._shares: dict[tuple[str, str, str], deque[tuple[float, float]]] = {}
        self._shares_seen: LastSeen[tuple[str, str, str]] = LastSeen(settings.scale_down_stabilization_seconds)
        self._in_system_seen: LastSeen[Key] = LastSeen(window_seconds)
        self.pools: list[PoolNeed] = []

    def update(self, found: Sequence[Estimate], metrics: Sequence[Metric], now: float) -> list[Metric]:
        growth = self._queue_growth(metrics, now)
        u = self.settings.target_utilization
        out: list[Metric] = []
        pools: dict[tuple[str, str, str], list[tuple[Estimate, float, float]]] = {}
        seen = set()
        for e in found:
            key = (e.labels.get("engine", ""), e.labels.get("model", ""))
            if not (e.max_rate > 0 and math.isfinite(e.rate)):
                continue
            demand = e.rate + growth.get(key, 0.0)
            share = self._held((*key, e.slo), demand / (u * e.max_rate), now)
            seen.add((*key, e.slo))
            out.append(Sample("llm_capacity_desired_replicas", {**e.labels, "slo": e.slo}, share))
            pools.setdefault((key[1], e.labels.get("role", ""), e.slo), []).append((e, demand, share))
        for gone in self._shares_seen.gone(seen, now):
            del self._shares[gone]
        self.pools = [
            PoolNeed(
                model,
                role,
                slo,
                len(items),
                sum(d for _, d, _ in items),
                sum(e.max_rate for e, _, _ in items) / len(items),
                sum(s for _, _, s in items),
                min(e.confidence for e, _, _ in items),
                u,
            )
            for (model, role, slo), items in sorted(pools.items())
        ]
        return out

    def _held(self, key: tuple[str, str, str], share: float, now: float) -> float:
        """The highest share of the stabilization window: rises at once, falls once it lasted."""
        history = self._shares.setdefault(key, deque())
        history.append((now, share))
        while history and history[0][0] < now - self.settings.scale_down_stabilization_seconds:
            history.popleft()
        return max(s for _, s in history)

    def _queue_growth(self, metrics: Sequence[Metric], now: float) -> dict[Key, float]:
        """Per engine, how fast running + waiting grew over the window (req/s, 0 when it did not)."""
        counts: dict[Key, float] = {}
        for m in metrics:
            if isinstance(m, Sample) and m.name in ("llm_engine_requests_running", "llm_engine_requests_waiting"):
                key = (m.labels.get("engine", ""), m.labels.get("model", ""))
                counts[key] = counts.get(key, 0.0) + m.value
        growth = {}
        for key, count in counts.items():
            points = self._in_system.setdefault(key, deque())
            points.append((now, count))
            while len(points) > 1 and points[0][0] < now - self.window_seconds:
                points.popleft()
            span = now - points[0][0]
            if span > 0:
                growth[key] = max(0.0, (count - points[0][1]) / span)
        for key in self._in_system_seen.gone(counts, now):
            del self._in_system[key]
        return growth
