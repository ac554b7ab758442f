"""The engines' own request spans (vLLM `--otlp-traces-endpoint`), decoded, admitted and stored.

vLLM (vllm/tracing/utils.py, 0.32) ends each request with a span carrying its latencies and token
counts as attributes: `gen_ai.latency.time_to_first_token`, `gen_ai.latency.e2e`,
`gen_ai.latency.time_in_queue` (seconds, doubles), `gen_ai.usage.prompt_tokens`,
`gen_ai.usage.completion_tokens` (ints); it defines `gen_ai.response.model` but leaves it unset,
so a span naming no model is its sender's, where that engine reports one. One span is one request, so
every threshold of an SLO can be judged on the same request — joint attainment, which separate
histograms cannot give (exporter/slo/attainment.py). The protobuf is decoded with the
OpenTelemetry project's own generated classes (opentelemetry-proto).

The receiver is a door into the exporter's output, so a span is admitted only where the exporter
can vouch for it (`OtlpSettings.senders`, `.models`): it must come from the address of an engine
the exporter scrapes, for a model that engine's own series report, and its labels are bounded as
an engine's are (`engine_defaults.max_label_value_length`, `.max_models`). Engines are never named
by a span: a span that cannot be tied to a known engine is dropped and counted by reason. What a
model left behind is pruned once the model is gone from the engines' series and from the window.
The HTTP side (auth, TLS, sizes, per-client rates) is exporter/otlp_listener.py.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from exporter.model import Metric
from exporter.settings import EngineTarget, OtlpSettings

log = logging.getLogger(__name__)

TTFT = "gen_ai.latency.time_to_first_token"
E2E = "gen_ai.latency.e2e"
QUEUE = "gen_ai.latency.time_in_queue"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
MODEL = "gen_ai.response.model"
SERVICE_NAME = "service.name"
#: how long a resolved engine host name is trusted
HOST_TTL_SECONDS = 60.0
#: an engine URL's `localhost` is whichever loopback address the engine sends from
LOOPBACK = frozenset({"127.0.0.1", "::1"})

EngineKey = tuple[str, str, str]  # (engine, engine_type, model): the labels of span-derived series


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request as its span reports it, tied to the engine that served it."""

    received: float  # the exporter's clock when the span arrived
    key: EngineKey
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


@dataclass(frozen=True, slots=True)
class RequestSpan:
    """A request span as decoded, before it is tied to an engine."""

    model: str
    service: str
    ttft: float
    e2e: float
    queue: float
    prompt_tokens: int
    completion_tokens: int


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def request_spans(payload: ExportTraceServiceRequest) -> tuple[list[RequestSpan], int]:
    """The request spans of one export, and how many other spans it carried."""
    spans: list[RequestSpan] = []
    others = 0
    for resource_spans in payload.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = str(resource.get(SERVICE_NAME) or "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {a.key: _value(a.value) for a in span.attributes}
                try:
                    request = RequestSpan(
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
                if request.e2e >= 0 and request.ttft >= 0:
                    spans.append(request)
                else:
                    others += 1
    return spans, others


def client_address(text: str) -> str:
    """An address as compared here: IPv4-mapped IPv6 (a dual-stack listener's view) as IPv4."""
    try:
        address = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return text
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


class KnownEngines:
    """The engines the exporter scrapes, from its own last snapshot: the models each reports
    (`llm_engine_up`), and the addresses its URL's host stands for (resolved, then cached)."""

    def __init__(self, resolve: Callable[[str], set[str]] | None = None) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, tuple[str, set[str]]] = {}  # engine -> (engine_type, models)
        self._hosts: dict[str, str] = {}  # engine -> its URL's host
        self._resolved: dict[str, tuple[float, set[str]]] = {}
        self._resolve = resolve or _resolve_host

    def observe(self, metrics: Sequence[Metric], targets: Sequence[EngineTarget]) -> None:
        models: dict[str, tuple[str, set[str]]] = {}
        for metric in metrics:
            if metric.name == "llm_engine_up" and metric.labels.get("model"):
                labels = metric.labels
                models.setdefault(labels["engine"], (labels.get("engine_type", ""), set()))[1].add(labels["model"])
        hosts = {t.name: urlsplit(t.url).hostname or "" for t in targets}
        with self._lock:
            self._models, self._hosts = models, hosts

    def engines(self) -> dict[str, tuple[str, set[str]]]:
        with self._lock:
            return dict(self._models)

    def at(self, address: str) -> set[str]:
        """Engines whose URL's host is this client address."""
        with self._lock:
            hosts = dict(self._hosts)
        return {engine for engine, host in hosts.items() if address in self._addresses(host)}

    def _addresses(self, host: str) -> set[str]:
        if host == "localhost":
            return set(LOOPBACK)
        try:
            return {client_address(str(ipaddress.ip_address(host)))}
        except ValueError:
            pass
        now = time.monotonic()
        cached = self._resolved.get(host)
        if cached is None or now - cached[0] > HOST_TTL_SECONDS:
            cached = self._resolved[host] = (now, {client_address(a) for a in self._resolve(host)})
        return cached[1]


def _sole_model(senders: set[str], engines: Mapping[str, tuple[str, set[str]]], service: str) -> str:
    """The model of a span that names none (vLLM defines `gen_ai.response.model` but does not set
    it): the one model its sender reports, the sender told apart by its service name
    (OTEL_SERVICE_NAME) where several engines share the address; "" where that is not one model."""
    candidates = [engine for engine in senders if engine == service] or sorted(senders)
    models = {model for engine in candidates for model in engines[engine][1]}
    return next(iter(models)) if len(models) == 1 else ""


def _resolve_host(host: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        return set()


class RequestStore:
    """The last `max_requests` request records, with cumulative token totals per engine and model."""

    def __init__(self, max_requests: int) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=max_requests)
        self._lock = threading.Lock()
        #: (engine, engine_type, model) -> [requests, prompt tokens, completion tokens]
        self.totals: dict[EngineKey, list[float]] = {}
        self.counts: Counter[str] = Counter()  # llm_otlp_spans_total / payloads by result

    def add(self, records: Iterable[RequestRecord]) -> None:
        with self._lock:
            for record in records:
                self._records.append(record)
                totals = self.totals.setdefault(record.key, [0.0, 0.0, 0.0])
                totals[0] += 1
                totals[1] += record.prompt_tokens
                totals[2] += record.completion_tokens

    def count(self, key: str, amount: int = 1) -> None:
        if amount:
            with self._lock:
                self.counts[key] += amount

    def since(self, start: float) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self._records if r.received >= start]

    def prune(self, keep: set[EngineKey], start: float) -> None:
        """Forget every engine and model not in `keep` that has no record since `start`: a model gone
        from the engines' series leaves nothing behind once its requests leave the window."""
        with self._lock:
            if all(key in keep for key in self.totals):
                return  # the usual round: every model with state is one the engines report
            wanted = keep | {r.key for r in self._records if r.received >= start}
            self.totals = {key: value for key, value in self.totals.items() if key in wanted}
            self._records = deque((r for r in self._records if r.key in wanted), maxlen=self._records.maxlen)


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


class SpanSink:
    """Where decoded exports go: admission against the known engines, then the store the SLO
    monitor reads. `max_label_value_length` and `max_models` are the engines' own bounds."""

    def __init__(
        self,
        settings: OtlpSettings,
        max_label_value_length: int,
        max_models: int,
        clock: Callable[[], float] = time.monotonic,
        known: KnownEngines | None = None,
    ) -> None:
        self.settings = settings
        self.max_label_value_length, self.max_models = max_label_value_length, max_models
        self.store = RequestStore(settings.max_requests)
        self.known = known or KnownEngines()
        self._clock = clock
        self._budget = _SpanBudget(settings.max_spans_per_second, time.monotonic)

    def observe(self, metrics: Sequence[Metric], targets: Sequence[EngineTarget], window_seconds: float) -> None:
        """After each snapshot: the engines and models now known; state of the gone ones pruned."""
        self.known.observe(metrics, targets)
        keep = {(e, kind, m) for e, (kind, models) in self.known.engines().items() for m in models}
        self.store.prune(keep, self._clock() - window_seconds)

    def accept(self, body: bytes, client: str) -> tuple[int, bytes]:
        """(HTTP status, response body) for one export whose size was already checked."""
        payload = ExportTraceServiceRequest()
        try:
            payload.ParseFromString(body)
        except DecodeError:
            self.store.count("payload_bad_request")
            return 400, b"not an OTLP ExportTraceServiceRequest\n"
        spans, others = request_spans(payload)
        del payload  # the decoded tree can be several times the body: not kept past here
        now = self._clock()
        admitted: list[RequestRecord] = []
        refused: Counter[str] = Counter()
        for span, key in zip(spans, self._admit(spans, client_address(client))):
            if isinstance(key, str):
                refused[key] += 1
            else:
                admitted.append(
                    RequestRecord(now, key, span.ttft, span.e2e, span.queue, span.prompt_tokens, span.completion_tokens)
                )
        granted = self._budget.take(len(admitted))
        self.store.add(admitted[:granted])
        self.store.count("span_recorded", granted)
        self.store.count("span_rate_limited", len(admitted) - granted)
        self.store.count("span_ignored", others)
        for reason, amount in refused.items():
            self.store.count(f"span_{reason}", amount)
        self.store.count("payload_ok")
        response = ExportTraceServiceResponse()
        rejected = len(spans) - granted
        if rejected:
            response.partial_success.rejected_spans = rejected
            refused["rate_limited"] += len(admitted) - granted
            reasons = (f"{amount} {reason}" for reason, amount in refused.items() if amount)
            response.partial_success.error_message = "spans refused: " + ", ".join(reasons)
        return 200, response.SerializeToString()

    def _admit(self, spans: Sequence[RequestSpan], client: str) -> list[EngineKey | str]:
        """For each span, the (engine, engine_type, model) it is recorded under, or why it is not."""
        engines = self.known.engines()
        senders = set(engines) if self.settings.senders == "any" else self.known.at(client) & set(engines)
        extra: dict[str, set[str]] = {}  # engine -> span-only models it holds state for (models: any)
        for engine, _kind, model in self.store.totals.copy():
            if engine in engines and model not in engines[engine][1]:
                extra.setdefault(engine, set()).add(model)
        out: list[EngineKey | str] = []
        for span in spans:
            out.append(self._admit_one(span, engines, senders, extra))
        return out

    def _admit_one(
        self,
        span: RequestSpan,
        engines: Mapping[str, tuple[str, set[str]]],
        senders: set[str],
        extra: dict[str, set[str]],
    ) -> EngineKey | str:
        if len(span.model) > self.max_label_value_length or len(span.service) > self.max_label_value_length:
            return "label_too_long"
        if not senders:
            return "unknown_sender"
        span_model = span.model or _sole_model(senders, engines, span.service)
        if not span_model:
            return "unknown_model"
        serving = [e for e in senders if span_model in engines[e][1]]
        if not serving:
            if self.settings.models != "any":
                return "unknown_model"
            serving = sorted(senders)
        if len(serving) > 1:
            named = [e for e in serving if e == span.service]
            if not named:  # several known engines could have sent it; OTEL_SERVICE_NAME tells them apart
                return "ambiguous_engine"
            serving = named
        engine = serving[0]
        kind, models = engines[engine]
        model = next((m for m in models if m == span_model), None)  # the engine's own string, not the span's
        if model is None:
            held = extra.setdefault(engine, set())
            if span_model not in held and len(held) + len(models) >= self.max_models:
                return "too_many_models"
            held.add(span_model)
            model = span_model
        return (engine, kind, model)
