"""Where the client-side attainment loses to the engine's: the gap between an SLO judged at the
gateway (or the prober) and judged on the engines behind it, put on the part of the path that
holds the extra time.

The split is of mean seconds per request over the window (means add up, quantiles do not), each
from the measuring points' window histograms:

- gateway queue: the gateway's own queue time (HAProxy Tw from its access log, LiteLLM's and the
  EPP's queue histograms; HAProxy's mean over its last requests where there is no log);
- gateway: the gateway's request time less its upstream time and its queue (its own handling);
- API server's host: the gateway's upstream time less the engines' e2e: what the request spent
  between the gateway and the engine's clock, the API server's HTTP handling and any wait for a
  CPU before tokenization (a starved event loop on a busy host), and the hop, negligible on a node;
- client network: the probe through the gateway less the probe direct to the engine (like for
  like: the same tiny request both ways), where a probe goes both ways.

For `ttft` judged at the prober, the split is the probe's: direct to the engine less the engines'
mean TTFT is the API server's host (an underestimate: the probe's prompt is shorter than most),
through the gateway less direct is the gateway and the network together. The host's CPU, quoted
beside, says whether "the API server's host" is a host out of CPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.slo.attainment import DIMENSION_FAMILIES, DimensionAttainment
from exporter.slo.points import PathLayout, behind, served

PARTS = ("client network", "gateway and client network", "gateway queue", "gateway", "API server's host")
#: a gap under this many points is the two clocks agreeing (bucket edges, a request or two)
NOTABLE_GAP = 0.02


@dataclass(frozen=True)
class Gap:
    """One SLO dimension judged at a client-side point and on the engines behind it."""

    slo: str
    dimension: str
    measured_at: str  # gateway or probe
    point: str  # its name
    client: float  # attainment at the point
    engine: float  # attainment over the engines behind it (events weighted)
    parts: Mapping[str, float] = field(default_factory=dict)  # mean seconds per request
    host_cpu: float | None = None
    #: (engine, engine_type, model) of the engines behind the point judged on the same SLO
    engines: tuple[tuple[str, str, str], ...] = ()

    @property
    def points(self) -> float:
        return self.engine - self.client

    @property
    def holder(self) -> str | None:
        """The part holding most of the extra time; None without a notable gap or a split."""
        if self.points < NOTABLE_GAP or not self.parts:
            return None
        return max(self.parts, key=lambda k: self.parts[k])

    def line(self) -> str:
        text = (
            f"SLO {self.slo} {self.dimension}: {self.client:.1%} within at the {self.measured_at} {self.point}, "
            f"{self.engine:.1%} on the engines' clock ({self.points * 100:+.1f} points)"
        )
        if self.parts:
            text += "; extra time per request: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in self.parts.items())
        holder = self.holder
        if holder is not None:
            text += f": held by the {holder}"
            if holder == "API server's host" and self.host_cpu is not None:
                text += f" (host CPU {self.host_cpu:.0%} busy)"
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "slo": self.slo,
            "dimension": self.dimension,
            "measured_at": self.measured_at,
            "point": self.point,
            "attainment": round(self.client, 4),
            "engine_attainment": round(self.engine, 4),
            "gap_points": round(self.points * 100, 2),
            "extra_seconds": {k: round(v, 4) for k, v in self.parts.items()},
            "held_by": self.holder,
            "host_cpu_utilization": None if self.host_cpu is None else round(self.host_cpu, 3),
            "summary": self.line(),
        }


def _mean(summary: QuantileSummary | None) -> float | None:
    window = summary.window if summary is not None else None
    if window is None or not window.count > 0 or math.isnan(window.sum):
        return None
    return window.sum / window.count


def _pooled_mean(summaries: Sequence[QuantileSummary]) -> float | None:
    windows: list[Histogram] = [s.window for s in summaries if s.window is not None and s.window.count > 0]
    count = sum(w.count for w in windows)
    return sum(w.sum for w in windows) / count if count else None


def explain(results: Sequence[DimensionAttainment], metrics: Sequence[Metric], layout: PathLayout) -> list[Gap]:
    """A Gap per client-side attainment that has engines behind it judged on the same SLO."""
    summaries: dict[tuple[str, str, str], QuantileSummary] = {}  # (kind, name, family)
    engine_summaries: dict[str, list[QuantileSummary]] = {}
    host_cpu = None
    for m in metrics:
        if isinstance(m, QuantileSummary):
            if "gateway" in m.labels:
                summaries[("gateway", m.labels["gateway"], m.name)] = m
            elif "probe" in m.labels:
                summaries[(m.labels["path"], m.labels["probe"], m.name)] = m
            elif "engine_type" in m.labels:
                engine_summaries.setdefault(m.name, []).append(m)
        elif isinstance(m, Sample) and m.name == "llm_host_cpu_overall_utilization_ratio":
            host_cpu = m.value
    averages = {
        (m.labels["gateway"], m.labels["phase"]): m.value
        for m in metrics
        if isinstance(m, Sample) and m.name == "llm_gateway_average_seconds"
    }
    pairs = served(metrics)
    out = []
    for item in results:
        if item.measured_at == "engine" or math.isnan(item.attainment):
            continue
        name = item.labels.get(item.measured_at, "")
        gateway = name if item.measured_at == "gateway" else layout.probes.get(name, ("", None))[1]
        engines = {e for e, _ in (behind(layout, gateway, pairs) if gateway else pairs)}
        judged = [
            r
            for r in results
            if r.measured_at == "engine"
            and r.slo == item.slo
            and r.dimension == item.dimension
            and r.labels.get("engine") in engines
            and r.window is not None
        ]
        total = sum(r.window.total for r in judged if r.window is not None)
        if not total:
            continue
        engine = sum(r.window.lower for r in judged if r.window is not None) / total
        family = DIMENSION_FAMILIES[item.dimension]
        engine_mean = _pooled_mean([s for s in engine_summaries.get(family, []) if s.labels.get("engine") in engines])
        if item.measured_at == "gateway":
            parts = _gateway_parts(name, summaries, averages, engine_mean)
        else:
            parts = _probe_parts(name, summaries, engine_mean, gateway)
        keys = tuple(
            sorted({(r.labels["engine"], r.labels.get("engine_type", ""), r.labels.get("model", "")) for r in judged})
        )
        out.append(
            Gap(item.slo.name, item.dimension, item.measured_at, name, item.attainment, engine, parts, host_cpu, keys)
        )
    return out


def _gateway_parts(
    name: str,
    summaries: Mapping[tuple[str, str, str], QuantileSummary],
    averages: Mapping[tuple[str, str], float],
    engine: float | None,
) -> dict[str, float]:
    def mean(phase: str) -> float | None:
        found = _mean(summaries.get(("gateway", name, f"llm_gateway_{phase}_seconds")))
        return found if found is not None else averages.get((name, phase))

    total, upstream, queue = mean("request_duration"), mean("upstream_duration"), mean("queue_time")
    parts: dict[str, float] = {}
    if queue is not None:
        parts["gateway queue"] = queue
    if total is not None and upstream is not None:
        parts["gateway"] = max(0.0, total - upstream - (queue or 0.0))
    if engine is not None:
        inner = upstream if upstream is not None else (total - (queue or 0.0) if total is not None else None)
        if inner is not None:
            parts["API server's host"] = max(0.0, inner - engine)
    return parts


def _probe_parts(
    name: str, summaries: Mapping[tuple[str, str, str], QuantileSummary], engine: float | None, gateway: str | None
) -> dict[str, float]:
    family = "llm_probe_time_to_first_token_seconds"
    through, direct = _mean(summaries.get(("gateway", name, family))), _mean(summaries.get(("direct", name, family)))
    parts: dict[str, float] = {}
    if through is not None and direct is not None:
        parts["client network" if gateway is None else "gateway and client network"] = max(0.0, through - direct)
    if direct is not None and engine is not None:
        parts["API server's host"] = max(0.0, direct - engine)
    return parts
