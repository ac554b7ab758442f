"""The stages before the engine, scored per gateway with the probes that go through it.

Each round gathers one gateway's `PathReading` (exporter/stages/path.py) from normalized families
only (`llm_gateway_*`, `llm_probe_*`, `llm_engine_*`), keeping the windows its means and response
counts come from, and scores every path-scope stage (the registry's) from it with hysteresis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.diagnosis.verdict import NONE, Hysteresis
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ProbeTarget, Thresholds
from exporter.stages import of
from exporter.stages.path import PATH, PathReading
from exporter.window import DeltaWindow

GatewayKey = tuple[str, str]  # gateway, gateway_type
#: below these many responses in the window an error share means nothing
MIN_RESPONSES = 5


@dataclass
class PathDiagnosis:
    key: GatewayKey
    scores: dict[str, float]
    active: dict[str, bool]
    primary: str = NONE
    components: dict[str, float] = field(default_factory=dict)
    engines: list[str] = field(default_factory=list)
    engines_down: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        gateway, gateway_type = self.key
        return {
            "gateway": gateway,
            "gateway_type": gateway_type,
            "primary": self.primary,
            "scores": {stage: round(score, 3) for stage, score in self.scores.items()},
            "active": [stage for stage, on in self.active.items() if on],
            "latency_components_seconds": {k: round(v, 4) for k, v in self.components.items()},
            "engines": self.engines,
            "engines_down": self.engines_down,
            "evidence": self.evidence,
            "actions": self.actions,
        }


class _Means:
    """Window means and rates of cumulative (sum, count) pairs and counters, reset-aware."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, ...], DeltaWindow] = {}

    def observe(
        self, key: tuple[str, ...], now: float, values: Sequence[float], seconds: float
    ) -> tuple[float, ...] | None:
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = DeltaWindow(seconds)
        window.observe(now, values)
        return window.total()

    def mean(self, key: tuple[str, ...], now: float, summary: QuantileSummary | None, seconds: float) -> float | None:
        if summary is None:
            return None
        totals = self.observe(key, now, (summary.sum, summary.count), seconds)
        if totals is None or totals[1] <= 0:
            return None
        return totals[0] / totals[1]


class PathDiagnoser:
    """Scores the stages before the engine for each gateway, with the probes that go through it."""

    def __init__(self) -> None:
        self._behind: dict[str, tuple[str, ...]] = {}
        self._probes: dict[str, list[str]] = {}
        self._means = _Means()
        self._hysteresis = Hysteresis()
        self.latest: dict[GatewayKey, PathDiagnosis] = {}

    def configure(self, gateways: Iterable[GatewayTarget], probes: Iterable[ProbeTarget]) -> None:
        self._behind = {g.name: g.engines for g in gateways}
        self._probes = {}
        for probe in probes:
            if probe.gateway is not None:
                self._probes.setdefault(probe.gateway, []).append(probe.name)

    def update(self, metrics: Sequence[Metric], now: float, t: Thresholds) -> list[Metric]:
        seconds = max(2 * t.level_seconds, 1.0)
        gateways = {
            (m.labels["gateway"], m.labels["gateway_type"]): m.value
            for m in metrics
            if isinstance(m, Sample) and m.name == "llm_gateway_up"
        }
        engines_up: dict[str, bool] = {}
        for m in metrics:
            if isinstance(m, Sample) and m.name == "llm_engine_up":
                engine = m.labels["engine"]
                engines_up[engine] = engines_up.get(engine, False) or bool(m.value)
        self.latest = {
            key: self._diagnose(key, up, metrics, now, t, seconds, engines_up) for key, up in gateways.items()
        }
        return [g for d in self.latest.values() for g in self._gauges(d)]

    def report(self) -> list[dict[str, Any]]:
        return [d.as_json() for _, d in sorted(self.latest.items())]

    def annotate(self, engines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Engines behind a gateway carry its stages: their scores gain the path stages'."""
        for entry in engines:
            for d in self.latest.values():
                if entry["engine"] in d.engines:
                    entry["scores"].update({s: round(score, 3) for s, score in d.scores.items()})
                    entry["gateway"] = d.key[0]
                    entry["path_primary"] = d.primary
        return engines

    # -- scoring -------------------------------------------------------------------------------

    def _diagnose(
        self,
        key: GatewayKey,
        up: float,
        metrics: Sequence[Metric],
        now: float,
        t: Thresholds,
        seconds: float,
        engines_up: dict[str, bool],
    ) -> PathDiagnosis:
        name = key[0]
        behind = list(self._behind.get(name) or sorted(engines_up))
        down = [e for e in behind if not engines_up.get(e, False)]
        mine = [m for m in metrics if m.labels.get("gateway") == name]

        def summary(
            family: str, labels: dict[str, str] | None = None, among: Sequence[Metric] = mine
        ) -> QuantileSummary | None:
            for m in among:
                if (
                    isinstance(m, QuantileSummary)
                    and m.name == family
                    and all(m.labels.get(k) == v for k, v in (labels or {}).items())
                ):
                    return m
            return None

        def gauge(family: str, labels: dict[str, str] | None = None) -> float | None:
            values = [
                m.value
                for m in mine
                if isinstance(m, Sample)
                and m.name == family
                and all(m.labels.get(k) == v for k, v in (labels or {}).items())
            ]
            return sum(values) if values else None

        mean = self._means.mean
        g_total = mean((name, "request"), now, summary("llm_gateway_request_duration_seconds"), seconds)
        if g_total is None:
            g_total = gauge("llm_gateway_average_seconds", {"phase": "request_duration"})
        g_upstream = mean((name, "upstream"), now, summary("llm_gateway_upstream_duration_seconds"), seconds)
        if g_upstream is None:
            g_upstream = gauge("llm_gateway_average_seconds", {"phase": "upstream_duration"})
        engine_summaries = [
            m
            for m in metrics
            if isinstance(m, QuantileSummary)
            and m.name == "llm_engine_e2e_request_latency_seconds"
            and m.labels.get("engine") in behind
        ]
        engine_means = [
            v
            for v in (
                mean((name, "engine", m.labels["engine"], m.labels.get("model", "")), now, m, seconds)
                for m in engine_summaries
            )
            if v is not None
        ]
        e_mean = sum(engine_means) / len(engine_means) if engine_means else None
        probe_gateway: list[float] = []
        probe_direct: list[float] = []
        for probe in self._probes.get(name, []):
            for path, bucket in (("gateway", probe_gateway), ("direct", probe_direct)):
                s = summary("llm_probe_e2e_latency_seconds", {"probe": probe, "path": path}, metrics)
                v = mean((name, "probe", probe, path), now, s, seconds)
                if v is not None:
                    bucket.append(v)
        p_gateway = sum(probe_gateway) / len(probe_gateway) if probe_gateway else None
        p_direct = sum(probe_direct) / len(probe_direct) if probe_direct else None

        # Responses in the window, by class and code.
        responses = [m for m in mine if isinstance(m, Sample) and m.name == "llm_gateway_requests_total"]
        counts: dict[str, float] = {}
        for m in responses:
            totals = self._means.observe(
                (name, "responses", m.labels["code_class"], m.labels["code"]), now, (m.value,), seconds
            )
            if totals is not None:
                for label in (m.labels["code_class"], m.labels["code"]):
                    if label:
                        counts[label] = counts.get(label, 0.0) + totals[0]
        answered = sum(counts.get(c, 0.0) for c in ("1xx", "2xx", "3xx", "4xx", "5xx"))
        errors_5xx = counts.get("5xx", 0.0)
        error_share = errors_5xx / answered if answered >= MIN_RESPONSES else None
        queued = gauge("llm_gateway_requests_queued")
        backends_down = gauge("llm_gateway_backends", {"state": "down"}) or 0.0
        active_connections = gauge("llm_gateway_connections_active")
        limit = gauge("llm_gateway_connections_limit")

        reading = PathReading(
            up=bool(up),
            engines_down=tuple(down),
            backends_down=backends_down,
            probed=bool(self._probes.get(name)),
            counts=counts,
            answered=answered,
            error_share=error_share,
            total=g_total,
            upstream=g_upstream,
            engine=e_mean,
            probe_gateway=p_gateway,
            probe_direct=p_direct,
            queued=queued,
            connections=active_connections,
            connections_limit=limit,
        )
        evidence: list[str] = []
        if down:
            evidence.append(
                f"engine {', '.join(down)} behind the gateway is down (llm_engine_up 0): the gateway's 502/503 are the "
                "engine's failure, not the ingress's"
            )
        elif backends_down and not behind:
            evidence.append(f"{backends_down:g} backend(s) down at the gateway")
        if not up:
            evidence.append("the gateway's metrics cannot be read (llm_gateway_up 0)")
        stages = of(PATH)
        results = {stage.id: stage.score(reading, t) for stage in stages}
        scores = {stage_id: result.score for stage_id, result in results.items()}
        for stage_id, result in results.items():
            evidence += [f"{stage_id}: {line}" for line in result.evidence]
        active, primary = self._hysteresis.judge(key, stages, scores, t, now)
        for stage in stages:
            held = self._hysteresis.held(key, stage.id, t, now)
            if held:
                evidence.append(f"{stage.id}: {held}")
        actions = [a for stage in stages if active[stage.id] for a in stage.generic_actions]
        if down:
            actions.append(f"Restore engine {', '.join(down)} (see its own diagnosis and llm_engine_up)")
        return PathDiagnosis(key, scores, active, primary, reading.components, behind, down, evidence, actions)

    def _gauges(self, d: PathDiagnosis) -> list[Metric]:
        gateway, gateway_type = d.key
        base = {"gateway": gateway, "gateway_type": gateway_type}
        out: list[Metric] = [
            Sample("llm_gateway_latency_component_seconds", {**base, "component": c}, round(v, 6))
            for c, v in d.components.items()
        ]
        for stage, score in d.scores.items():
            out.append(Sample("llm_gateway_bottleneck_score", {**base, "stage": stage}, round(score, 4)))
        for stage in (*d.scores, NONE):
            out.append(
                Sample("llm_gateway_bottleneck_primary", {**base, "stage": stage}, 1.0 if d.primary == stage else 0.0)
            )
        return out
