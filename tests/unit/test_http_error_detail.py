"""A non-200 answer's JSON error document reaches the SourceError, bounded in size and time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from exporter.discovery import kubeapi
from exporter.sources import event_loop
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import ERROR_DETAIL_CHARS, HttpClient, open_body
from tests.support import RouteServer


def answering(status: int, content_type: str, body: bytes, trickle: float = 0.0) -> RouteServer:
    server = RouteServer()

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if trickle:
            for i in range(len(body)):
                handler.wfile.write(body[i : i + 1])
                handler.wfile.flush()
                time.sleep(trickle)
        else:
            handler.wfile.write(body)

    server.routes["/api"] = respond
    return server


@pytest.fixture
def session() -> Iterator[HttpClient]:
    """The one HTTP client (exporter.sources.http_fetch), following no redirect."""
    client = HttpClient(follow_redirects=False)
    yield client
    client.close()


async def _get(client: HttpClient, url: str, timeout: float) -> None:
    async with open_body(client, url, timeout, 1 << 20):
        pass


def refusal(session: HttpClient, server: RouteServer, timeout: float = 5.0) -> tuple[SourceError, float]:
    """The SourceError of a GET and the seconds it took (the server is closed after)."""
    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as caught:
            event_loop.run(_get(session, server.url("/api?query=x"), timeout))
        took = time.monotonic() - started
    finally:
        server.close()
    assert caught.value.reason == "http_status"
    return caught.value, took


def test_prometheus_error_type_and_message(session: HttpClient) -> None:
    doc = {"status": "error", "errorType": "execution", "error": "found duplicate series for the match group"}
    error, _ = refusal(session, answering(422, "application/json", json.dumps(doc).encode()))
    assert str(error).endswith("HTTP 422 (execution): found duplicate series for the match group")


def test_kubernetes_status_message(session: HttpClient) -> None:
    doc = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
           "message": 'pods is forbidden: User "system:serviceaccount:x:y" cannot list\nresource "pods"'}  # fmt: skip
    error, _ = refusal(session, answering(403, "application/json", json.dumps(doc).encode()))
    assert str(error).endswith(
        'HTTP 403: pods is forbidden: User "system:serviceaccount:x:y" cannot list resource "pods"'
    )


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html", b"<h1>502 Bad Gateway</h1>"),
        ("application/json", b"not json"),
        ("application/json", b'["a list"]'),
        ("application/json", b'{"error": 5}'),
        ("application/json", json.dumps({"error": "x" * 40_000}).encode()),  # over the read bound: not parsed
    ],
)
def test_anything_else_is_the_status_alone(session: HttpClient, content_type: str, body: bytes) -> None:
    error, _ = refusal(session, answering(500, content_type, body))
    assert str(error).endswith("HTTP 500")


def test_a_long_message_is_cut(session: HttpClient) -> None:
    error, _ = refusal(session, answering(400, "application/json", json.dumps({"error": "y" * 8000}).encode()))
    assert str(error).endswith("HTTP 400: " + "y" * ERROR_DETAIL_CHARS)


def test_a_trickled_error_body_ends_with_the_deadline(session: HttpClient) -> None:
    body = json.dumps({"error": "slow " * 200}).encode()
    error, took = refusal(session, answering(500, "application/json", body, trickle=0.01), timeout=1.0)
    assert took < 4.0  # the body takes 10 s; the 1 s deadline, not the body, ends the GET
    assert "HTTP 500" in str(error)


@pytest.mark.parametrize(
    ("content_type", "body", "said"),
    [
        (
            "application/json",
            json.dumps({"kind": "Status", "message": "pods is forbidden"}).encode(),
            ": pods is forbidden",
        ),
        ("text/html", b"<html>\n  <h1>403 Forbidden</h1>\n</html>", ": <html> <h1>403 Forbidden</h1> </html>"),
        ("application/json", b"", ": (no readable reason)"),
    ],
)
def test_the_kubernetes_client_says_the_apis_reason(content_type: str, body: bytes, said: str) -> None:
    """The same reader as open_body's, with the start of any text where no JSON message is (a
    proxy's page in front of the API), and the ClusterRole hint on a 403."""
    server = answering(403, content_type, body)
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    server.routes["/api/v1/pods"] = server.routes["/api"]
    try:
        with pytest.raises(kubeapi.ApiError) as caught:
            api.list_pods("node")
    finally:
        api.close()
        server.close()
    assert (
        str(caught.value)
        == f"HTTP 403 from {server.url('')}{said} (check the ClusterRole grants get/list/watch on pods)"
    )
