"""The first two stages of the path, before the engine: `ingress` and `client_network`.

Read from normalized families only (`llm_gateway_*`, `llm_probe_*`, `llm_engine_*`). Latency is
split by means over one window (rate of the sum over rate of the count), never by subtracting
quantiles, which do not add up:

- engine            = the engines' mean e2e latency (their own clock, from arrival in the API server)
- gateway_to_engine = the gateway's mean upstream time − engine (the hop, where it is measured)
- gateway           = the gateway's mean request time − max(upstream, engine): its own handling,
                      queue and routing
- client_to_gateway = the probe's mean through the gateway − its mean direct to the engine − the
                      gateway's own time (like for like: the same tiny request both ways); without
                      a direct path, the probe's mean − the gateway's mean request time

Populations differ between the gateway (all requests) and the probe (its own tiny ones); the
components are clamped at 0 and the evidence names the means they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.diagnosis.stages import ramp
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ProbeTarget, Thresholds
from exporter.window import DeltaWindow

PATH_STAGES = ("ingress", "client_network")
COMPONENTS = ("client_to_gateway", "gateway", "gateway_to_engine", "engine")
GatewayKey = tuple[str, str]  # gateway, gateway_type
ERROR_CODES = ("502", "503", "504")
#: below these many responses in the window an error share means nothing
MIN_RESPONSES = 5

ACTIONS = {
    "ingress": [
        "Compare the gateway's backend limits (HAProxy server maxconn and timeout queue, LiteLLM rpm/parallel "
        "limits, EPP flow-control capacity) with the engine's concurrency (max_num_seqs): a limit below it turns "
        "load into 503/504 at the gateway while the engine idles",
        "Look at the gateway's own CPU, TLS handshakes and routing plugins (llm_gateway_latency_component_seconds"
        '{component="gateway"}); scale the gateway out before the engines',
        "Read the gateway's logs for upstream timeouts and connection resets behind the 502/503/504",
    ],
    "client_network": [
        "The path before the gateway is slow for every request: measure RTT and loss from the clients' network "
        "to the gateway (the probe's path), check the load balancer, NAT and MTU in front of it",
        "Keep clients and the gateway in one region/zone; reuse connections (keep-alive, HTTP/2) so handshakes "
        "are not paid per request",
    ],
}


@dataclass
class PathDiagnosis:
    key: GatewayKey
    scores: dict[str, float]
    active: dict[str, bool]
    primary: str = "none"
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
        self._active: dict[tuple[GatewayKey, str], bool] = {}
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
        """Engines behind a gateway carry its stages: their scores gain `ingress` and `client_network`."""
        for entry in engines:
            for d in self.latest.values():
                if entry["engine"] in d.engines:
                    entry["scores"].update({s: round(d.scores[s], 3) for s in PATH_STAGES})
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

        components: dict[str, float] = {}
        if e_mean is not None:
            components["engine"] = e_mean
        if g_upstream is not None and e_mean is not None:
            components["gateway_to_engine"] = max(0.0, g_upstream - e_mean)
        own = None
        if g_total is not None:
            inner = max(v for v in (g_upstream, e_mean, 0.0) if v is not None)
            own = max(0.0, g_total - inner)
            components["gateway"] = own
        if p_gateway is not None:
            if p_direct is not None:
                components["client_to_gateway"] = max(0.0, p_gateway - p_direct - (own or 0.0))
            elif g_total is not None:
                components["client_to_gateway"] = max(0.0, p_gateway - g_total)

        evidence: list[str] = []
        engine_healthy = not down and up
        if down:
            evidence.append(
                f"engine {', '.join(down)} behind the gateway is down (llm_engine_up 0): the gateway's 502/503 are the "
                "engine's failure, not the ingress's"
            )
        elif backends_down and not behind:
            evidence.append(f"{backends_down:g} backend(s) down at the gateway")
        if not up:
            evidence.append("the gateway's metrics cannot be read (llm_gateway_up 0)")

        # ingress: errors at the gateway, gateway time >> engine time, queue / connections at the limit
        s_errors = ramp(error_share, 0.01, 0.1)
        reference = max(e_mean or 0.0, 0.05)
        s_time = ramp((own / reference) if own is not None else None, 0.5, 2.0)
        s_queue = ramp(queued, 0.0, t.waiting_requests)
        s_limit = ramp(active_connections / limit if active_connections is not None and limit else None, 0.8, 1.0)
        if backends_down and not down:
            s_errors = max(s_errors, 0.5)
        ingress = 1 - (1 - s_errors) * (1 - s_time) * (1 - 0.7 * s_queue) * (1 - 0.7 * s_limit)
        ingress *= 1.0 if engine_healthy else 0.0
        if error_share is not None:
            codes = ", ".join(f"{c}: {counts[c]:.0f}" for c in ERROR_CODES if counts.get(c))
            evidence.append(
                f"ingress: 5xx {error_share:.1%} of {answered:.0f} responses in the window"
                + (f" ({codes})" if codes else "")
            )
        if own is not None:
            evidence.append(
                f"ingress: gateway's own time {own * 1000:.0f} ms (mean request {g_total * 1000:.0f} ms"  # type: ignore[operator]
                + (f", upstream {g_upstream * 1000:.0f} ms" if g_upstream is not None else "")
                + (f", engine e2e {e_mean * 1000:.0f} ms" if e_mean is not None else ", no engine e2e")
                + ")"
            )
        if queued:
            evidence.append(f"ingress: {queued:g} request(s) queued at the gateway for a backend")
        if s_limit:
            evidence.append(f"ingress: {active_connections:g} of {limit:g} client connections in use")

        # client_network: the probe through the gateway slow while the gateway and the engine are fast
        extra = components.get("client_to_gateway")
        baseline = p_direct if p_direct is not None else g_total
        s_extra_ratio = ramp(extra / max(baseline or 0.0, 0.02) if extra is not None else None, 0.5, 2.0)
        s_extra_abs = ramp(extra, 0.02, 0.2)
        client_network = s_extra_ratio * s_extra_abs * (1 - s_errors) * (1 - 0.5 * s_time)
        client_network *= 1.0 if engine_healthy else 0.0
        if p_gateway is not None:
            evidence.append(
                f"client_network: probe through the gateway {p_gateway * 1000:.0f} ms mean"
                + (f", direct to the engine {p_direct * 1000:.0f} ms" if p_direct is not None else "")
                + (f": {extra * 1000:.0f} ms before the gateway" if extra is not None else "")
            )
        elif not self._probes.get(name):
            evidence.append(
                "client_network: no probe goes through this gateway (probes:), so the client side is unmeasured"
            )

        scores = {"ingress": min(1.0, ingress), "client_network": min(1.0, client_network)}
        active = {}
        for stage, score in scores.items():
            was = self._active.get((key, stage), False)
            active[stage] = score >= (t.exit_score if was else t.enter_score)
            self._active[(key, stage)] = active[stage]
        on = [s for s in PATH_STAGES if active[s]]
        primary = max(on, key=lambda s: scores[s]) if on else "none"
        actions = [a for s in PATH_STAGES if active[s] for a in ACTIONS[s]]
        if down:
            actions.append(f"Restore engine {', '.join(down)} (see its own diagnosis and llm_engine_up)")
        return PathDiagnosis(key, scores, active, primary, components, behind, down, evidence, actions)

    def _gauges(self, d: PathDiagnosis) -> list[Metric]:
        gateway, gateway_type = d.key
        base = {"gateway": gateway, "gateway_type": gateway_type}
        out: list[Metric] = [
            Sample("llm_gateway_latency_component_seconds", {**base, "component": c}, round(v, 6))
            for c, v in d.components.items()
        ]
        for stage in PATH_STAGES:
            out.append(Sample("llm_gateway_bottleneck_score", {**base, "stage": stage}, round(d.scores[stage], 4)))
        for stage in (*PATH_STAGES, "none"):
            out.append(
                Sample("llm_gateway_bottleneck_primary", {**base, "stage": stage}, 1.0 if d.primary == stage else 0.0)
            )
        return out
