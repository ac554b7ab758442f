"""Clients that abort mid-request, through the real HAProxy (Debian's, its Prometheus exporter on),
counted as 499 in `llm_gateway_requests_total` and named in the ingress stage's evidence.

HAProxy gives a request its client abandoned while sending its body no status at all: it counts
it in its class `other` (status -1 in its log, `CH--`/`CD--` flags), which the exporter used to
drop. A stand-in engine on loopback answers the requests that complete; nothing else is needed
(no model), so this runs in the integration tier."""

from __future__ import annotations

import json
import socket
import time

import pytest
import requests

from exporter.diagnosis.path import PathDiagnoser
from exporter.model import Sample
from exporter.settings import GatewayTarget, Thresholds
from exporter.sources.base import collect_now
from exporter.sources.gateway import GatewaySource
from tests.integration.gateway_procs import Haproxy
from tests.support import RouteServer, respond_with

pytestmark = pytest.mark.integration

ABORTED = 6
COMPLETED = 9
COMPLETION = json.dumps({"id": "cmpl-1", "choices": [{"text": "ok"}]})


def abort_mid_body(port: int) -> None:
    """A POST whose body stops after a few bytes of the 4096 announced, then the connection closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        head = "POST /v1/completions HTTP/1.1\r\nHost: llm\r\nContent-Length: 4096\r\n\r\n"
        client.sendall(head.encode() + b'{"model": "m", "prompt": "')
        time.sleep(0.05)


def haproxy_count(metrics_url: str, code: str) -> float:
    """HAProxy's own count of the serving frontend's responses of `code` (its exposition, read raw)."""
    for line in requests.get(metrics_url, timeout=5).text.splitlines():
        if (
            line.startswith("haproxy_frontend_http_responses_total{")
            and 'proxy="llm"' in line
            and f'code="{code}"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def requests_by_code(metrics: list) -> dict[tuple[str, str], float]:
    return {
        (m.labels["code_class"], m.labels["code"]): m.value
        for m in metrics
        if isinstance(m, Sample) and m.name == "llm_gateway_requests_total"
    }


def test_clients_that_abort_mid_request_are_499_and_named_in_the_ingress_evidence() -> None:
    engine = RouteServer({"/v1/completions": respond_with(COMPLETION, content_type="application/json")})
    gateway = Haproxy(engine.port)
    try:
        source = GatewaySource(GatewayTarget(url=gateway.metrics_url, name="lb", type="haproxy"), window_seconds=60)
        diagnoser = PathDiagnoser()
        diagnoser.configure([GatewayTarget(url=gateway.metrics_url, name="lb", type="haproxy")], [])
        thresholds = Thresholds()
        started = time.time()
        before = collect_now(source, started)
        diagnoser.update(before, started, thresholds)

        for _ in range(COMPLETED):
            answer = requests.post(gateway.base_url + "/v1/completions", json={"model": "m", "prompt": "x"}, timeout=10)
            assert answer.status_code == 200
        for _ in range(ABORTED):
            abort_mid_body(gateway.port)
        deadline = time.monotonic() + 30  # HAProxy counts an abort once it has closed both sides
        while haproxy_count(gateway.metrics_url, "other") < ABORTED and time.monotonic() < deadline:
            time.sleep(0.2)
        assert haproxy_count(gateway.metrics_url, "other") == ABORTED

        after = collect_now(source, started + 10)
        counts = requests_by_code(after)
        assert counts[("4xx", "499")] == ABORTED
        assert counts[("2xx", "")] == COMPLETED + requests_by_code(before)[("2xx", "")]
        diagnoser.update(after, started + 10, thresholds)
        (diagnosis,) = diagnoser.latest.values()
        named = [line for line in diagnosis.evidence if "499" in line]
        answered = ABORTED + COMPLETED
        share = f"{ABORTED / answered:.1%}"
        assert named == [
            f"ingress: client aborts and timeouts: 499: {ABORTED} of {answered} responses in the window ({share})"
        ]
        source.close()
    finally:
        gateway.close()
        engine.close()
