"""An opt-in OTLP/HTTP receiver for the engines' own request spans (vLLM `--otlp-traces-endpoint`).

vLLM (vllm/tracing/utils.py, 0.32) ends each request with a span carrying its latencies and token
counts as attributes: `gen_ai.latency.time_to_first_token`, `gen_ai.latency.e2e`,
`gen_ai.latency.time_in_queue` (seconds, doubles), `gen_ai.usage.prompt_tokens`,
`gen_ai.usage.completion_tokens` (ints) and `gen_ai.response.model`. One span is one request, so
every threshold of an SLO can be judged on the same request — joint attainment, which separate
histograms cannot give (exporter/slo/attainment.py).

Started with vLLM's `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf` and
`--otlp-traces-endpoint http://EXPORTER:4318/v1/traces`; the protobuf is decoded with the
OpenTelemetry project's own generated classes (opentelemetry-proto). Bounded: a body over the cap is
refused before it is read (413), gzip is inflated only up to the cap, spans past the per-second
budget are dropped and counted, a few payloads are decoded at a time (503 past that), and the
store keeps at most `max_requests` records.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from exporter.settings import OtlpSettings

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
TTFT = "gen_ai.latency.time_to_first_token"
E2E = "gen_ai.latency.e2e"
QUEUE = "gen_ai.latency.time_in_queue"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
MODEL = "gen_ai.response.model"
SERVICE_NAME = "service.name"
#: payloads decoded at once; more wait for none of them (503, the exporter retries)
MAX_CONCURRENT_PAYLOADS = 4
SOCKET_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request as its span reports it."""

    received: float  # the exporter's clock when the span arrived
    model: str
    service: str
    ttft: float
    e2e: float
    queue: float
    prompt_tokens: int
    completion_tokens: int

    @property
    def tpot(self) -> float:
        """vLLM bench's time per output token: (e2e - ttft) / (n - 1), 0 for one token or none."""
        n = self.completion_tokens
        return (self.e2e - self.ttft) / (n - 1) if n > 1 else 0.0


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def request_records(payload: ExportTraceServiceRequest, now: float) -> tuple[list[RequestRecord], int]:
    """The request spans of one export, and how many other spans it carried."""
    records: list[RequestRecord] = []
    others = 0
    for resource_spans in payload.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = str(resource.get(SERVICE_NAME) or "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {a.key: _value(a.value) for a in span.attributes}
                try:
                    record = RequestRecord(
                        received=now,
                        model=str(attributes.get(MODEL) or ""),
                        service=service,
                        ttft=float(attributes[TTFT]),
                        e2e=float(attributes[E2E]),
                        queue=float(attributes.get(QUEUE, 0.0)),
                        prompt_tokens=int(attributes.get(PROMPT_TOKENS, 0)),
                        completion_tokens=int(attributes.get(COMPLETION_TOKENS, 0)),
                    )
                except (KeyError, TypeError, ValueError):
                    others += 1  # not a request span (or a malformed one): counted, not kept
                    continue
                if record.e2e >= 0 and record.ttft >= 0:
                    records.append(record)
                else:
                    others += 1
    return records, others


class RequestStore:
    """The last `max_requests` request records, with cumulative token totals per model."""

    def __init__(self, max_requests: int) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=max_requests)
        self._lock = threading.Lock()
        self.totals: dict[str, list[float]] = {}  # model -> [requests, prompt tokens, completion tokens]
        self.counts: Counter[str] = Counter()  # llm_otlp_spans_total / payloads by result

    def add(self, records: Iterable[RequestRecord]) -> None:
        with self._lock:
            for record in records:
                self._records.append(record)
                totals = self.totals.setdefault(record.model, [0.0, 0.0, 0.0])
                totals[0] += 1
                totals[1] += record.prompt_tokens
                totals[2] += record.completion_tokens

    def count(self, key: str, amount: int = 1) -> None:
        with self._lock:
            self.counts[key] += amount

    def since(self, start: float) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self._records if r.received >= start]


class _SpanBudget:
    """A token bucket of spans per second: a flood costs its own spans, not the exporter."""

    def __init__(self, per_second: float, clock: Callable[[], float]) -> None:
        self.rate = per_second
        self.tokens = per_second
        self.clock = clock
        self.last = clock()
        self.lock = threading.Lock()

    def take(self, wanted: int) -> int:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.rate, self.tokens + (now - self.last) * self.rate)
            self.last = now
            granted = min(wanted, int(self.tokens))
            self.tokens -= granted
            return granted


class OtlpReceiver:
    """The HTTP listener; `store` is what the SLO monitor reads."""

    def __init__(self, settings: OtlpSettings, clock: Callable[[], float] = time.monotonic) -> None:
        assert settings.listen is not None
        self.settings = settings
        self.store = RequestStore(settings.max_requests)
        self._clock = clock
        self._budget = _SpanBudget(settings.max_spans_per_second, time.monotonic)
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT_PAYLOADS)
        host, _, port = settings.listen.rpartition(":")
        self._server = ThreadingHTTPServer((host.strip("[]"), int(port)), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> OtlpReceiver:
        self._thread.start()
        log.info("otlp: receiving request spans on %s%s", self.settings.listen, TRACES_PATH)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def accept(self, body: bytes) -> tuple[int, bytes]:
        """(HTTP status, response body) for one decoded-size-checked payload."""
        payload = ExportTraceServiceRequest()
        try:
            payload.ParseFromString(body)
        except DecodeError:
            self.store.count("payload_bad_request")
            return 400, b"not an OTLP ExportTraceServiceRequest\n"
        records, others = request_records(payload, self._clock())
        granted = self._budget.take(len(records))
        self.store.add(records[:granted])
        self.store.count("span_recorded", granted)
        self.store.count("span_rate_limited", len(records) - granted)
        self.store.count("span_ignored", others)
        self.store.count("payload_ok")
        response = ExportTraceServiceResponse()
        if granted < len(records):
            response.partial_success.rejected_spans = len(records) - granted
            response.partial_success.error_message = "over the exporter's otlp.max_spans_per_second"
        return 200, response.SerializeToString()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self
        cap = self.settings.max_body_bytes

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = SOCKET_TIMEOUT_SECONDS  # a client that stops sending loses its connection

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?")[0] != TRACES_PATH:
                    return self._reply(404, b"only POST /v1/traces\n", close=True)
                try:
                    length = int(self.headers.get("Content-Length") or "-1")
                except ValueError:
                    length = -1
                if length < 0 or length > cap:
                    receiver.store.count("payload_too_large" if length > cap else "payload_bad_request")
                    return self._reply(413 if length > cap else 411, b"body over otlp.max_body_bytes\n", close=True)
                if not receiver._slots.acquire(blocking=False):
                    receiver.store.count("payload_busy")
                    self.rfile.read(length)
                    return self._reply(503, b"busy\n")
                try:
                    body = self.rfile.read(length)
                    if self.headers.get("Content-Encoding", "").lower() == "gzip":
                        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
                        try:
                            body = inflater.decompress(body, cap + 1)
                        except zlib.error:
                            receiver.store.count("payload_bad_request")
                            return self._reply(400, b"bad gzip\n")
                        if len(body) > cap or inflater.unconsumed_tail:
                            receiver.store.count("payload_too_large")
                            return self._reply(413, b"inflated body over otlp.max_body_bytes\n")
                    status, answer = receiver.accept(body)
                    self._reply(status, answer, content_type="application/x-protobuf")
                finally:
                    receiver._slots.release()

            def _reply(self, status: int, body: bytes, close: bool = False, content_type: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
