"""The OTLP/HTTP receiver's door: `POST /v1/traces` behind what guards `/metrics`.

Built on the same server (exporter.server.GuardedHTTPServer): bounded connections with header,
idle and write deadlines, TLS in each connection's thread, and the web config's basic auth, all
checked before a byte of the body is read. Then, in order, each refusal before the body costs
memory: a body over `max_body_bytes` (413, not read), a client address past its
`max_client_bytes_per_second` (429, read and discarded so the connection stays usable), all decode
slots taken (503, likewise); the body itself is read against one deadline, so a client trickling
it holds a slot for at most that long, and gzip is inflated only up to the cap. What is decoded
goes to the span sink (exporter/slo/otlp.py), which decides what may be recorded.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib

from exporter.server import GuardedHandler, GuardedHTTPServer
from exporter.settings import OtlpSettings
from exporter.slo.otlp import SpanSink
from exporter.webauth import ClientBuckets
from exporter.webguard import WebGuard

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
#: payloads decoded at once; decoding holds the GIL, so more would only add their memory
MAX_CONCURRENT_PAYLOADS = 2
#: the whole body must arrive within this long, however it trickles
BODY_SECONDS = 10.0
READ_CHUNK = 64 * 1024


class OtlpHTTPServer(GuardedHTTPServer):
    """The receiver; `sink.store` is what the SLO monitor reads."""

    def __init__(self, settings: OtlpSettings, sink: SpanSink, web: WebGuard | None = None) -> None:
        assert settings.listen is not None
        host, _, port = settings.listen.rpartition(":")
        super().__init__((host.strip("[]"), int(port)), _OtlpHandler, web)
        self.settings, self.sink = settings, sink
        rate = settings.max_client_bytes_per_second
        # A bucket of bytes per client address, deep enough for one largest body.
        self.client_bytes = ClientBuckets(1.0 / rate, max(rate, settings.max_body_bytes))
        self.client_lock = threading.Lock()
        self.decode_slots = threading.BoundedSemaphore(MAX_CONCURRENT_PAYLOADS)
        self._thread = threading.Thread(target=self.serve_forever, name="otlp", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> OtlpHTTPServer:
        self._thread.start()
        tls = "TLS" if self.web is not None and self.web.tls_enabled else "plain HTTP"
        log.info("otlp: receiving request spans on %s%s (%s)", self.settings.listen, TRACES_PATH, tls)
        return self

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _OtlpHandler(GuardedHandler):
    server: OtlpHTTPServer

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if not self.refused():
            self._send(405, "text/plain; charset=utf-8", b"only POST /v1/traces\n", {"Allow": "POST"})

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        server, store = self.server, self.server.sink.store
        cap = server.settings.max_body_bytes
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if self.refused():  # auth first: an unauthenticated client gets nothing read or decoded
            self.close_connection = True
            return
        if self.path.split("?")[0] != TRACES_PATH:
            return self._close_with(404, b"only POST /v1/traces\n")
        if length < 0 or length > cap:
            store.count("payload_too_large" if length > cap else "payload_bad_request")
            return self._close_with(413 if length > cap else 411, b"body over otlp.max_body_bytes\n")
        with server.client_lock:
            allowed = server.client_bytes.take(self.client_address[0], length)
        if not allowed:
            store.count("payload_rate_limited")
            return self._discard(length, 429, b"over otlp.max_client_bytes_per_second\n", {"Retry-After": "1"})
        if not server.decode_slots.acquire(blocking=False):
            store.count("payload_busy")
            return self._discard(length, 503, b"busy\n", {"Retry-After": "1"})
        try:
            body = self._read(length)
            if body is None:
                return
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
                try:
                    body = inflater.decompress(body, cap + 1)
                except zlib.error:
                    store.count("payload_bad_request")
                    return self._send(400, "text/plain", b"bad gzip\n")
                if len(body) > cap or inflater.unconsumed_tail:
                    store.count("payload_too_large")
                    return self._send(413, "text/plain", b"inflated body over otlp.max_body_bytes\n")
            status, answer = server.sink.accept(body, self.client_address[0])
            self._send(status, "application/x-protobuf", answer)
        finally:
            server.decode_slots.release()

    def _read(self, length: int, keep: bool = True) -> bytes | None:
        """The body (b"" unless `keep`), read in chunks against one deadline; None (and the
        connection closed) when the deadline ran out or the client left."""
        deadline = time.monotonic() + BODY_SECONDS
        kept = bytearray()
        left = length
        try:
            while left > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.connection.settimeout(remaining)
                chunk = self.rfile.read1(min(READ_CHUNK, left))
                if not chunk:
                    raise ConnectionError
                left -= len(chunk)
                if keep:
                    kept += chunk
        except OSError:
            self.close_connection = True
            return None
        return bytes(kept)

    def _discard(self, length: int, status: int, body: bytes, headers: dict[str, str]) -> None:
        """Read the refused body in chunks, keeping none of it, then answer."""
        if self._read(length, keep=False) is not None:
            self._send(status, "text/plain", body, headers)

    def _close_with(self, status: int, body: bytes) -> None:
        """Answer without reading the body, and close: what is left unread cannot be a next request."""
        self.close_connection = True
        self._send(status, "text/plain", body, {"Connection": "close"})
