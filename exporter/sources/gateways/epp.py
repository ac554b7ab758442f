"""llm-d endpoint picker (EPP): `llm_d_epp_*`, and the deprecated twins it still emits.

llm-d-router (the renamed llm-d inference scheduler, which took the EPP over from the Gateway API
inference extension) writes every request metric twice during the migration: the canonical
`llm_d_epp_*` series and its `inference_objective_*` / `inference_pool_*` /
`inference_extension_*` predecessor (llm-d/llm-d-router docs/metrics.md, "Deprecated series").
The newest name present is read and the older one ignored, so each request counts once; an EPP of
the Gateway API inference extension that only has the old names is read through them.
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import (
    GatewayMapping,
    GatewayReading,
    histogram_names,
    merged_histogram,
    newest,
    status_key,
    total,
)
from exporter.sources.gateways.registry import MAPPINGS

REQUESTS = ("llm_d_epp_request_total", "inference_objective_request_total", "inference_model_request_total")
ERRORS = (
    "llm_d_epp_request_error_total",
    "inference_objective_request_error_total",
    "inference_model_request_error_total",
)
DURATION = (
    "llm_d_epp_request_duration_seconds",
    "inference_objective_request_duration_seconds",
    "inference_model_request_duration_seconds",
)
TTFT = (
    "llm_d_epp_request_ttft_seconds",
    "inference_objective_request_ttft_seconds",
    "inference_model_request_ttft_seconds",
)
QUEUE = (
    "llm_d_epp_flow_control_request_queue_duration_seconds",
    "inference_extension_flow_control_request_queue_duration_seconds",
)
RUNNING = ("llm_d_epp_request_running", "inference_objective_running_requests", "inference_model_running_requests")
QUEUE_SIZE = ("llm_d_epp_flow_control_queue_size", "inference_extension_flow_control_queue_size")
READY = ("llm_d_epp_ready_endpoints", "inference_pool_ready_pods")

#: the EPP's canonical error codes (pkg/common/error/error.go) as the HTTP status Envoy returns
ERROR_STATUS = {
    "BadRequest": "400",
    "Unauthorized": "401",
    "Forbidden": "403",
    "NotFound": "404",
    "PreconditionFailed": "412",
    "ResourceExhausted": "429",
    "Internal": "500",
    "Unknown": "500",
    "ModelServerError": "502",
    "ServiceUnavailable": "503",
}


class EppMapping(GatewayMapping):
    gateway_type = "epp"
    ttft_clock = (
        "request headers received at the EPP's ext_proc → first response body chunk; streaming requests only "
        '(streaming="true"): includes scheduling, the flow-control queue, the gateway→engine hop and the engine'
    )

    # Labelled per objective: model_name (the InferenceObjective's), target_model_name (what it
    # routes to, a LoRA adapter or the base model) and priority.
    sliced_histograms = (("request_duration", DURATION),)

    def matches(self, names: set[str]) -> bool:
        # the pool's ready endpoints too: an EPP that has served no request yet has no request series
        return any(name in names for name in (*REQUESTS, *READY, *(d + "_count" for d in DURATION)))

    def wanted(self) -> frozenset[str]:
        return frozenset(
            {*REQUESTS, *ERRORS, *RUNNING, *QUEUE_SIZE, *READY, *histogram_names(*DURATION, *TTFT, *QUEUE)}
        )

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        errors = 0.0
        for series, value in newest(parsed, *ERRORS).items():
            # GAIE before the move put the model server's HTTP status itself in error_code.
            code = dict(series).get("error_code", "Unknown")
            status = code if status_key(code) is not None else ERROR_STATUS.get(code, "500")
            reading.count(status, value)
            errors += value
        requests = total(newest(parsed, *REQUESTS))
        if requests is not None:
            reading.count("2xx", max(0.0, requests - errors))
        for key, names, match in (
            ("request_duration", DURATION, None),
            ("time_to_first_token", TTFT, {"streaming": "true"} if parsed.get(TTFT[0] + "_bucket") else None),
            ("queue_time", QUEUE, None),
        ):
            histogram = merged_histogram(parsed, names, match=match)
            if histogram is not None:
                reading.histograms[key] = histogram
        reading.requests_in_flight = total(newest(parsed, *RUNNING))
        reading.requests_queued = total(newest(parsed, *QUEUE_SIZE))
        ready = total(newest(parsed, *READY))
        if ready is not None:
            reading.backends["up"] = ready
        return reading


# Before the Envoy AI Gateway that fronts it: a payload of both is the endpoint picker's.
MAPPINGS.register(EppMapping(), order=10)
