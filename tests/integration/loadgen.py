"""Closed-loop load generator for a local vLLM server's ``/v1/completions``.

Scenario tests need controlled pressure on the engine (queueing, KV-cache
exhaustion, prefix-cache hits) and client-side truth (TTFT, end-to-end latency)
to compare against what the exporter reports. Each of ``concurrency`` threads
sends one streamed request at a time until the duration or request budget is
spent. Prompts are pseudo-words from the tiny model's own tokenizer corpus, so
one word is roughly one token; ``ignore_eos`` with ``min_tokens == max_tokens``
makes output lengths exact. Only loopback targets are accepted.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse, urlsplit

from tests.integration.tiny_model import pseudo_words
from tests.integration.vllm_server import SERVED_MODEL_NAME

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
WORKER_THREAD_PREFIX = "load-worker-"  # run_load's threads, for stack dumps of a stuck load


@dataclass(frozen=True)
class LoadSpec:
    """What load to generate; ranges are inclusive ``(low, high)``."""

    concurrency: int = 4
    prompt_tokens: tuple[int, int] = (32, 64)
    output_tokens: tuple[int, int] = (16, 32)
    shared_prefix_ratio: float = 0.0
    shared_prefix_tokens: int = 256
    duration_s: float = 10.0
    max_requests: int | None = None
    request_timeout_s: float = 60.0
    seed: int = 0
    #: a client's pause after a failed request (a 503 from an admission limit) before its next
    #: one, as a client backs off: without it a refused worker would retry in a busy loop
    error_backoff_s: float = 0.0
    model: str = SERVED_MODEL_NAME

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not 0.0 <= self.shared_prefix_ratio <= 1.0:
            raise ValueError("shared_prefix_ratio must be within [0, 1]")
        for low, high in (self.prompt_tokens, self.output_tokens):
            if not 1 <= low <= high:
                raise ValueError("ranges must satisfy 1 <= low <= high")
        if self.duration_s <= 0 or self.request_timeout_s <= 0:
            raise ValueError("duration_s and request_timeout_s must be positive")


@dataclass
class RequestRecord:
    """Client-side view of one request; times are seconds, ``started`` is time.time()."""

    started: float
    prompt_words: int
    max_tokens: int
    shared_prefix: bool
    ttft_s: float | None = None  # the first chunk carrying a generated token
    first_text_s: float | None = None  # the first chunk whose text is not empty (never earlier)
    e2e_s: float | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class LoadResult:
    """All records of one run plus summary helpers."""

    spec: LoadSpec
    records: list[RequestRecord] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok_records(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]

    @property
    def error_count(self) -> int:
        return sum(not r.ok for r in self.records)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens or 0 for r in self.ok_records)

    @property
    def requested_tokens(self) -> int:
        """Output tokens asked for by successful requests (equals generated with ignore_eos)."""
        return sum(r.max_tokens for r in self.ok_records)

    def values(self, attr: str) -> list[float]:
        """Non-missing values of one numeric record attribute over successful requests."""
        return [v for r in self.ok_records if (v := getattr(r, attr)) is not None]

    def quantile(self, attr: str, q: float) -> float:
        """Nearest-rank quantile (q in [0, 1]) of an attribute; NaN when there is no data."""
        data = sorted(self.values(attr))
        if not data:
            return math.nan
        return data[min(len(data) - 1, max(0, math.ceil(q * len(data)) - 1))]

    def median(self, attr: str) -> float:
        data = self.values(attr)
        return statistics.median(data) if data else math.nan


class _Budget:
    """Thread-safe request budget shared by the workers of one run."""

    def __init__(self, deadline: float, max_requests: int | None) -> None:
        self._deadline = deadline
        self._remaining = max_requests
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if time.monotonic() >= self._deadline or self._remaining == 0:
                return False
            if self._remaining is not None:
                self._remaining -= 1
            return True


class _PromptFactory:
    """Seeded prompts; the shared prefix is identical across requests so prefix caching can hit."""

    def __init__(self, spec: LoadSpec, rng: random.Random) -> None:
        self._spec = spec
        self._rng = rng
        self._prefix = pseudo_words(random.Random(spec.seed), spec.shared_prefix_tokens)

    def make(self) -> tuple[str, int, bool]:
        """Return (prompt, word count, whether it starts with the shared prefix)."""
        length = self._rng.randint(*self._spec.prompt_tokens)
        shared = self._rng.random() < self._spec.shared_prefix_ratio
        words = self._prefix[:length] if shared else []
        words = words + pseudo_words(self._rng, length - len(words))
        return " ".join(words), length, shared


def _check_loopback(base_url: str) -> None:
    host = urlparse(base_url).hostname
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"load generator only targets loopback, got {base_url!r}")


class _Connection:
    """One worker's keep-alive connection, opened again after a failed request: http.client, whose
    readline returns each line of a chunked body as its chunk arrives, with nothing between the
    socket and the clock."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._timeout_s = timeout_s
        self._connection: http.client.HTTPConnection | None = None

    def post(self, path: str, payload: dict[str, Any]) -> http.client.HTTPResponse:
        """The response to one request. A kept-alive connection the server has closed meanwhile
        (uvicorn closes one idle for 5 s; a starved worker thread can leave it that long) fails
        before any response with a broken pipe, a reset or a disconnect: the server never took that
        request, so it is sent once more on a new connection, as urllib3 and aiohttp do."""
        body = json.dumps(payload).encode()
        reused = self._connection is not None
        try:
            return self._send(path, body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.close()
            if not reused:
                raise
            return self._send(path, body)

    def _send(self, path: str, body: bytes) -> http.client.HTTPResponse:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        self._connection.request("POST", self._prefix + path, body=body, headers={"Content-Type": "application/json"})
        return self._connection.getresponse()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _stream_completion(
    connection: _Connection, path: str, payload: dict[str, Any], record: RequestRecord, timeout_s: float
) -> None:
    """Send one streamed completion and fill timing/usage into ``record``.

    TTFT is the arrival of the first chunk carrying a token (see _apply_chunk); e2e the end of the
    response body (the chunk that ends it, as a gateway's log times it). The whole request is
    bounded by ``timeout_s`` even if the server keeps trickling chunks.
    """
    t0 = time.monotonic()
    try:
        response = connection.post(path, payload)
        if response.status != 200:
            record.error = f"HTTP {response.status}: {response.read(200).decode(errors='replace')}"
            connection.close()
            return
        while line := response.readline():
            if time.monotonic() - t0 > timeout_s:
                record.error = f"timed out after {timeout_s:.0f}s"
                connection.close()
                return
            if not line.startswith(b"data: "):
                continue
            data = line[len(b"data: ") :].rstrip(b"\r\n")
            if data != b"[DONE]":
                _apply_chunk(json.loads(data), record, time.monotonic() - t0)
    except BaseException:
        connection.close()
        raise
    record.e2e_s = time.monotonic() - t0
    if record.completion_tokens is None:
        record.error = "stream ended without usage"


def _apply_chunk(chunk: dict[str, Any], record: RequestRecord, elapsed_s: float) -> None:
    choices = chunk.get("choices") or []
    # vLLM streams a choice only for new tokens (or the finish); a token that decodes to no text
    # yet (a byte of a multi-byte character, a skipped special token) comes with text "". The
    # engine's TTFT counts that token, so the client's must too: the first text can come one
    # token later, and under overload that token may wait out a preemption.
    if record.ttft_s is None and choices:
        record.ttft_s = elapsed_s
    if record.first_text_s is None and any(c.get("text") for c in choices):
        record.first_text_s = elapsed_s
    usage = chunk.get("usage")
    if usage:
        record.completion_tokens = usage.get("completion_tokens")
        record.prompt_tokens = usage.get("prompt_tokens")


def _worker(base_url: str, spec: LoadSpec, index: int, budget: _Budget, sink: Callable[[RequestRecord], None]) -> None:
    rng = random.Random(spec.seed * 1_000_003 + index + 1)
    prompts = _PromptFactory(spec, rng)
    connection = _Connection(base_url, spec.request_timeout_s)
    try:
        while budget.take():
            prompt, words, shared = prompts.make()
            max_tokens = rng.randint(*spec.output_tokens)
            record = RequestRecord(started=time.time(), prompt_words=words, max_tokens=max_tokens, shared_prefix=shared)
            payload = {
                "model": spec.model,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "min_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            try:
                _stream_completion(connection, "/v1/completions", payload, record, spec.request_timeout_s)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                record.error = f"{type(exc).__name__}: {exc}"
            sink(record)
            if record.error and spec.error_backoff_s > 0:
                time.sleep(spec.error_backoff_s)
    finally:
        connection.close()


def run_load(base_url: str, spec: LoadSpec, on_record: Callable[[RequestRecord], None] | None = None) -> LoadResult:
    """Run the closed loop and return every request's record.

    Bounded: no request starts after ``duration_s`` (or once ``max_requests``
    were started) and each request ends within ``request_timeout_s``.
    ``on_record`` sees each record as its request ends, for callers that watch a run in progress.
    """
    _check_loopback(base_url)
    result = LoadResult(spec=spec)
    lock = threading.Lock()

    def sink(record: RequestRecord) -> None:
        with lock:
            result.records.append(record)
        if on_record is not None:
            on_record(record)

    started = time.monotonic()
    budget = _Budget(started + spec.duration_s, spec.max_requests)
    threads = [
        threading.Thread(
            target=_worker,
            args=(base_url.rstrip("/"), spec, i, budget, sink),
            name=f"{WORKER_THREAD_PREFIX}{i}",
            daemon=True,
        )
        for i in range(spec.concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall_s = time.monotonic() - started
    result.records.sort(key=lambda r: r.started)
    return result
