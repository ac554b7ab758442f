"""SLO lines for the diagnosis: how the engine stands against each SLO, and what the headroom says
about GPU utilization that looks low.

"TTFT SLO ttft (1 s, 95 %): 97.2 % within, budget burning 3.1× over 1 h; ~4.5 req/s of headroom."
The burn is measured on the engine's cumulative histogram counts kept for up to an hour (less
while the exporter has run less). The seed's misreading no. 1 — low GPU utilization read as
room for more concurrency — is answered with the headroom figure whenever utilization is low.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

from exporter.model import Metric, Sample
from exporter.slo.attainment import DimensionAttainment
from exporter.slo.replicas import Estimate
from exporter.window import LastSeen

BURN_HORIZON_SECONDS = 3600.0
#: GPU utilization below this reads as "idle" to the eye (DCGM's own "ineffective use" line)
LOW_GPU_UTILIZATION = 0.5
DIMENSION_NAMES = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}
EngineKey = tuple[str, str, str]


class BurnTracker:
    """Per SLO dimension and engine, (time, events, good) for up to an hour."""

    def __init__(self) -> None:
        self._points: dict[tuple[str, ...], deque[tuple[float, float, float]]] = {}
        self._seen: LastSeen[tuple[str, ...]] = LastSeen(BURN_HORIZON_SECONDS)

    def update(self, results: Iterable[DimensionAttainment], now: float) -> dict[tuple[str, ...], tuple[float, float]]:
        """(burn, seconds it covers) per (engine, model, slo, dimension)."""
        out: dict[tuple[str, ...], tuple[float, float]] = {}
        seen: set[tuple[str, ...]] = set()
        for item in results:
            key: tuple[str, ...] = (
                item.labels.get("engine", ""),
                item.labels.get("model", ""),
                item.slo.name,
                item.dimension,
            )
            seen.add(key)
            points = self._points.setdefault(key, deque())
            if points and item.lifetime.total < points[-1][1]:
                points.clear()  # the engine restarted: its counts start again
            points.append((now, item.lifetime.total, item.lifetime.lower))
            while points and points[0][0] < now - BURN_HORIZON_SECONDS:
                points.popleft()
            t0, events0, good0 = points[0]
            events = item.lifetime.total - events0
            if events > 0 and now > t0:
                error_ratio = 1.0 - (item.lifetime.lower - good0) / events
                out[key] = (error_ratio / (1.0 - item.slo.objective), now - t0)
        for key in self._seen.gone(seen, now):
            del self._points[key]
        return out


def _span(seconds: float) -> str:
    if seconds >= BURN_HORIZON_SECONDS - 60:
        return "1 h"
    return f"{round(seconds / 60)} min" if seconds >= 90 else f"{seconds:.0f} s"


def evidence_lines(
    results: Sequence[DimensionAttainment],
    burns: dict[tuple[str, ...], tuple[float, float]],
    found: Sequence[Estimate],
    metrics: Sequence[Metric],
) -> dict[EngineKey, list[str]]:
    headroom: dict[tuple[str, str, str], tuple[float, float, float]] = {}  # (engine, model, slo)
    for e in found:
        if math.isfinite(e.max_rate):
            ratio = 1 - e.rate / e.max_rate if e.max_rate > 0 and math.isfinite(e.rate) else math.nan
            headroom[(e.labels.get("engine", ""), e.labels.get("model", ""), e.slo)] = (
                e.max_rate - e.rate,
                ratio,
                e.max_rate,
            )
    gpu = _gpu_utilization(metrics)
    out: dict[EngineKey, list[str]] = {}
    for item in results:
        if math.isnan(item.attainment) or item.measured_at != "engine":
            continue
        engine, model = item.labels.get("engine", ""), item.labels.get("model", "")
        key: EngineKey = (engine, item.labels.get("engine_type", ""), model)
        threshold = dict(item.slo.thresholds())[item.dimension]
        line = (
            f"{DIMENSION_NAMES[item.dimension]} SLO {item.slo.name} ({threshold:g} s, {item.slo.objective:.0%}): "
            f"{item.attainment:.1%} within"
        )
        burn = burns.get((engine, model, item.slo.name, item.dimension))
        if burn is not None:
            line += f", budget burning {burn[0]:.1f}× over {_span(burn[1])}"
        room = headroom.get((engine, model, item.slo.name))
        if room is not None:
            line += f"; ~{max(0.0, room[0]):.1f} req/s of headroom"
        out.setdefault(key, []).append(line)
    for (engine, model, slo), (spare, ratio, max_rate) in headroom.items():
        util = gpu.get(engine)
        if util is None or util >= LOW_GPU_UTILIZATION or not math.isfinite(ratio):
            continue
        key = next((k for k in out if k[0] == engine and k[2] == model), (engine, "", model))
        verdict = (
            "more concurrency would break it" if ratio < 0.15 else f"~{spare:.1f} req/s more fits before it breaks"
        )
        out.setdefault(key, []).append(
            f"GPU utilization {util:.0%} is not idle capacity: under SLO {slo} this engine carries at most "
            f"~{max_rate:.1f} req/s ({ratio:.0%} headroom); {verdict}"
        )
    return out


def _gpu_utilization(metrics: Sequence[Metric]) -> dict[str, float]:
    by_engine: dict[str, list[float]] = {}
    for metric in metrics:
        if metric.name == "llm_gpu_utilization_ratio" and isinstance(metric, Sample) and metric.labels.get("engine"):
            for engine in metric.labels["engine"].split(","):
                by_engine.setdefault(engine, []).append(metric.value)
    return {engine: sum(v) / len(v) for engine, v in by_engine.items()}
