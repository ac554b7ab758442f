"""The HTTP endpoints: /metrics from the last rendered snapshot, /healthz, and a landing page.

A threading server with a bound on connections (exporter.connections): scrapers never wait on
each other or on collection, since every response is bytes rendered earlier, and idle or slow
clients are timed out, or evicted when the slots run short, before they can crowd a scrape out.
`GuardedHTTPServer` and `GuardedHandler` are that server without its routes: the OTLP receiver
(exporter/otlp_listener.py) is built on them, so it has the same bounds, TLS and auth.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from exporter import __version__
from exporter.connections import (
    HEADER_TIMEOUT_SECONDS,
    IDLE_TIMEOUT_SECONDS,
    OUT_OF_DESCRIPTORS,
    WRITE_TIMEOUT_SECONDS,
    ConnectionSlots,
    DescriptorReserve,
    Slot,
    connection_limit,
)
from exporter.exposition import RenderedSnapshot
from exporter.webguard import HANDSHAKE_TIMEOUT_SECONDS, WebGuard

log = logging.getLogger(__name__)

_LANDING = (
    "<html><head><title>llm-bottleneck-exporter</title></head><body>"
    "<h1>llm-bottleneck-exporter " + __version__ + "</h1>"
    '<p><a href="/metrics">Metrics</a> &middot; <a href="/diagnosis">Diagnosis</a> &middot; '
    '<a href="/healthz">Health</a></p>'
    "</body></html>"
).encode()


class GuardedHTTPServer(ThreadingHTTPServer):
    """Bounded connections, TLS in each connection's thread, and the web config's guard."""

    daemon_threads = True
    allow_reuse_address = True
    # Enough backlog for 100 scrapers connecting at once.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        web: WebGuard | None = None,
        max_connections: int | None = None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        # Before binding: a failed bind calls server_close, which closes the reserve.
        self.slots = ConnectionSlots(max_connections or connection_limit())
        self._reserve = DescriptorReserve()
        self._thread_slot = threading.local()
        super().__init__(address, handler)
        self.web = web  # --web.config.file: TLS, basic auth, headers, rate limit

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            request = self.socket.accept()
        except OSError as exc:
            if exc.errno in OUT_OF_DESCRIPTORS:
                self._reserve.shed(self.socket)
            raise  # socketserver drops the failed accept and goes back to select()
        self._reserve.backoff = 0.0
        return request

    def process_request(self, request: Any, client_address: Any) -> None:
        slot = self.slots.admit(request)
        if slot is None:
            log.debug("every connection slot is busy; closing the connection from %s", client_address[0])
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        # Release before closing: once closed, the descriptor number may be another connection's.
        self.slots.release_fd(request.fileno())
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (or was evicted) mid-request is routine; anything else is a bug."""
        if isinstance(sys.exc_info()[1], OSError):  # reset, broken pipe, timeout, TLS error
            log.debug("connection from %s ended: %s", client_address[0], sys.exc_info()[1])
        else:
            log.exception("error answering %s", client_address[0])

    def service_actions(self) -> None:
        """Run by serve_forever between accepts and at every poll interval."""
        self.slots.reap()

    def server_close(self) -> None:
        super().server_close()
        self._reserve.close()

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs here, in the connection's own thread, so a client that never
        # completes it cannot hold up accept() for everyone else.
        if self.web is None or not self.web.tls_enabled:
            super().finish_request(request, client_address)
            return
        # TLS runs on a duplicate of the descriptor: the connection's own stays open, under its
        # slot, until shutdown_request, whatever the handshake does with the duplicate.
        self.connection_slot().wait(HANDSHAKE_TIMEOUT_SECONDS)
        duplicate = request.dup()
        try:
            wrapped = self.web.wrap(duplicate)
            if wrapped is None:
                return
            try:
                super().finish_request(wrapped, client_address)
            finally:
                wrapped.close()
        finally:
            duplicate.close()  # a no-op once wrapped: the TLS socket took the descriptor over

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        self._thread_slot.slot = self.slots.of(request.fileno())
        super().process_request_thread(request, client_address)

    def connection_slot(self) -> Slot:
        """The slot of the connection this thread serves."""
        return self._thread_slot.slot


class ExporterHTTPServer(GuardedHTTPServer):
    """/metrics, /healthz, /diagnosis and the landing page."""

    def __init__(
        self,
        address: tuple[str, int],
        rendered: RenderedSnapshot,
        healthy: Callable[[], tuple[bool, str]],
        diagnosis: Callable[[], dict[str, Any]] | None = None,
        web: WebGuard | None = None,
        max_connections: int | None = None,
    ) -> None:
        super().__init__(address, _Handler, web, max_connections)
        self.rendered = rendered
        self.healthy = healthy
        self.diagnosis = diagnosis


class GuardedHandler(BaseHTTPRequestHandler):
    """Connection phases against their deadlines, the web config's refusals and headers."""

    server: GuardedHTTPServer
    server_version = "llm-bottleneck-exporter/" + __version__
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, the body's last segment waits for the
    # client's delayed ACK of the headers, ~40 ms on every keep-alive scrape (Linux).
    disable_nagle_algorithm = True
    timeout = HEADER_TIMEOUT_SECONDS
    _head_only = False
    _requests = 0

    def setup(self) -> None:
        super().setup()
        self.slot = self.server.connection_slot()

    def handle_one_request(self) -> None:
        """One request: wait for its first byte (idle), read its headers (against the header
        deadline), answer (busy). Waiting phases are evictable; see exporter.connections."""
        slot = self.slot
        wait = IDLE_TIMEOUT_SECONDS if self._requests else HEADER_TIMEOUT_SECONDS
        slot.wait(wait)
        self.connection.settimeout(wait)
        try:
            if not cast(io.BufferedReader, self.rfile).peek(1):  # makefile('rb') is buffered
                self.close_connection = True
                return
        except (OSError, ValueError):  # timed out, reset, or shut down by an eviction
            self.close_connection = True
            return
        slot.wait(HEADER_TIMEOUT_SECONDS)
        self.connection.settimeout(HEADER_TIMEOUT_SECONDS)
        self._requests += 1
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed:
            self.slot.busy()
            self.connection.settimeout(WRITE_TIMEOUT_SECONDS)
        return parsed

    def refused(self) -> bool:
        """Answer the web config's refusal (auth, rate limit) if it has one for this request."""
        web = self.server.web
        refusal = web.refusal(self.headers.get("Authorization"), self.client_address[0]) if web else None
        if refusal is None:
            return False
        status, headers, body = refusal
        self._send(status, "text/plain; charset=utf-8", body, headers)
        return True

    def _send(self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        web_headers = self.server.web.headers() if self.server.web else {}
        for key, value in {**web_headers, **(extra or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if not self._head_only:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server API
        log.debug("%s %s", self.address_string(), format % args)


class _Handler(GuardedHandler):
    server: ExporterHTTPServer

    def do_HEAD(self) -> None:  # noqa: N802 - the http.server API
        """What GET would answer, without the body (Content-Length included), as HTTP says."""
        self._head_only = True
        try:
            self.do_GET()
        finally:
            self._head_only = False

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        path = self.path.split("?", 1)[0]
        if self.refused():
            return
        if path == "/metrics":
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
