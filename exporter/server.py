"""The HTTP endpoints: /metrics from the last rendered snapshot, /healthz, and a landing page.

A threading server: scrapers never wait on each other or on collection, since every response is
bytes rendered earlier.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from exporter import __version__
from exporter.exposition import RenderedSnapshot
from exporter.webconfig import WebGuard

log = logging.getLogger(__name__)

_LANDING = (
    "<html><head><title>llm-bottleneck-exporter</title></head><body>"
    "<h1>llm-bottleneck-exporter " + __version__ + "</h1>"
    '<p><a href="/metrics">Metrics</a> &middot; <a href="/diagnosis">Diagnosis</a> &middot; <a href="/healthz">Health</a></p>'
    "</body></html>"
).encode()


class ExporterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Enough backlog for 100 scrapers connecting at once.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        rendered: RenderedSnapshot,
        healthy: Callable[[], tuple[bool, str]],
        diagnosis: Callable[[], dict[str, Any]] | None = None,
        web: WebGuard | None = None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.rendered = rendered
        self.healthy = healthy
        self.diagnosis = diagnosis
        self.web = web  # --web.config.file: TLS, basic auth, headers, rate limit

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs here, in the connection's own thread, so a client that never
        # completes it cannot hold up accept() for everyone else.
        if self.web is None or not self.web.tls_enabled:
            super().finish_request(request, client_address)
            return
        wrapped = self.web.wrap(request)
        if wrapped is None:
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            self.shutdown_request(wrapped)


class _Handler(BaseHTTPRequestHandler):
    server: ExporterHTTPServer
    server_version = "llm-bottleneck-exporter/" + __version__
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, the body's last segment waits for the
    # client's delayed ACK of the headers, ~40 ms on every keep-alive scrape (Linux).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        path = self.path.split("?", 1)[0]
        refusal = self.server.web.refusal(self.headers.get("Authorization")) if self.server.web else None
        if refusal is not None:
            status, headers, body = refusal
            self._send(status, "text/plain; charset=utf-8", body, headers)
        elif path == "/metrics":
            accept = self.headers.get("Accept", "")
            gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
            body, content_type = self.server.rendered.body("application/openmetrics-text" in accept, gzipped)
            self._send(200, content_type, body, {"Content-Encoding": "gzip"} if gzipped else {})
        elif path == "/healthz":
            ok, detail = self.server.healthy()
            self._send(200 if ok else 503, "text/plain; charset=utf-8", (detail + "\n").encode())
        elif path == "/diagnosis" and self.server.diagnosis is not None:
            body = json.dumps(self.server.diagnosis(), indent=2).encode()
            self._send(200, "application/json", body)
        elif path == "/":
            self._send(200, "text/html; charset=utf-8", _LANDING)
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        web_headers = self.server.web.headers() if self.server.web else {}
        for key, value in {**web_headers, **(extra or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server API
        log.debug("%s %s", self.address_string(), format % args)
