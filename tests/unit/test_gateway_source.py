"""The gateway source against loopback servers: detection, the normalized families, windows,
and the engine source's bounds (garbage, huge and slow gateways are down with a reason)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from prometheus_client.parser import text_string_to_metric_families as text_families

from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ScrapeLimits
from exporter.sources.base import SourceError, collect_now
from exporter.sources.gateway import GatewaySource
from exporter.sources.gateways.common import status_key
from exporter.sources.gateways.epp import ERROR_STATUS
from tests.support import FIXTURES, UNHURRIED, UNHURRIED_SECONDS, RouteServer, respond_with

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
    limits.setdefault("timeout_seconds", UNHURRIED_SECONDS)
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


# --- the endpoint picker at its real size: its request families come ~95 KB into the body --------

EPP_CAPTURES = {
    "epp-llm-d-router-full.txt": ("llm_d_epp_request_total", "llm_d_epp_request_error_total"),
    "epp-inference-extension-full.txt": (
        "inference_objective_request_total",
        "inference_objective_request_error_total",
    ),
}


def independent_sums(text: str, requests: str, errors: str) -> tuple[float, dict[str, float]]:
    """sum(requests) and sum by (error_code) (errors), read with prometheus_client's parser."""
    total, by_code = 0.0, {}
    for family in text_families(text):
        for sample in family.samples:
            if sample.name == requests:
                total += sample.value
            elif sample.name == errors:
                code = sample.labels["error_code"]
                by_code[code] = by_code.get(code, 0.0) + sample.value
    return total, by_code


@pytest.mark.parametrize("capture", sorted(EPP_CAPTURES))
@pytest.mark.parametrize("configured", [True, False], ids=["type: epp", "detected"])
def test_an_endpoint_picker_at_its_real_size_reads_as_up_with_its_counts(capture: str, configured: bool) -> None:
    text = (FIXTURES / "gateways" / capture).read_text()
    requests, errors = EPP_CAPTURES[capture]
    assert text.find("\n" + requests.replace("_total", "")) > 64 * 1024  # past any fixed head
    server = RouteServer({"/metrics": respond_with(text)})
    try:
        target = GatewayTarget(
            url=server.url("/metrics"), name="gw", type="epp" if configured else None, limits=UNHURRIED
        )
        gateway = GatewaySource(target, window_seconds=60)
        metrics = collect_now(gateway, 0.0)
        gateway.close()
    finally:
        server.close()
    labels = {"gateway": "gw", "gateway_type": "epp"}
    samples = {
        (m.labels["code_class"], m.labels["code"]): m.value
        for m in metrics
        if isinstance(m, Sample) and m.name == "llm_gateway_requests_total"
    }
    assert Sample("llm_gateway_up", labels, 1.0) in metrics
    total, by_code = independent_sums(text, requests, errors)
    expected: dict[tuple[str, str], float] = {}
    for code, count in by_code.items():
        key = status_key(ERROR_STATUS[code])
        assert key is not None
        expected[key] = expected.get(key, 0.0) + count
    expected[("2xx", "")] = total - sum(by_code.values())
    assert samples == expected
    assert sum(samples.values()) == total


def test_a_configured_gateway_with_none_of_its_families_anywhere_is_a_parse_error() -> None:
    text = (FIXTURES / "gateways" / "epp-llm-d-router-full.txt").read_text()
    other = "\n".join(line for line in text.splitlines() if "epp" not in line and "inference_" not in line)
    server = RouteServer({"/metrics": respond_with(other + "\n")})
    try:
        target = GatewayTarget(url=server.url("/metrics"), name="gw", type="epp", limits=UNHURRIED)
        gateway = GatewaySource(target, window_seconds=60)
        with pytest.raises(SourceError) as caught:
            collect_now(gateway, 0.0)
        gateway.close()
    finally:
        server.close()
    assert caught.value.reason == "parse" and "no epp metrics" in str(caught.value)


def test_an_idle_endpoint_picker_with_no_request_yet_reads_as_up() -> None:
    # A Go counter vector with no children prints nothing: before its first request an EPP has only
    # its pool gauges (and the runtime's families in front of them).
    text = (FIXTURES / "gateways" / "epp-inference-extension-full.txt").read_text()
    idle = "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(("inference_objective_", "# HELP inference_objective", "# TYPE inference_objective"))
    )
    server = RouteServer({"/metrics": respond_with(idle + "\n")})
    try:
        gateway = GatewaySource(
            GatewayTarget(url=server.url("/metrics"), name="gw", limits=UNHURRIED), window_seconds=60
        )
        metrics = collect_now(gateway, 0.0)
        gateway.close()
    finally:
        server.close()
    assert gateway.gateway_type == "epp"
    assert Sample("llm_gateway_backends", {"gateway": "gw", "gateway_type": "epp", "state": "up"}, 4.0) in metrics


def test_malformed_lines_of_a_gateway_are_dropped_and_counted_not_the_scrape(server: RouteServer) -> None:
    broken = NGINX.replace('status="503"} 4', 'status="503"} 4_0', 1)
    assert broken != NGINX
    server.routes["/metrics"] = respond_with(broken)
    gateway = source(server)
    metrics = collect_now(gateway, 0.0)
    assert sample_value(metrics, "llm_gateway_up") == 1
    assert sample_value(metrics, "llm_gateway_requests_total", code_class="5xx", code="503") is None
    assert gateway.discards == {"malformed_line": 1}
    server.routes["/metrics"] = respond_with(NGINX)
    collect_now(gateway, 5.0)
    assert gateway.discards == {}
