"""HAProxy's built-in Prometheus exporter (`http-request use-service prometheus-exporter`).

HAProxy counts responses by class only (`code="5xx"`), so `code` stays empty: a queue timeout's
503 and a server timeout's 504 are both `5xx` here, told apart by the queue and connection
signals; a client's timeout while sending its request (`timeout http-request`) is a 408 in `4xx`.
Its class `other` holds the requests that got no status at all, which on a proxy are the ones the
client abandoned before a response (HAProxy logs them with status -1 and a `C` termination flag,
nginx as 499): they are counted as `4xx` with code `499`, the class and code users know them by.
It has no latency histograms: each backend reports means over its last 1024 requests
(`*_time_average_seconds`), kept as `llm_gateway_average_seconds`. Frontends named `stats`
(the exporter's own listener, by convention) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.promtext import LabelKey, ParsedSamples
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, total
from exporter.sources.gateways.registry import MAPPINGS

_P = "haproxy_"
RESPONSES = _P + "frontend_http_responses_total"
CURRENT_SESSIONS = _P + "frontend_current_sessions"
LIMIT_SESSIONS = _P + "frontend_limit_sessions"
BACKEND_SESSIONS = _P + "backend_current_sessions"
BACKEND_QUEUE = _P + "backend_current_queue"
SERVER_STATUS = _P + "server_status"
CONNECTION_ERRORS = _P + "backend_connection_errors_total"
#: HAProxy's timers: Tt (whole session), Tr (server response headers), Tq (queue)
AVERAGES = {
    "request_duration": _P + "backend_total_time_average_seconds",
    "upstream_duration": _P + "backend_response_time_average_seconds",
    "queue_time": _P + "backend_queue_time_average_seconds",
}
STATS_PROXIES = frozenset({"stats", "prometheus", "metrics"})
#: HAProxy's class of responses without a status, and the code they are counted under
NO_STATUS, CLIENT_CLOSED_REQUEST = "other", "499"


def _serving(series: Mapping[LabelKey, float]) -> dict[LabelKey, float]:
    return {k: v for k, v in series.items() if dict(k).get("proxy") not in STATS_PROXIES}


class HaproxyMapping(GatewayMapping):
    gateway_type = "haproxy"
    # its histograms are its access log's, which takes every response below 500: its own 429s
    # (a `deny_status 429` rate limit) are in them, its 503s are not (exporter/sources/access_log.py)
    refusals_in_histograms = frozenset({"429"})

    def matches(self, names: set[str]) -> bool:
        return RESPONSES in names or SERVER_STATUS in names

    def wanted(self) -> frozenset[str]:
        return frozenset(
            {RESPONSES, CURRENT_SESSIONS, LIMIT_SESSIONS, BACKEND_SESSIONS, BACKEND_QUEUE, SERVER_STATUS}
            | {CONNECTION_ERRORS, *AVERAGES.values()}
        )

    def read(self, parsed: ParsedSamples) -> GatewayReading:
        reading = GatewayReading()
        for series, value in _serving(parsed.get(RESPONSES, {})).items():
            code = dict(series).get("code", "")
            reading.count(CLIENT_CLOSED_REQUEST if code == NO_STATUS else code, value)
        reading.connections_active = total(_serving(parsed.get(CURRENT_SESSIONS, {})))
        reading.connections_limit = total(_serving(parsed.get(LIMIT_SESSIONS, {})))
        reading.requests_in_flight = total(parsed.get(BACKEND_SESSIONS, {}))
        reading.requests_queued = total(parsed.get(BACKEND_QUEUE, {}))
        reading.upstream_connection_errors_total = total(parsed.get(CONNECTION_ERRORS, {}))
        for key, name in AVERAGES.items():
            means = parsed.get(name, {})
            # The busiest backend's mean: one idle backend's 0 must not dilute the one serving.
            if means:
                reading.averages[key] = max(means.values())
        status = parsed.get(SERVER_STATUS, {})
        if status:
            reading.backends["up"] = total(status, {"state": "UP"}) or 0.0
            reading.backends["down"] = total(status, {"state": "DOWN"}) or 0.0
        return reading


MAPPINGS.register(HaproxyMapping(), order=40)
