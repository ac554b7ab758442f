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


def answering(
    status: int, content_type: str, body: bytes, trickle: float = 0.0, sent: list[int] | None = None
) -> RouteServer:
    """A server answering `status` with `body`; with `trickle`, a byte at a time that many seconds
    apart, counting the bytes written in `sent[0]` (the writes end when the client goes away)."""
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
                if sent is not None:
                    sent[0] = i + 1
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


def refusal(session: HttpClient, server: RouteServer, timeout: float = 5.0) -> SourceError:
    """The SourceError of a GET (the server is closed after)."""
    try:
        with pytest.raises(SourceError) as caught:
            event_loop.run(_get(session, server.url("/api?query=x"), timeout))
    finally:
        server.close()
    assert caught.value.reason == "http_status"
    return caught.value


def test_prometheus_error_type_and_message(session: HttpClient) -> None:
    doc = {"status": "error", "errorType": "execution", "error": "found duplicate series for the match group"}
    error = refusal(session, answering(422, "application/json", json.dumps(doc).encode()))
    assert str(error).endswith("HTTP 422 (execution): found duplicate series for the match group")


def test_kubernetes_status_message(session: HttpClient) -> None:
    doc = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
           "message": 'pods is forbidden: User "system:serviceaccount:x:y" cannot list\nresource "pods"'}  # fmt: skip
    error = refusal(session, answering(403, "application/json", json.dumps(doc).encode()))
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
    error = refusal(session, answering(500, content_type, body))
    assert str(error).endswith("HTTP 500")


def test_a_long_message_is_cut(session: HttpClient) -> None:
    error = refusal(session, answering(400, "application/json", json.dumps({"error": "y" * 8000}).encode()))
    assert str(error).endswith("HTTP 400: " + "y" * ERROR_DETAIL_CHARS)


def test_a_trickled_error_body_ends_with_the_deadline(session: HttpClient) -> None:
    """The 1 s deadline, not the body's end, ends the GET: the body takes 30 s and more to send,
    and the server has sent only part of it when the GET is over. (Asked of the bytes the server
    sent, not of the seconds the GET took: on a loaded machine a second can stretch to several.)"""
    body = json.dumps({"error": "slow " * 600}).encode()
    sent = [0]
    error = refusal(session, answering(500, "application/json", body, trickle=0.01, sent=sent), timeout=1.0)
    assert 0 < sent[0] < len(body)
    assert str(error).endswith("HTTP 500")  # the status is the error; the cut-off reason is not read


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
