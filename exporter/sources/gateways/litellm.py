"""LiteLLM proxy (`litellm_*`, its Prometheus callback: `callbacks: ["prometheus"]`).

Clocks (BerriAI/litellm litellm/integrations/prometheus.py): `litellm_request_total_latency_metric`
runs from the request reaching the proxy to the end of processing; `litellm_llm_api_latency_metric`
is the upstream call alone; `litellm_llm_api_time_to_first_token_metric` runs from the upstream
call's start to its first chunk, streaming only, so LiteLLM's own pre-processing is not in it.
prometheus_client appends `_total` to the counters; both spellings are read, the newest first.
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import (
    GatewayMapping,
    GatewayReading,
    histogram_names,
    merged_histogram,
    newest,
    total,
)
from exporter.sources.gateways.registry import MAPPINGS

REQUESTS = ("litellm_proxy_total_requests_metric_total", "litellm_proxy_total_requests_metric")
HISTOGRAMS = {
    "request_duration": "litellm_request_total_latency_metric",
    "upstream_duration": "litellm_llm_api_latency_metric",
    "time_to_first_token": "litellm_llm_api_time_to_first_token_metric",
    "queue_time": "litellm_request_queue_time_seconds",
}
IN_FLIGHT = "litellm_in_flight_requests"
DEPLOYMENT_STATE = "litellm_deployment_state"  # 0 healthy, 1 partial outage, 2 complete outage


class LitellmMapping(GatewayMapping):
    gateway_type = "litellm"
    ttft_clock = (
        "the upstream call's start → its first streamed chunk: the gateway→engine hop and the engine, without "
        "LiteLLM's own pre-processing or the client's network"
    )

    # Labelled per request: team, team_alias, api_key_alias, hashed_api_key, end_user, user.
    sliced_histograms = (
        ("request_duration", (HISTOGRAMS["request_duration"],)),
        ("time_to_first_token", (HISTOGRAMS["time_to_first_token"],)),
    )

    def matches(self, names: set[str]) -> bool:
        return any(name.startswith("litellm_") for name in names)

    def wanted(self) -> frozenset[str]:
        return frozenset({*REQUESTS, IN_FLIGHT, DEPLOYMENT_STATE, *histogram_names(*HISTOGRAMS.values())})

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        for series, value in newest(parsed, *REQUESTS).items():
            reading.count(dict(series).get("status_code", ""), value)
        for key, name in HISTOGRAMS.items():
            histogram = merged_histogram(parsed, (name,))
            if histogram is not None:
                reading.histograms[key] = histogram
        reading.requests_in_flight = total(parsed.get(IN_FLIGHT, {}))
        states = parsed.get(DEPLOYMENT_STATE, {})
        if states:
            reading.backends["up"] = float(sum(1 for v in states.values() if v < 2))
            reading.backends["down"] = float(sum(1 for v in states.values() if v >= 2))
        return reading


MAPPINGS.register(LitellmMapping(), order=30)
