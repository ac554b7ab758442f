"""The active prober: a tiny streamed completion through the gateway (and direct to the engine),
timed as a client sees it.

A background thread per probe target sends one request at a time, path after path, every
`interval_seconds` with ±10 % jitter (so many exporters do not probe in step); at most one
request of a target is ever in flight, and each is cut at `timeout_seconds` whatever the server
does (one deadline over the request and the stream, on the shared event loop, as for scrapes;
closing the probe cancels it). `collect` only reads what the thread recorded: a probe never
holds up a collection.

Clocks: TTFT from just before the request is sent to the first `data:` event with a choice;
e2e to the end of the stream (`data: [DONE]` or the connection closing after a finish_reason).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from exporter import __version__
from exporter.buckets import Observations
from exporter.catalogue import QUANTILES
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import ProbeTarget
from exporter.sources import event_loop
from exporter.sources.base import Source
from exporter.sources.http_fetch import HttpClient, redact

log = logging.getLogger(__name__)

FAILURE_REASONS = ("connect", "tls", "http_status", "timeout", "malformed_stream")
#: who is asking, so a gateway can tell probes from clients: HAProxy keeps them out of the access
#: log the exporter judges SLOs on with `http-request set-log-level silent if { req.hdr(user-agent)
#: -m beg llm-bottleneck-exporter-probe }` (a prober's requests are not the clients', docs/slo.md)
USER_AGENT = f"llm-bottleneck-exporter-probe/{__version__}"
#: a probe's stream is a few events; anything past this is not a 4-token completion
MAX_STREAM_BYTES = 1024 * 1024
JITTER = 0.1
#: the jitter's own generator: a probe thread drawing from the global `random` would move the
#: state of every other user of it in the process (seeded runs, property tests) between their draws
_JITTER_RANDOM = random.Random()


class ProbeFailure(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ProbeResult:
    at: float
    ttft_seconds: float
    e2e_seconds: float


class PathRecord:
    """What one path (gateway or direct) of one probe has seen: results in the window, counts."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = window_seconds
        self.results: deque[ProbeResult] = deque(maxlen=4096)
        self.successes = 0
        self.failures = dict.fromkeys(FAILURE_REASONS, 0)
        self.last_ok: bool | None = None
        #: every success's timings as histograms, for the SLO attainment measured at the probe
        self.ttft = Observations()
        self.e2e = Observations()

    def succeeded(self, result: ProbeResult) -> None:
        self.results.append(result)
        self.successes += 1
        self.ttft.observe(result.ttft_seconds)
        self.e2e.observe(result.e2e_seconds)
        self.last_ok = True

    def failed(self, reason: str) -> None:
        self.failures[reason] += 1
        self.last_ok = False

    def recent(self, now: float) -> list[ProbeResult]:
        return [r for r in self.results if r.at > now - self.window_seconds]


def _quantiles(values: list[float]) -> tuple[tuple[float, float], ...]:
    if not values:
        return tuple((q, math.nan) for q in QUANTILES)
    ordered = sorted(values)
    out = []
    for q in QUANTILES:
        rank = q * (len(ordered) - 1)
        low = math.floor(rank)
        high = min(low + 1, len(ordered) - 1)
        out.append((q, ordered[low] + (ordered[high] - ordered[low]) * (rank - low)))
    return tuple(out)


def stream_completion(
    client: HttpClient,
    base_url: str,
    model: str,
    max_tokens: int,
    timeout_seconds: float,
    headers: dict[str, str] | None = None,
) -> tuple[float, float]:
    """(TTFT, e2e) of one streamed completion; ProbeFailure with its reason otherwise.

    Waits in this thread for the request on the shared event loop; CancelledError (of
    concurrent.futures) when the probe is closed meanwhile."""
    return event_loop.run(_stream_completion(client, base_url, model, max_tokens, timeout_seconds, headers))


async def _stream_completion(
    client: HttpClient,
    base_url: str,
    model: str,
    max_tokens: int,
    timeout_seconds: float,
    headers: dict[str, str] | None,
) -> tuple[float, float]:
    url = base_url.rstrip("/") + "/completions"
    body = {"model": model, "prompt": "Hello", "max_tokens": max_tokens, "stream": True, "temperature": 0}
    started = time.monotonic()
    stage = "no response"
    try:
        async with asyncio.timeout(timeout_seconds):
            try:
                response = await client.send("POST", url, {"User-Agent": USER_AGENT, **(headers or {})}, json_body=body)
            except aiohttp.ClientSSLError as exc:
                raise ProbeFailure("tls", type(exc).__name__) from exc
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                raise ProbeFailure("connect", type(exc).__name__) from exc
            try:
                if response.status != 200:
                    raise ProbeFailure("http_status", f"HTTP {response.status}")
                stage = "stream not complete"
                first = await _read_stream(response)
            finally:
                response.release()
    except TimeoutError as exc:
        raise ProbeFailure("timeout", f"{stage} within {timeout_seconds:g}s") from exc
    return first - started, time.monotonic() - started


async def _read_stream(response: aiohttp.ClientResponse) -> float:
    """The monotonic time of the first token, once the stream has ended with a finish."""
    first: float | None = None
    finished = False
    size = 0
    buffer = b""
    data = b""
    try:
        while True:
            chunk = await response.content.readany()
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_STREAM_BYTES:
                raise ProbeFailure("malformed_stream", f"stream over {MAX_STREAM_BYTES} bytes")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                line = line.strip()
                if not line or line.startswith(b":"):
                    continue
                if not line.startswith(b"data:"):
                    raise ProbeFailure("malformed_stream", "a line that is not an SSE data event")
                data = line[5:].strip()
                if data == b"[DONE]":
                    finished = True
                    break
                event = _event(data)
                choices = event.get("choices") or []
                # A completion streams one event per token; its text may be "" (a token that ends
                # inside a UTF-8 character), so the first event with a choice is the first token.
                if choices and first is None:
                    first = time.monotonic()
                if choices and choices[0].get("finish_reason"):
                    finished = True
            if finished and data == b"[DONE]":
                break
    except (aiohttp.ClientError, OSError) as exc:
        raise ProbeFailure("malformed_stream", f"stream cut: {type(exc).__name__}") from exc
    if first is None or not finished:
        raise ProbeFailure("malformed_stream", "the stream ended without a token and a finish")
    return first


def _event(data: bytes) -> dict:
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise ProbeFailure("malformed_stream", "an event that is not JSON") from exc
    if not isinstance(event, dict):
        raise ProbeFailure("malformed_stream", "an event that is not a JSON object")
    return event


class ProbeSource(Source):
    """One probe target: its thread probes, `collect` renders what it recorded."""

    name = "probe"

    def __init__(
        self,
        probe: ProbeTarget,
        window_seconds: float,
        send: Callable[..., tuple[float, float]] = stream_completion,
    ) -> None:
        self.config = probe
        self.target = probe.name
        self.timeout_seconds = 1.0  # collect reads memory only
        self._send = send
        self._paths = {"gateway": probe.url, **({"direct": probe.direct_url} if probe.direct_url else {})}
        self._records = {path: PathRecord(window_seconds) for path in self._paths}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._client = HttpClient(follow_redirects=False)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"probe-{self.target}", daemon=True)
            self._thread.start()

    def probe_once(self) -> None:
        """One request on every path, one after the other (never two in flight)."""
        for path, url in self._paths.items():
            started = time.monotonic()
            try:
                ttft, e2e = self._send(
                    self._client,
                    url,
                    self.config.model,
                    self.config.max_tokens,
                    self.config.timeout_seconds,
                    self._headers(path),
                )
            except ProbeFailure as exc:
                log.info("probe %s (%s, %s): %s: %s", self.target, path, redact(url), exc.reason, exc)
                with self._lock:
                    self._records[path].failed(exc.reason)
                continue
            except concurrent.futures.CancelledError:
                return  # closed while the request was in flight
            with self._lock:
                self._records[path].succeeded(ProbeResult(started, ttft, e2e))

    def _headers(self, path: str) -> dict[str, str] | None:
        """The gateway's API key on the gateway path; the engine behind it is asked without one."""
        token_file = self.config.bearer_token_file
        if path != "gateway" or token_file is None:
            return None
        try:
            with open(token_file, encoding="utf-8") as handle:
                return {"Authorization": "Bearer " + handle.read(4096).strip()}
        except OSError as exc:
            log.warning("probe %s: cannot read bearer_token_file: %s", self.target, exc.strerror)
            return None

    def _run(self) -> None:
        # The first probe comes after a jittered fraction of the interval, not all at start-up.
        delay = _JITTER_RANDOM.uniform(0, self.config.interval_seconds * JITTER)
        while not self._stop.wait(delay):
            began = time.monotonic()
            try:
                self.probe_once()
            except Exception:  # a bug in one probe must not end the thread
                log.exception("probe %s", self.target)
            interval = self.config.interval_seconds * _JITTER_RANDOM.uniform(1 - JITTER, 1 + JITTER)
            delay = max(0.0, interval - (time.monotonic() - began))

    def collect(self, now: float) -> list[Metric]:
        self.start()
        out: list[Metric] = []
        wall = time.monotonic()
        with self._lock:
            for path, record in self._records.items():
                labels = {"probe": self.target, "path": path}
                if record.last_ok is not None:
                    out.append(Sample("llm_probe_up", labels, 1.0 if record.last_ok else 0.0))
                out.append(Sample("llm_probe_success_total", labels, float(record.successes)))
                for reason, count in record.failures.items():
                    out.append(Sample("llm_probe_failures_total", {**labels, "reason": reason}, float(count)))
                recent = record.recent(wall)
                for family, lifetime, field in (
                    ("llm_probe_time_to_first_token_seconds", record.ttft, "ttft_seconds"),
                    ("llm_probe_e2e_latency_seconds", record.e2e, "e2e_seconds"),
                ):
                    values = [getattr(r, field) for r in recent]
                    window = Observations()
                    for value in values:
                        window.observe(value)
                    histogram = lifetime.histogram()
                    out.append(
                        QuantileSummary(
                            family,
                            labels,
                            _quantiles(values),
                            histogram.count,
                            histogram.sum,
                            histogram=histogram,
                            window=window.histogram(),
                            window_seconds=record.window_seconds,
                        )
                    )
        return out

    def close(self) -> None:
        """Stop probing: a request in flight is cancelled, so closing takes no longer than that."""
        self._stop.set()
        self._client.close()  # cancels the request in flight, if any, with its session
        if self._thread is not None:
            self._thread.join(timeout=self.config.timeout_seconds + 1)
