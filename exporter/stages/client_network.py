"""Client network: the path before the gateway is slow (the probe through the gateway is slow
while the gateway and the engine are fast). Shown in the path stages' dashboard row."""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages.path import PATH, PathReading
from exporter.stages.record import Alert, AlertContext, Fmt, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import ramp


def score(r: PathReading, t: Thresholds) -> StageResult:
    result = StageResult()
    extra = r.client_to_gateway
    baseline = r.probe_direct if r.probe_direct is not None else r.total
    against_baseline = ramp(extra / max(baseline or 0.0, 0.02) if extra is not None else None, 0.5, 2.0)
    in_seconds = ramp(extra, 0.02, 0.2)
    level = against_baseline * in_seconds * (1 - r.error_level) * (1 - 0.5 * r.slow_gateway)
    result.score = min(1.0, level) if r.engines_healthy else 0.0
    if r.probe_gateway is not None:
        result.evidence.append(
            f"probe through the gateway {r.probe_gateway * 1000:.0f} ms mean"
            + (f", direct to the engine {r.probe_direct * 1000:.0f} ms" if r.probe_direct is not None else "")
            + (f": {extra * 1000:.0f} ms before the gateway" if extra is not None else "")
        )
    elif not r.probed:
        result.evidence.append("no probe goes through this gateway (probes:), so the client side is unmeasured")
    return result


def _component(a: AlertContext, name: str) -> str:
    return a.of_gateway(f'sum(llm_gateway_latency_component_seconds{{@, component="{name}"}})', "humanizeDuration")


def _latency_description(a: AlertContext) -> str:
    return (
        f"{a.gateway}: {a.value(Fmt.SECONDS)} per request are spent before the engine (window means): "
        f"client network {_component(a, 'client_to_gateway')}, the gateway itself {_component(a, 'gateway')}, "
        f"gateway to engine {_component(a, 'gateway_to_engine')}; the engine {_component(a, 'engine')}."
    )


def _latency_expr(a: AlertContext) -> str:
    before_engine = a.series(
        "llm_gateway_latency_component_seconds", 'component=~"client_to_gateway|gateway|gateway_to_engine"'
    )
    return f"sum by ({a.by_gateway}) ({before_engine}) > {a.alert_line('ingress_latency_seconds'):g}"


STAGE = register(
    Stage(
        id="client_network",
        order=20,
        scope=PATH,
        title="client network",
        colour="dark-blue",
        score=score,
        question="is the path before the gateway slow?",
        signature="the probe through the gateway is slow while the gateway and the engine are fast",
        reads="the probe's mean through the gateway minus its mean direct to the engine minus the gateway's own "
        "time, as a ratio of the direct mean (ramp 0.5×–2×) and in seconds (ramp 20–200 ms)",
        guards="damped by gateway errors and by a slow gateway (then the gateway itself is the limit); zero while "
        "an engine is down; "
        "without a probe the evidence says the client side is unmeasured",
        actions=(
            "The path before the gateway is slow for every request: measure RTT and loss from the clients' network "
            "to the gateway (the probe's path), check the load balancer, NAT and MTU in front of it",
            "Keep clients and the gateway in one region/zone; reuse connections (keep-alive, HTTP/2) so handshakes "
            "are not paid per request",
        ),
        alerts=(
            # The time before the engine, which this stage splits out of the gateway's own.
            Alert(
                "LLMIngressLatencyHigh",
                "warning",
                "10m",
                "Requests spend long before they reach the LLM engine.",
                _latency_description,
                expr=_latency_expr,
            ),
        ),
    )
)
