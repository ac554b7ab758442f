"""NVIDIA Dynamo's frontend (`dynamo_frontend_*`) and the KV router inside it (`dynamo_component_router_*`).

The frontend is the HTTP entry of a Dynamo deployment, aggregated or disaggregated; its TTFT runs
from the handler's entry to the first token, so in disaggregated serving it holds routing, the
prefill, the KV transfer and the first decode step: the pair's end-to-end TTFT. The router's
`kv_transfer_estimated_latency_seconds` is not the transfer: it is the time from the prefill's
completion to the first decode token (Dynamo PR #7590, "upper-bound estimate"), so it also holds the
decode worker's admission and first step. It is kept apart (`llm_gateway_kv_transfer_estimate_seconds`)
and the diagnosis quotes it as an upper bound, never as the transfer time.

Names, labels and buckets: ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs
(`frontend_service`, `name_prefix`) and lib/llm/src/http/service/metrics.rs; the requests counter
carries `status` (success, error) and `error_type` (validation, not_found, overload, unavailable,
cancelled, response_timeout, first_token_timeout, intra_token_timeout, internal, not_implemented,
backend_error, truncated_stream).
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, histogram_names, merged_histogram, total
from exporter.sources.gateways.registry import MAPPINGS

REQUESTS = "dynamo_frontend_requests_total"
HISTOGRAMS = {
    "request_duration": "dynamo_frontend_request_duration_seconds",
    "time_to_first_token": "dynamo_frontend_time_to_first_token_seconds",
    "kv_transfer_estimate": "dynamo_component_router_kv_transfer_estimated_latency_seconds",
}
IN_FLIGHT = "dynamo_frontend_inflight_requests"
#: requests waiting in the router's scheduler for a worker (per worker_type); `queued_requests`
#: counts every request until its first token, prefill included, so it is no queue
ROUTER_PENDING = "dynamo_frontend_router_queue_pending_requests"
#: the HTTP status each error type is answered with (lib/llm/src/http/service/openai.rs)
ERROR_STATUS = {
    "validation": "400",
    "not_found": "404",
    "overload": "429",
    "unavailable": "503",
    "cancelled": "499",
    "response_timeout": "504",
    "first_token_timeout": "504",
    "intra_token_timeout": "504",
    "not_implemented": "501",
}


class DynamoFrontendMapping(GatewayMapping):
    gateway_type = "dynamo-frontend"
    ttft_clock = (
        "the HTTP handler's entry → the first token: preprocessing, routing and, in disaggregated serving, the "
        "prefill, the KV transfer and the first decode step (the pair's end-to-end TTFT)"
    )

    def matches(self, names: set[str]) -> bool:
        return REQUESTS in names or HISTOGRAMS["time_to_first_token"] + "_count" in names

    def wanted(self) -> frozenset[str]:
        return frozenset({REQUESTS, IN_FLIGHT, ROUTER_PENDING, *histogram_names(*HISTOGRAMS.values())})

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        for series, value in parsed.get(REQUESTS, {}).items():
            labels = dict(series)
            if labels.get("status") == "success":
                reading.count("200", value)
            else:
                reading.count(ERROR_STATUS.get(labels.get("error_type", ""), "500"), value)
        for key, name in HISTOGRAMS.items():
            histogram = merged_histogram(parsed, (name,))
            if histogram is not None:
                reading.histograms[key] = histogram
        reading.requests_in_flight = total(parsed.get(IN_FLIGHT, {}))
        reading.requests_queued = total(parsed.get(ROUTER_PENDING, {}))
        return reading


MAPPINGS.register(DynamoFrontendMapping(), order=60)
