"""llm-d's P/D coordinator (`llm_d_coordinator_*`): the proxy that runs a request's render, encode,
prefill and decode steps against the gateway.

It times each step of its pipeline (`step_duration_seconds{step}`: render, replace-media-urls,
encode, prefill, conditional-decode, decode), a step's whole wall time including the backend call,
and deliberately exports no TTFT: the first token is in the decode stream it proxies unread
(llm-d/llm-d-router docs/metrics.coord.md, PR #2277). So it gives the pair's prefill leg as the
client's request sees it (the prefill pool's queue, its compute and the hops), read beside the
engines' own figures, and no end-to-end TTFT. Errors: `request_error_total{error_code}` with
bad_request, upstream_4xx, upstream_5xx, internal; every request counts in `request_total`.
"""

from __future__ import annotations

import math

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, histogram_names, merged_histogram, total
from exporter.sources.gateways.registry import MAPPINGS

PREFIX = "llm_d_coordinator_"
REQUESTS = PREFIX + "request_total"
ERRORS = PREFIX + "request_error_total"
DURATION = PREFIX + "request_duration_seconds"
RUNNING = PREFIX + "request_running"
STEPS = PREFIX + "step_duration_seconds"
ERROR_STATUS = {"bad_request": "400", "upstream_4xx": "4xx", "upstream_5xx": "5xx", "internal": "500"}


class LlmdCoordinatorMapping(GatewayMapping):
    gateway_type = "llm-d-coordinator"
    ttft_clock = None  # the coordinator does not read the decode stream it proxies

    def matches(self, names: set[str]) -> bool:
        return REQUESTS in names or STEPS + "_count" in names

    def wanted(self) -> frozenset[str]:
        return frozenset({REQUESTS, ERRORS, RUNNING, *histogram_names(DURATION, STEPS)})

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        requests = total(parsed.get(REQUESTS, {}))
        failed = 0.0
        for series, value in parsed.get(ERRORS, {}).items():
            reading.count(ERROR_STATUS.get(dict(series).get("error_code", ""), "500"), value)
            failed += value
        if requests is not None:
            reading.count("200", max(0.0, requests - failed))
        duration = merged_histogram(parsed, (DURATION,))
        if duration is not None:
            reading.histograms["request_duration"] = duration
        for step in sorted({dict(series).get("step", "") for series in parsed.get(STEPS + "_count", {})}):
            histogram = merged_histogram(parsed, (STEPS,), match={"step": step})
            if step and histogram is not None and math.isfinite(histogram.sum):
                reading.steps[step] = histogram
        reading.requests_in_flight = total(parsed.get(RUNNING, {}))
        return reading


MAPPINGS.register(LlmdCoordinatorMapping(), order=70)
