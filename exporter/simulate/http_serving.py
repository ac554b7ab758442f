"""The simulator's HTTP: a threading server whose answers come from one `respond(path)`, shared by
the node's and the cluster's servers (server.py) and a restarting replica's own process
(replica_process.py)."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# One server answers every engine of a node, and an exporter's HTTP client connects to all of them
# at once: socketserver's backlog of 5 dropped the handshakes past it, which
# the kernel then retried a second or more later. uvicorn, vLLM's server, listens with 2048.
BACKLOG = 128


def address_family(host: str) -> socket.AddressFamily:
    """IPv6 when the host has a colon."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def base_url(host: str, port: int) -> str:
    """http://host:port, an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Responder(Protocol):
    def respond(self, path: str) -> tuple[int, str, bytes]: ...


def http_server(host: str, port: int, owner: Responder, listener: socket.socket | None = None) -> ThreadingHTTPServer:
    """A threading HTTP server on `host:port` answering with `owner`;
    on `listener` where the caller has bound and listens already."""
    attributes = {"address_family": address_family(host), "daemon_threads": True, "allow_reuse_address": True}
    server_class = type("_Server", (ThreadingHTTPServer,), {**attributes, "request_queue_size": BACKLOG})
    if listener is None:
        return server_class((host, port), _handler(owner))
    server = server_class((host, port), _handler(owner), bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    return server


def _handler(owner: Responder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "llm-bottleneck-simulator"

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            status, content_type, body = owner.respond(self.path.split("?", 1)[0])
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: object) -> None:
            pass

    return Handler
