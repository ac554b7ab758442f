"""An outside planner's decisions beside the exporter's: Dynamo's recommended replicas and its
per-engine capacity against `llm_capacity_desired_replicas` and `llm_capacity_max_request_rate`,
and its estimated latencies against the ones it observed (how well its own model fits)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from exporter.model import Metric, Sample
from exporter.slo.replicas import PoolNeed


def compare(metrics: Sequence[Metric], pools: Sequence[PoolNeed]) -> list[dict[str, Any]]:
    """Per planner and model: its figures, ours, and the differences."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for m in metrics:
        if not isinstance(m, Sample) or not m.name.startswith("llm_planner_") or m.name == "llm_planner_up":
            continue
        entry = found.setdefault((m.labels["planner"], m.labels["model"]), {"replicas": {}, "latency_seconds": {}})
        if m.name == "llm_planner_replicas":
            entry["replicas"].setdefault(m.labels["role"], {})[m.labels["kind"]] = m.value
        elif m.name == "llm_planner_latency_seconds":
            entry["latency_seconds"].setdefault(m.labels["dimension"], {})[m.labels["kind"]] = round(m.value, 6)
        elif m.name == "llm_planner_engine_capacity_requests_per_second":
            entry.setdefault("engine_capacity_requests_per_second", {})[m.labels["role"]] = m.value
    out = []
    for (planner, model), entry in sorted(found.items()):
        ours = [p for p in pools if p.model == model]
        recommended = {role: kinds.get("recommended") for role, kinds in entry["replicas"].items()}
        lines = []
        for pool in ours:
            theirs = recommended.get(pool.role) if pool.role else _total(recommended)
            if theirs is None:
                continue
            what = f"{pool.role} replicas" if pool.role else "replicas (its prefill and decode pools together)"
            lines.append(
                f"{planner} recommends {theirs:g} {what} for {model}; ours under SLO {pool.slo}: {pool.desired} "
                f"({pool.desired - theirs:+g})"
            )
            their_capacity = entry.get("engine_capacity_requests_per_second", {}).get(pool.role or "decode")
            if their_capacity is not None and pool.capacity > 0:
                lines.append(
                    f"one {pool.role or 'aggregated'} engine's capacity: {planner} {their_capacity:.2f} req/s, "
                    f"ours {pool.capacity:.2f} req/s under SLO {pool.slo} ({pool.capacity / their_capacity - 1:+.0%})"
                    if their_capacity > 0
                    else f"one engine's capacity: {planner} 0 req/s, ours {pool.capacity:.2f} req/s"
                )
        for dimension, kinds in sorted(entry["latency_seconds"].items()):
            estimated, observed = kinds.get("estimated"), kinds.get("observed")
            if estimated is not None and observed is not None and observed > 0:
                error = estimated / observed - 1
                lines.append(
                    f"{planner} {dimension.upper()}: estimated {estimated * 1000:.1f} ms, "
                    f"observed {observed * 1000:.1f} ms ({error:+.0%})"
                )
        out.append({"planner": planner, "model": model, **entry, "comparison": lines})
    return out


def _total(recommended: dict[str, float | None]) -> float | None:
    values = [v for v in recommended.values() if v is not None and math.isfinite(v)]
    return sum(values) if values else None
