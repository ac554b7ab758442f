"""The gateway source against loopback servers: detection, the normalized families, windows,
and the engine source's bounds (garbage, huge and slow gateways are down with a reason)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ScrapeLimits
from exporter.sources.base import SourceError, collect_now
from exporter.sources.gateway import GatewaySource
from tests.support import FIXTURES, RouteServer, respond_with

GW = {"gateway": "gw", "gateway_type": "ingress-nginx"}


def sample_value(metrics: list[Metric], name: str, **labels: str) -> float | None:
    for metric in metrics:
        if isinstance(metric, Sample) and metric.name == name and metric.labels == {**GW, **labels}:
            return metric.value
    return None


NGINX = (FIXTURES / "gateways" / "ingress-nginx.txt").read_text()


@pytest.fixture
def server() -> Iterator[RouteServer]:
    server = RouteServer({"/metrics": respond_with(NGINX)})
    yield server
    server.close()


def source(server: RouteServer, **limits: float) -> GatewaySource:
    return GatewaySource(
        GatewayTarget(url=server.url("/metrics"), name="gw", limits=ScrapeLimits(**limits)),  # type: ignore[arg-type]
        window_seconds=60,
    )


def test_an_untyped_gateway_is_detected_and_normalized(server: RouteServer) -> None:
    gateway = source(server)
    metrics = collect_now(gateway, 0.0)
    assert gateway.gateway_type == "ingress-nginx"
    assert sample_value(metrics, "llm_gateway_up") == 1
    assert sample_value(metrics, "llm_gateway_requests_total", code_class="5xx", code="503") == 4
    assert sample_value(metrics, "llm_gateway_requests_total", code_class="2xx", code="") == 90
    assert sample_value(metrics, "llm_gateway_connections_active") == 12
    summaries = {m.name: m for m in metrics if isinstance(m, QuantileSummary)}
    assert summaries["llm_gateway_request_duration_seconds"].count == 4
    assert "llm_gateway_time_to_first_token_seconds" not in summaries


def test_window_quantiles_come_from_bucket_deltas(server: RouteServer) -> None:
    gateway = source(server)
    first = {m.name: m for m in collect_now(gateway, 0.0) if isinstance(m, QuantileSummary)}
    q = dict(first["llm_gateway_upstream_duration_seconds"].quantiles)
    assert q[0.5] != q[0.5]  # NaN: one scrape, no window yet
    more = NGINX.replace('le="0.5"} 2', 'le="0.5"} 12').replace('le="1"} 3', 'le="1"} 13')
    more = more.replace('le="2.5"} 4', 'le="2.5"} 14').replace('le="5"} 4', 'le="5"} 14')
    more = more.replace('le="10"} 4', 'le="10"} 14').replace('le="+Inf"} 4', 'le="+Inf"} 14')
    server.routes["/metrics"] = respond_with(more)
    second = {m.name: m for m in collect_now(gateway, 5.0) if isinstance(m, QuantileSummary)}
    q = dict(second["llm_gateway_upstream_duration_seconds"].quantiles)
    assert 0.25 < q[0.5] <= 0.5  # ten new observations, all in (0.25, 0.5]


def test_a_payload_of_no_gateway_is_a_parse_error(server: RouteServer) -> None:
    server.routes["/metrics"] = respond_with("vllm:num_requests_running 1\n")
    with pytest.raises(SourceError) as caught:
        collect_now(source(server), 0.0)
    assert caught.value.reason == "parse"


def test_a_huge_gateway_is_too_large(server: RouteServer) -> None:
    server.routes["/metrics"] = respond_with(NGINX * 50)
    with pytest.raises(SourceError) as caught:
        collect_now(source(server, max_response_bytes=4096), 0.0)
    assert caught.value.reason == "too_large"


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.end_headers()
    for line in NGINX.splitlines(keepends=True)[:40]:
        handler.wfile.write(line.encode())
        handler.wfile.flush()
        time.sleep(0.1)


def test_a_trickling_gateway_times_out_at_its_deadline(server: RouteServer) -> None:
    server.routes["/metrics"] = _trickle
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        collect_now(source(server, timeout_seconds=0.5), 0.0)
    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 3.0


def test_down_metrics_say_the_gateway_is_down(server: RouteServer) -> None:
    down = source(server).down_metrics()
    assert down == [Sample("llm_gateway_up", {"gateway": "gw", "gateway_type": "unknown"}, 0.0)]
