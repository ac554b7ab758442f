"""Gateway payloads normalized into GatewayReadings, from the captures in tests/fixtures/gateways
(README.md there says where each came from). Expected values were read off the captures."""

from __future__ import annotations

import pytest

from exporter.promtext import parse_wanted, sample_names
from exporter.sources.gateways import MAPPINGS, detect
from exporter.sources.gateways.common import GatewayReading, status_key
from tests import epp_captures
from tests.support import FIXTURES

GATEWAYS = FIXTURES / "gateways"


def read(name: str) -> tuple[str | None, GatewayReading]:
    text = (GATEWAYS / name).read_text()
    mapping = detect(sample_names(text))
    assert mapping is not None, f"{name}: no gateway detected"
    return mapping.gateway_type, mapping.read(parse_wanted(text, mapping.wanted()))


@pytest.mark.parametrize(
    ("capture", "gateway_type"),
    [
        ("epp-llm-d-router.txt", "epp"),
        ("envoy-ai-gateway.txt", "envoy-ai-gateway"),
        ("haproxy-2.6-backend-down.txt", "haproxy"),
        ("ingress-nginx.txt", "ingress-nginx"),
    ],
)
def test_each_capture_is_detected_as_its_gateway(capture: str, gateway_type: str) -> None:
    assert read(capture)[0] == gateway_type


def test_epp_reads_the_new_names_and_counts_each_request_once() -> None:
    _, reading = read("epp-llm-d-router.txt")
    # llm_d_epp_request_total 2+1+1 = 4, and its deprecated twin inference_objective_request_total says the
    # same 4 again: read once. Errors Internal 2 (500), ModelServerError 1 (502), ResourceExhausted 1 (429).
    assert sum(reading.responses.values()) == 4
    assert reading.responses[("5xx", "")] == 2
    assert reading.responses[("5xx", "502")] == 1
    assert reading.responses[("4xx", "429")] == 1
    assert reading.responses[("2xx", "")] == 0
    assert reading.histograms["request_duration"].count == 4  # not 8: the twin is not added
    assert reading.requests_in_flight == 2  # llm_d_epp_request_running 1 + 1
    assert reading.backends == {"up": 3}


def test_epp_ttft_is_read_from_streamed_requests_only() -> None:
    _, reading = read("epp-llm-d-router.txt")
    ttft = reading.histograms["time_to_first_token"]
    assert (ttft.count, ttft.sum) == (2, pytest.approx(1.5))  # 0.3 + 1.2; the non-streamed 2.5 s is left out


def test_epp_of_the_inference_extension_is_read_through_the_old_names() -> None:
    text = (GATEWAYS / "epp-llm-d-router.txt").read_text()
    old_only = "\n".join(line for line in text.splitlines() if "llm_d_epp_" not in line)
    mapping = MAPPINGS["epp"]
    assert mapping.matches(sample_names(old_only))
    reading = mapping.read(parse_wanted(old_only, mapping.wanted()))
    assert sum(reading.responses.values()) == 4
    assert reading.backends == {"up": 3}  # inference_pool_ready_pods


def test_envoy_ai_gateway_counts_error_type_as_5xx() -> None:
    _, reading = read("envoy-ai-gateway.txt")
    # 1 (admin test) + 4 successes, 1 with error_type="_OTHER"
    assert reading.responses == {("2xx", ""): 5, ("5xx", ""): 1}
    assert reading.histograms["time_to_first_token"].count == 3
    assert reading.histograms["time_to_first_token"].sum == pytest.approx(0.59)


def test_envoy_ai_gateway_keeps_one_bucket_layout() -> None:
    _, reading = read("envoy-ai-gateway.txt")
    duration = reading.histograms["request_duration"]
    # The series with another layout (the admin test's +Inf-only histogram) is left out, not mixed in.
    assert len(duration.bounds) == 15
    assert duration.cumulative[-1] == duration.count


def test_haproxy_with_its_server_down() -> None:
    _, reading = read("haproxy-2.6-backend-down.txt")
    assert reading.responses[("5xx", "")] == 6  # frontend llm; the stats frontend is left out
    assert reading.backends == {"up": 0, "down": 1}
    assert reading.upstream_connection_errors_total == 6
    assert reading.averages == {"request_duration": 0, "upstream_duration": 0, "queue_time": 0}
    assert reading.histograms == {}  # HAProxy has no latency histograms


def test_ingress_nginx_keeps_the_codes_that_matter() -> None:
    _, reading = read("ingress-nginx.txt")
    assert reading.responses == {
        ("2xx", ""): 90,
        ("4xx", "499"): 3,
        ("5xx", "502"): 2,
        ("5xx", "503"): 4,
        ("5xx", ""): 1,
    }
    assert reading.histograms["upstream_duration"].count == 4
    assert "time_to_first_token" not in reading.histograms  # header time is no TTFT
    assert (reading.connections_active, reading.requests_in_flight) == (12, 7)


@pytest.mark.parametrize(
    ("status", "key"),
    [("503", ("5xx", "503")), ("500", ("5xx", "")), ("2xx", ("2xx", "")), ("499", ("4xx", "499")), ("other", None)],
)
def test_status_key(status: str, key: tuple[str, str] | None) -> None:
    assert status_key(status) == key


def test_real_haproxy_in_front_of_vllm() -> None:
    gateway_type, reading = read("haproxy-2.6.txt")
    assert gateway_type == "haproxy"
    # 8 completions (2xx) and 8 requests for an unknown model (vLLM's 404) through frontend "llm"
    assert reading.responses[("2xx", "")] == 8
    assert reading.responses[("4xx", "")] == 8
    assert reading.responses[("5xx", "")] == 0
    assert reading.backends == {"up": 1, "down": 0}
    assert reading.averages["request_duration"] >= reading.averages["upstream_duration"] > 0


def test_real_litellm_in_front_of_vllm() -> None:
    gateway_type, reading = read("litellm-1.108.txt")
    assert gateway_type == "litellm"
    # 8 completions (200) and 8 requests for an unknown model, which LiteLLM answers 400 itself
    assert reading.responses == {("2xx", ""): 8, ("4xx", ""): 8}
    request, upstream = reading.histograms["request_duration"], reading.histograms["upstream_duration"]
    assert request.count == upstream.count == 8
    assert request.sum >= upstream.sum  # the whole proxy request contains its upstream call
    assert reading.histograms["time_to_first_token"].count == 4  # streamed requests only
    assert reading.histograms["queue_time"].count == 8
    assert reading.requests_in_flight == 1  # the /metrics request itself (ASGI middleware)
    assert reading.backends == {"up": 1, "down": 0}  # litellm_deployment_state 0: healthy


def test_the_full_size_epp_captures_are_what_their_generator_writes() -> None:
    # tests/epp_captures.py is their provenance: names, types, labels and buckets of the EPP's code.
    assert epp_captures.LLM_D_CAPTURE.read_text() == epp_captures.llm_d_router()
    assert epp_captures.GAIE_CAPTURE.read_text() == epp_captures.inference_extension()


def test_haproxy_requests_without_a_status_are_client_aborts_499() -> None:
    # HAProxy's class `other`: requests its clients abandoned before any status (status -1 in its log).
    text = (GATEWAYS / "haproxy-2.6.txt").read_text()
    aborted = text.replace(
        'haproxy_frontend_http_responses_total{proxy="llm",code="other"} 0',
        'haproxy_frontend_http_responses_total{proxy="llm",code="other"} 7',
    )
    assert aborted != text
    mapping = MAPPINGS["haproxy"]
    reading = mapping.read(parse_wanted(aborted, mapping.wanted()))
    assert reading.responses[("4xx", "499")] == 7
    assert status_key("408") == ("4xx", "408")  # a client's request timeout keeps its code too
