"""Envoy AI Gateway: the OpenTelemetry GenAI histograms its ext_proc exports (`gen_ai_*`).

The AI Gateway records no HTTP status: a failed request is recorded with `error_type` (the
fallback value `_OTHER`, envoyproxy/ai-gateway internal/metrics/metrics_impl.go). Those are counted
as `5xx` without a `code`; the rest as `2xx`. Token-usage histograms are not read.
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, histogram_names, merged_histogram
from exporter.sources.gateways.registry import MAPPINGS

DURATION = "gen_ai_server_request_duration_seconds"
TTFT = "gen_ai_server_time_to_first_token_seconds"


class EnvoyAiGatewayMapping(GatewayMapping):
    gateway_type = "envoy-ai-gateway"
    ttft_clock = (
        "request headers received in the ext_proc → first token seen in response-body handling: includes the "
        "gateway→engine hop and the engine, not the client's network"
    )

    def matches(self, names: set[str]) -> bool:
        return DURATION + "_count" in names or TTFT + "_count" in names

    def wanted(self) -> frozenset[str]:
        return frozenset(histogram_names(DURATION, TTFT))

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        for series, value in parsed.get(DURATION + "_count", {}).items():
            reading.count("5xx" if dict(series).get("error_type") else "2xx", value)
        for key, name in (("request_duration", DURATION), ("time_to_first_token", TTFT)):
            histogram = merged_histogram(parsed, (name,))
            if histogram is not None:
                reading.histograms[key] = histogram
        return reading


MAPPINGS.register(EnvoyAiGatewayMapping(), order=20)
