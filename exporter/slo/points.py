"""Attainment measured nearer the client than the engine: at the gateway and at the prober.

The engine's clock starts when its API server has parsed and tokenized a request; what a request
waits before that (in the API server's event loop, in the gateway's queue, on the network) no
engine histogram holds. docs/slo.md measured it on a real vLLM: on a busy two-core host 29.5 % of
requests were within TTFT 20 ms at the client where the engine counted 86.3 %. The same SLO is
therefore judged at every point that measures it, each series labelled `measured_at`:

- `gateway`: the gateway's own histograms (LiteLLM, Envoy AI Gateway, the EPP, ingress-nginx; for
  HAProxy its access log, exporter/sources/access_log.py) of every request through it: `e2e` on
  its request duration, `ttft` where it times a first token. A gateway's histograms cover every
  engine and model behind it, so an SLO is judged there only when it covers all of them (one that
  selects no engine or model covers them all, scraped here or not). Behind llm-d's P/D coordinator
  the EPP routes each leg of a disaggregated request as a request of its own, so its time to first
  token is the decode leg's, not the client's: it is not judged there (the coordinator times no
  first token either);
- `probe`: the prober's own requests through the gateway (exporter/sources/probe.py), `ttft` only:
  its tiny completion waits for a first token as any request does, but its four-token answer says
  nothing of an SLO's end-to-end time. Its requests are few (one per interval), so its attainment
  moves in steps of one request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ProbeTarget, SloTarget
from exporter.slo.attainment import DimensionAttainment, judge, request_rate
from exporter.slo.selectors import covers

#: the gateway's summary each dimension is judged on there
GATEWAY_FAMILIES = {
    "ttft": "llm_gateway_time_to_first_token_seconds",
    "e2e": "llm_gateway_request_duration_seconds",
}
PROBE_FAMILIES = {"ttft": "llm_probe_time_to_first_token_seconds"}


@dataclass(frozen=True)
class PathLayout:
    """What stands before the engines: each gateway's engines (empty: every engine of the node) and
    each probe's model and gateway, from the configuration."""

    gateways: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    probes: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)

    @classmethod
    def of(cls, gateways: Iterable[GatewayTarget], probes: Iterable[ProbeTarget]) -> PathLayout:
        return cls({g.name: g.engines for g in gateways}, {p.name: (p.model, p.gateway) for p in probes})


def served(metrics: Iterable[Metric]) -> set[tuple[str, str]]:
    """(engine, model) of every engine series with a model, up or down."""
    return {
        (m.labels["engine"], m.labels.get("model", ""))
        for m in metrics
        if m.name == "llm_engine_up" and isinstance(m, Sample) and m.labels.get("model")
    }


def behind(layout: PathLayout, gateway: str, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    engines = layout.gateways.get(gateway) or ()
    return {(e, m) for e, m in pairs if not engines or e in engines}


def judged_at_gateway(slo: SloTarget, engines_behind: set[tuple[str, str]]) -> bool:
    """Whether an SLO is judged on a gateway's histograms: they hold every request through it, so
    only where the SLO covers every (engine, model) behind it that this exporter scrapes, or selects
    no engine or model at all (it covers whatever is behind, engines on other nodes too)."""
    if slo.engine is None and slo.model is None:
        return True
    return bool(engines_behind) and all(covers(slo, e, m) for e, m in engines_behind)


def gateway_covers(layout: PathLayout, metrics: Iterable[Metric]) -> Callable[[SloTarget, Mapping[str, str]], bool]:
    """`judged_at_gateway` for a gateway's series labels, over this snapshot's engines (the
    slices' measuring-point test, exporter/slo/slices.py)."""
    pairs = served(metrics)

    def at_gateway(slo: SloTarget, labels: Mapping[str, str]) -> bool:
        return judged_at_gateway(slo, behind(layout, labels.get("gateway", ""), pairs))

    return at_gateway


def evaluate_client_side(
    slos: Sequence[SloTarget], metrics: Sequence[Metric], layout: PathLayout
) -> list[DimensionAttainment]:
    """Each SLO's dimensions at every gateway and probe that measures them and that it covers."""
    pairs = served(metrics)
    gateways: dict[str, dict[str, QuantileSummary]] = {}
    probes: dict[str, dict[str, QuantileSummary]] = {}
    for m in metrics:
        if not isinstance(m, QuantileSummary) or m.histogram is None:
            continue
        if "gateway" in m.labels and m.name in GATEWAY_FAMILIES.values():
            gateways.setdefault(m.labels["gateway"], {})[m.name] = m
        elif m.labels.get("path") == "gateway" and m.name in PROBE_FAMILIES.values():
            probes.setdefault(m.labels["probe"], {})[m.name] = m
    if any(m.labels.get("gateway_type") == "llm-d-coordinator" for m in metrics):
        for families in gateways.values():
            ttft = families.get(GATEWAY_FAMILIES["ttft"])
            if ttft is not None and ttft.labels.get("gateway_type") == "epp":
                del families[GATEWAY_FAMILIES["ttft"]]
    result: list[DimensionAttainment] = []
    for name, families in sorted(gateways.items()):
        mine = behind(layout, name, pairs)
        rate = request_rate(families.get(GATEWAY_FAMILIES["e2e"]))
        for slo in slos:
            if judged_at_gateway(slo, mine):
                result += judge(slo, families, GATEWAY_FAMILIES, rate, "gateway")
    for name, families in sorted(probes.items()):
        model, gateway = layout.probes.get(name, ("", None))
        engines = {e for e, _ in (behind(layout, gateway, pairs) if gateway else pairs)}
        for slo in slos:
            if covers(slo, "", model) if slo.engine is None else any(covers(slo, e, model) for e in engines):
                result += judge(slo, families, PROBE_FAMILIES, math.nan, "probe")
    return result
