"""A gateway's access log over syslog: HAProxy's httplog lines become latency histograms of every
request (exporter/sources/access_log.py), and the HAProxy gateway source exports them."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.model import QuantileSummary, Sample
from exporter.settings import GatewayTarget
from exporter.slo.attainment import within
from exporter.sources.access_log import AccessLogReceiver
from exporter.sources.base import collect_now
from exporter.sources.gateway import GatewaySource
from tests.support import UNHURRIED, RouteServer, free_port, respond_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gateways"
REQUEST = '"POST /v1/completions HTTP/1.1"'


def httplog(timers: str, status: int = 200, frontend: str = "llm") -> bytes:
    """One `option httplog` line after a syslog header (RFC 3164, as HAProxy 2.6 sends by default)."""
    return (
        f"<134>Oct 11 22:14:15 haproxy[4242]: 127.0.0.1:51234 [11/Oct/2026:22:14:15.120] {frontend} "
        f"engines/engine {timers} {status} 2750 - - ---- 3/3/1/1/0 0/0 {REQUEST}"
    ).encode()


@pytest.fixture
def receiver() -> Iterator[AccessLogReceiver]:
    r = AccessLogReceiver("127.0.0.1:9", "http://127.0.0.1:8404/metrics")
    yield r
    r.close()


def test_timers_become_request_queue_and_upstream_histograms(receiver: AccessLogReceiver) -> None:
    receiver.receive(httplog("0/40/1/9/345"), "127.0.0.1")  # 40 ms queued, 345 ms in all
    receiver.receive(httplog("2/0/0/3/1500"), "127.0.0.1")
    found = receiver._timers  # the histograms before start(): no socket needed to count
    total, queue, upstream = (found[k].histogram() for k in ("request_duration", "queue_time", "upstream_duration"))
    assert (total.count, total.sum) == (2, pytest.approx(1.845))
    assert queue.sum == pytest.approx(0.040)
    assert upstream.sum == pytest.approx(0.305 + 1.498)  # Ta - TR - Tw: from the connect to the last byte
    # 0.345 s is within 0.5 s and 1.5 s within 1.5 s, exactly: both are bucket edges
    assert (within(0.5, total).lower, within(1.5, total).lower, within(0.3, total).lower) == (1, 2, 0)
    assert receiver.counts["counted"] == 2


@pytest.mark.parametrize(
    "line",
    [
        httplog("0/0/0/-1/12", status=504),  # no response from the server: the gateway answered
        httplog("0/30001/-1/-1/30001", status=503),  # a queue timeout
        httplog("0/0/0/3/+345"),  # `option logasap`: logged before the end
        httplog("0/0/0/0/1", frontend="stats"),  # the stats frontend's own /metrics
    ],
)
def test_requests_the_gateway_failed_or_did_not_finish_go_in_no_histogram(
    receiver: AccessLogReceiver, line: bytes
) -> None:
    receiver.receive(line, "127.0.0.1")
    assert receiver.counts["not_counted"] == 1 and receiver._timers["request_duration"].count == 0


def test_rfc5424_and_raw_lines_parse_and_garbage_is_counted(receiver: AccessLogReceiver) -> None:
    raw = httplog("0/0/0/5/120").split(b"]: ", 1)[1]
    rfc5424 = b"<134>1 2026-10-11T22:14:15.003Z gw haproxy 4242 - - " + raw
    receiver.receive(raw + b"\n" + rfc5424, "127.0.0.1")  # two lines in one datagram
    receiver.receive(b"<134>Oct 11 22:14:15 haproxy[1]: Proxy llm started.", "127.0.0.1")
    assert receiver.counts == {"counted": 2, "not_counted": 0, "unparsed": 1, "refused_sender": 0}


def test_a_datagram_from_another_address_is_refused(receiver: AccessLogReceiver) -> None:
    receiver.receive(httplog("0/0/0/5/120"), "192.0.2.7")
    assert receiver.counts["refused_sender"] == 1 and receiver._timers["request_duration"].count == 0


def test_lines_arrive_over_udp_and_the_haproxy_source_exports_them_as_summaries() -> None:
    port = free_port()
    server = RouteServer({"/metrics": respond_with((FIXTURES / "haproxy-2.6.txt").read_text("utf-8"))})
    target = GatewayTarget(
        url=server.url("/metrics"), name="hap", type="haproxy", access_log=f"127.0.0.1:{port}", limits=UNHURRIED
    )
    source = GatewaySource(target, window_seconds=60.0)
    try:
        collect_now(source, 0.0)  # binds the receiver
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for total in (120, 480, 2400):
                sender.sendto(httplog(f"0/0/0/5/{total}"), ("127.0.0.1", port))
        deadline = time.monotonic() + 10
        metrics = collect_now(source, 1.0)
        while time.monotonic() < deadline and not any(
            m.name == "llm_gateway_request_duration_seconds" for m in metrics
        ):
            time.sleep(0.05)
            metrics = collect_now(source, 1.0)
        metrics = collect_now(source, 2.0)
    finally:
        source.close()
        server.close()
    summary = next(m for m in metrics if m.name == "llm_gateway_request_duration_seconds")
    assert isinstance(summary, QuantileSummary) and summary.count == 3 and summary.sum == pytest.approx(3.0)
    assert summary.window is not None and summary.window.count == 3  # increase over the window
    assert summary.histogram is not None and within(0.5, summary.histogram).lower == 2
    lines = {m.labels["result"]: m.value for m in metrics if m.name == "llm_gateway_access_log_lines_total"}
    assert lines["counted"] == 3
    assert [m.value for m in metrics if isinstance(m, Sample) and m.name == "llm_gateway_access_log_up"] == [1.0]
    # the HAProxy scrape's own figures are still there
    assert any(m.name == "llm_gateway_average_seconds" for m in metrics)


def test_a_port_in_use_is_reported_and_retried() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        receiver = AccessLogReceiver(f"127.0.0.1:{port}", "http://127.0.0.1/metrics")
        assert receiver.histograms() == {} and not receiver.listening
    try:
        receiver.histograms()  # the port is free now: bound at the next collection
        assert receiver.listening
    finally:
        receiver.close()
