"""A gateway's access log, received as syslog over UDP: the per-request timings a gateway whose own
metrics have only averages (HAProxy's Prometheus exporter: means over its last 1024 requests)
logs for every request, turned into latency histograms of the client side of the engine.

HAProxy (`log HOST:PORT local0` and `option httplog` in its frontend) sends one line per request,
after the response's last byte, with its timers in milliseconds (HAProxy's configuration manual,
"HTTP log format" and "Timing events"):

    TR/Tw/Tc/Tr/Ta   TR: the request's headers received; Tw: queued for a server slot;
                     Tc: TCP connect to the server; Tr: the server's response headers;
                     Ta: the whole request, first byte in to last byte out

From them: `request_duration` = Ta (what a client beside the gateway waits, end to end),
`queue_time` = Tw, and `upstream_duration` = Ta − TR − Tw (from the gateway's connect to the
server to the response's last byte). No time to first token: an engine streaming server-sent
events sends its response headers before the first token (vLLM answers with the headers once the
prompt is tokenized), so Tr is the API server's pre-processing, not the first token.

The syslog header (RFC 3164, RFC 5424 or `format raw`) is skipped by finding the httplog fields
in the line. Lines whose request failed at the gateway (a 5xx it answered, a -1 timer, an
aborted or `logasap` line) go in no histogram: the responses by status come from the gateway's
own metrics. Datagrams are taken only from loopback and the gateway's own address (its URL's
host); a line from anywhere else could forge the figures an SLO is judged on.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

from exporter.buckets import Observations
from exporter.model import Histogram, Metric, Sample

log = logging.getLogger(__name__)

#: the httplog fields from the client address to the status (HAProxy 1.9+ timers TR/Tw/Tc/Tr/Ta;
#: older ones log Tq/Tw/Tc/Tr/Tt in the same places)
HTTPLOG = re.compile(
    rb"\S+:\d+ \[[^\]]+\] (?P<frontend>\S+?)~? (?P<backend>[^/\s]+)/(?P<server>\S+) "
    rb"(?P<TR>-?\d+)/(?P<Tw>-?\d+)/(?P<Tc>-?\d+)/(?P<Tr>-?\d+)/(?P<Ta>\+?-?\d+) (?P<status>-?\d+) "
)
#: HAProxy's default syslog line is at most 1024 bytes (`log ... len`), 65535 at the most
MAX_DATAGRAM_BYTES = 65535
RESULTS = ("counted", "not_counted", "unparsed", "refused_sender")
LOOPBACK = frozenset({"127.0.0.1", "::1"})
#: the stats frontend's own requests (exporter/sources/gateways/haproxy.py leaves it out too)
STATS_PROXIES = frozenset({b"stats", b"prometheus", b"metrics"})


class AccessLogReceiver:
    """One gateway's access log: a UDP listener on its own thread, histograms read by `collect`."""

    def __init__(self, listen: str, gateway_url: str) -> None:
        host, _, port = listen.rpartition(":")
        self._address = (host.strip("[]"), int(port))
        self._gateway_host = urlsplit(gateway_url).hostname or ""
        self._lock = threading.Lock()
        self._timers = {key: Observations() for key in ("request_duration", "queue_time", "upstream_duration")}
        self.counts = dict.fromkeys(RESULTS, 0)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._senders: frozenset[str] = LOOPBACK
        self._warned = False

    @property
    def listening(self) -> bool:
        return self._socket is not None

    def start(self) -> None:
        """Bind and start receiving; a port still held (the previous configuration's receiver
        during a reload) is retried at the next collection."""
        if self._socket is not None or self._stop.is_set():
            return
        family = socket.AF_INET6 if ":" in self._address[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind(self._address)
        except OSError as exc:
            sock.close()
            if not self._warned:
                log.warning("access log %s:%d: cannot listen: %s", *self._address, exc.strerror)
                self._warned = True
            return
        sock.settimeout(0.5)
        self._senders = LOOPBACK | _addresses(self._gateway_host)
        self._socket = sock
        self._thread = threading.Thread(target=self._run, name=f"access-log-{self._address[1]}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self._socket
        assert sock is not None
        while not self._stop.is_set():
            try:
                data, sender = sock.recvfrom(MAX_DATAGRAM_BYTES)
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            self.receive(data, sender[0])

    def receive(self, data: bytes, sender: str) -> None:
        """One datagram (one or more lines) from `sender`."""
        if sender not in self._senders:
            with self._lock:
                self.counts["refused_sender"] += 1
            return
        for line in data.splitlines():
            if line.strip():
                self._line(line)

    def _line(self, line: bytes) -> None:
        match = HTTPLOG.search(line)
        if match is None:
            result = "unparsed"
        elif match["frontend"] in STATS_PROXIES:
            result = "not_counted"
        else:
            result = self._timings(match)
        with self._lock:
            self.counts[result] += 1

    def _timings(self, match: re.Match[bytes]) -> str:
        timers = [int(match[k]) for k in ("TR", "Tw", "Tc", "Tr")]
        total, status = match["Ta"], int(match["status"])
        if total.startswith(b"+") or min(timers) < 0 or int(total) < 0 or not 100 <= status < 500:
            return "not_counted"  # logged early, aborted, or a failure the gateway answered
        received, queued = timers[0], timers[1]
        seconds = int(total) / 1000.0
        with self._lock:
            self._timers["request_duration"].observe(seconds)
            self._timers["queue_time"].observe(queued / 1000.0)
            self._timers["upstream_duration"].observe(seconds - (received + queued) / 1000.0)
        return "counted"

    def histograms(self) -> dict[str, Histogram]:
        """The cumulative histograms so far (`GatewayReading.histograms` keys), empty ones from the
        start so the window's first increase counts every line; none while not listening."""
        self.start()
        if not self.listening:
            return {}
        with self._lock:
            return {key: observations.histogram() for key, observations in self._timers.items()}

    def samples(self, labels: dict[str, str]) -> Iterator[Metric]:
        yield Sample("llm_gateway_access_log_up", labels, 1.0 if self.listening else 0.0)
        with self._lock:
            counts = dict(self.counts)
        for result, count in counts.items():
            yield Sample("llm_gateway_access_log_lines_total", {**labels, "result": result}, float(count))

    def close(self) -> None:
        self._stop.set()
        if self._socket is not None:
            self._socket.close()
        if self._thread is not None:
            self._thread.join(timeout=2)


def _addresses(host: str) -> frozenset[str]:
    """The addresses a gateway's host name resolves to (none when it does not resolve now)."""
    if not host:
        return frozenset()
    try:
        return frozenset(str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM))
    except OSError:
        return frozenset()
