"""Alerts on the stages before the engine: errors at the gateway, and latency added before the
engine (the client network, the gateway itself, the hop to the engine), from the exporter's
window means (`llm_gateway_latency_component_seconds`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.monitoring.alerts import AlertingRule, _Builder


def gateway_alerts(b: _Builder) -> list[AlertingRule]:
    t, w = b.config.thresholds, b.config.rate_interval
    by = f"{b.cluster}, {b.node}, gateway, gateway_type"
    ident = f"Gateway {{{{ $labels.gateway }}}} ({{{{ $labels.gateway_type }}}}) on {{{{ $labels.{b.node} }}}}"
    responses = f"sum by ({by}) (rate({b.s('llm_gateway_requests_total')}[{w}]))"
    server_errors = 'code_class="5xx"'
    errors = f"sum by ({by}) (rate({b.s('llm_gateway_requests_total', server_errors)}[{w}]))"
    before_engine = b.s(
        "llm_gateway_latency_component_seconds", 'component=~"client_to_gateway|gateway|gateway_to_engine"'
    )
    keys = (b.cluster, b.node, "gateway")

    def component(name: str) -> str:
        query = f'sum(llm_gateway_latency_component_seconds{{@, component="{name}"}})'
        return b.lookup(query, keys, "humanizeDuration")

    return [
        b.alert(
            "LLMGatewayErrors",
            f"(\n  {errors}\n/\n  ({responses} > 0)\n) > {t.gateway_error_ratio:g}\n"
            f"and\n{responses} > {t.gateway_min_requests_per_second:g}",
            "A gateway in front of LLM engines answers with server errors.",
            f"{ident} answered {{{{ $value | humanizePercentage }}}} of its requests with 5xx over {w} "
            "(502/503/504 in llm_gateway_requests_total{code}); see /diagnosis gateways for whether the engine "
            "behind it is down or the gateway itself is the limit.",
        ),
        b.alert(
            "LLMIngressLatencyHigh",
            f"sum by ({by}) ({before_engine}) > {t.ingress_latency_seconds:g}",
            "Requests spend long before they reach the LLM engine.",
            f"{ident}: {{{{ $value | humanizeDuration }}}} per request are spent before the engine (window means): "
            f"client network {component('client_to_gateway')}, the gateway itself {component('gateway')}, "
            f"gateway to engine {component('gateway_to_engine')}; the engine {component('engine')}.",
        ),
    ]
