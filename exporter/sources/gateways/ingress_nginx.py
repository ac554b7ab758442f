"""The ingress-nginx controller (`nginx_ingress_controller_*`, kubernetes/ingress-nginx).

Its request histograms come from nginx's own variables (rootfs/etc/nginx/lua/monitor.lua):
`request_duration_seconds` is `$request_time` (first client byte read → last byte sent, so it
includes delivering the response to the client) and `response_duration_seconds` is
`$upstream_response_time`. `header_duration_seconds` (`$upstream_header_time`) is not a time to
first token: engines send SSE headers before the first token, so no TTFT is read. `status` is the
per-request status, 499 (client closed) included.
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, histogram_names, merged_histogram, total
from exporter.sources.gateways.registry import MAPPINGS

_P = "nginx_ingress_controller_"
REQUESTS = _P + "requests"
DURATION = _P + "request_duration_seconds"
UPSTREAM = _P + "response_duration_seconds"
CONNECTIONS = _P + "nginx_process_connections"


class IngressNginxMapping(GatewayMapping):
    gateway_type = "ingress-nginx"
    # every request's $request_time is observed, whatever its status (rate-limited 429s and 503s too)
    refusals_in_histograms = frozenset({"429", "503"})

    def matches(self, names: set[str]) -> bool:
        return REQUESTS in names or DURATION + "_count" in names

    def wanted(self) -> frozenset[str]:
        return frozenset({REQUESTS, CONNECTIONS, *histogram_names(DURATION, UPSTREAM)})

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        for series, value in parsed.get(REQUESTS, {}).items():
            reading.count(dict(series).get("status", ""), value)
        for key, name in (("request_duration", DURATION), ("upstream_duration", UPSTREAM)):
            histogram = merged_histogram(parsed, (name,))
            if histogram is not None:
                reading.histograms[key] = histogram
        connections = parsed.get(CONNECTIONS, {})
        reading.connections_active = total(connections, {"state": "active"})
        reading.requests_in_flight = total(connections, {"state": "writing"})
        return reading


MAPPINGS.register(IngressNginxMapping(), order=50)
