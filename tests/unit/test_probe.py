"""The prober against loopback OpenAI-compatible streams: client TTFT and e2e, and each failure
reason (connect, http_status, timeout, malformed_stream)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from exporter.config import build
from exporter.model import QuantileSummary, Sample
from exporter.settings import ProbeTarget
from exporter.sources.probe import ProbeSource
from exporter.validation import ConfigError
from tests.support import RouteServer, free_port, respond_with


def sse(delay_first: float = 0.0, tokens: int = 3, broken: bool = False):
    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        time.sleep(delay_first)
        for i in range(tokens):
            finish = "length" if i == tokens - 1 else None
            event = {"choices": [{"index": 0, "text": f"t{i}", "finish_reason": finish}]}
            handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"this is not SSE\n" if broken else b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True

    return respond


@pytest.fixture
def server() -> Iterator[RouteServer]:
    server = RouteServer({"/v1/completions": sse()})
    yield server
    server.close()


def probe(url: str, direct: str | None = None, timeout: float = 15.0) -> ProbeSource:
    return ProbeSource(ProbeTarget(name="p", url=url, model="m", direct_url=direct, timeout_seconds=timeout), 60.0)


def value(source: ProbeSource, name: str, **labels: str) -> float | None:
    for metric in source.collect(0.0):
        if isinstance(metric, Sample) and metric.name == name and metric.labels == {"probe": "p", **labels}:
            return metric.value
    return None


def summary(source: ProbeSource, name: str, path: str) -> QuantileSummary:
    return next(
        m for m in source.collect(0.0) if isinstance(m, QuantileSummary) and m.name == name and m.labels["path"] == path
    )


def test_a_stream_is_timed_from_send_to_first_token_and_to_its_end(server: RouteServer) -> None:
    server.routes["/v1/completions"] = sse(delay_first=0.3)
    source = probe(server.url("/v1"))
    source.probe_once()
    assert value(source, "llm_probe_up", path="gateway") == 1
    assert value(source, "llm_probe_success_total", path="gateway") == 1
    ttft = summary(source, "llm_probe_time_to_first_token_seconds", "gateway")
    e2e = summary(source, "llm_probe_e2e_latency_seconds", "gateway")
    assert 0.3 <= ttft.sum < 2.0
    assert e2e.sum >= ttft.sum
    assert dict(ttft.quantiles)[0.5] == pytest.approx(ttft.sum)


def test_gateway_and_direct_paths_are_probed_one_after_the_other(server: RouteServer) -> None:
    source = probe(server.url("/v1"), direct=server.url("/v1"))
    source.probe_once()
    assert value(source, "llm_probe_success_total", path="gateway") == 1
    assert value(source, "llm_probe_success_total", path="direct") == 1
    assert server.requests_seen == 2


# A generous timeout except where the timeout is the point: on a loaded machine a 503 once took
# longer than 0.8 s to arrive and was counted as a timeout.
@pytest.mark.parametrize(
    ("responder", "reason", "timeout"),
    [
        (respond_with(b"overloaded", 503), "http_status", 15.0),
        (sse(broken=True), "malformed_stream", 15.0),
        (sse(tokens=0), "malformed_stream", 15.0),
        (sse(delay_first=2.0), "timeout", 0.8),
    ],
)
def test_each_failure_is_counted_by_its_reason(server: RouteServer, responder, reason: str, timeout: float) -> None:
    server.routes["/v1/completions"] = responder
    source = probe(server.url("/v1"), timeout=timeout)
    source.probe_once()
    assert value(source, "llm_probe_up", path="gateway") == 0
    assert value(source, "llm_probe_failures_total", path="gateway", reason=reason) == 1
    others = [r for r in ("connect", "tls", "http_status", "timeout", "malformed_stream") if r != reason]
    assert all(value(source, "llm_probe_failures_total", path="gateway", reason=r) == 0 for r in others)


def test_nothing_listening_is_a_connect_failure() -> None:
    source = probe(f"http://127.0.0.1:{free_port()}/v1")
    source.probe_once()
    assert value(source, "llm_probe_failures_total", path="gateway", reason="connect") == 1


def test_a_slow_stream_is_cut_at_the_deadline(server: RouteServer) -> None:
    server.routes["/v1/completions"] = sse(delay_first=5.0)
    source = probe(server.url("/v1"), timeout=0.5)
    started = time.monotonic()
    source.probe_once()
    assert time.monotonic() - started < 3.0
    assert value(source, "llm_probe_failures_total", path="gateway", reason="timeout") == 1


def test_probe_settings_are_bounded() -> None:
    base = {"name": "p", "url": "http://127.0.0.1:1/v1", "model": "m"}
    assert build({"probes": [base]}).probes[0].interval_seconds == 30
    for bad, key in (
        ({"interval_seconds": 1}, "probes[0].interval_seconds"),
        ({"max_tokens": 0}, "probes[0].max_tokens"),
        ({"timeout_seconds": 40}, "probes[0].timeout_seconds"),
        ({"gateway": "nope"}, "probes[0].gateway"),
    ):
        with pytest.raises(ConfigError) as caught:
            build({"probes": [{**base, **bad}]})
        assert caught.value.where == key
