"""The gateway source: scrape one gateway's /metrics and normalize it into `llm_gateway_*`.

One instance per gateway, with the bounds and failure isolation of the engine source: a
deadline, a byte cap and a series cap on a streaming parse (`open_body`, `WantedParser`); a dead,
slow or garbage gateway is `llm_gateway_up 0` with the reason in `llm_exporter_source_errors_total`,
and nothing else is lost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

from exporter.catalogue import QUANTILES
from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.promtext import NAMES_HEAD_CHARS, LineCache, ParsedSamples, WantedParser
from exporter.settings import GatewayTarget
from exporter.sources.base import Source, SourceError
from exporter.sources.gateways import MAPPINGS, detect
from exporter.sources.gateways.common import LATENCY_KEYS, GatewayMapping, GatewayReading
from exporter.sources.http_fetch import HttpClient, feed_parser, open_body, redact
from exporter.sources.scrape_auth import authorizer
from exporter.window import DeltaWindow, histogram_quantile, histogram_vector, window_histogram

log = logging.getLogger(__name__)

#: `GatewayReading.histograms` key -> the summary family it becomes
LATENCY_FAMILIES = {
    "request_duration": "llm_gateway_request_duration_seconds",
    "time_to_first_token": "llm_gateway_time_to_first_token_seconds",
    "upstream_duration": "llm_gateway_upstream_duration_seconds",
    "queue_time": "llm_gateway_queue_time_seconds",
    "kv_transfer_estimate": "llm_gateway_kv_transfer_estimate_seconds",
}
#: `GatewayReading.steps` -> one summary per step
STEP_FAMILY = "llm_gateway_step_duration_seconds"
_GAUGES = {
    "requests_in_flight": "llm_gateway_requests_in_flight",
    "requests_queued": "llm_gateway_requests_queued",
    "connections_active": "llm_gateway_connections_active",
    "connections_limit": "llm_gateway_connections_limit",
    "upstream_connection_errors_total": "llm_gateway_upstream_connection_errors_total",
}
_EVERY_WANTED = frozenset().union(*(mapping.wanted() for mapping in MAPPINGS.values()))
KNOWN_TYPE_HEAD_CHARS = 64 * 1024


class GatewaySource(Source):
    name = "gateway"

    def __init__(self, target: GatewayTarget, window_seconds: float, lifetime_baseline: bool = False) -> None:
        self.config = target
        self.target = target.name
        self.timeout_seconds = target.limits.timeout_seconds
        self._window_seconds = window_seconds
        self._lifetime_baseline = lifetime_baseline
        self._mapping: GatewayMapping | None = MAPPINGS[target.type] if target.type else None
        self._client = HttpClient(auth=authorizer(target.auth))
        self._line_cache = LineCache()  # this target's series, parsed once (promtext.LineCache)
        self._shown_url = redact(target.url)
        self._windows: dict[str, DeltaWindow] = {}

    @property
    def gateway_type(self) -> str:
        return self._mapping.gateway_type if self._mapping else "unknown"

    def labels(self) -> dict[str, str]:
        return {"gateway": self.target, "gateway_type": self.gateway_type}

    async def collect(self, now: float) -> list[Metric]:
        mapping, parsed = await self._scrape()
        if self._mapping is None:
            log.info("gateway %s detected as %s", self.target, mapping.gateway_type)
            self._mapping = mapping
        return list(self._render(now, mapping.read(parsed)))

    def down_metrics(self) -> list[Metric]:
        return [Sample("llm_gateway_up", self.labels(), 0.0)]

    def close(self) -> None:
        self._client.close()

    async def _scrape(self) -> tuple[GatewayMapping, ParsedSamples]:
        limits = self.config.limits
        wanted = self._mapping.wanted() if self._mapping else _EVERY_WANTED
        head = NAMES_HEAD_CHARS if self._mapping is None else KNOWN_TYPE_HEAD_CHARS
        parser = WantedParser(
            wanted, limits.max_series, limits.max_label_value_length, head, line_cache=self._line_cache
        )
        async with open_body(self._client, self.config.url, self.timeout_seconds, limits.max_response_bytes) as body:
            await feed_parser(body, parser, self._shown_url)
        mapping = self._mapping or detect(parser.names)
        if mapping is None or not mapping.matches(parser.names):
            kind = mapping.gateway_type if mapping else "known gateway"
            raise SourceError("parse", f"{self._shown_url}: no {kind} metrics in the response")
        return mapping, parser.result

    def _render(self, now: float, reading: GatewayReading) -> Iterator[Metric]:
        labels = self.labels()
        yield Sample("llm_gateway_up", labels, 1.0)
        for (code_class, code), value in sorted(reading.responses.items()):
            yield Sample("llm_gateway_requests_total", {**labels, "code_class": code_class, "code": code}, value)
        for field, family in _GAUGES.items():
            value = getattr(reading, field)
            if value is not None and math.isfinite(value):
                yield Sample(family, labels, value)
        for state, count in sorted(reading.backends.items()):
            yield Sample("llm_gateway_backends", {**labels, "state": state}, count)
        for key in LATENCY_KEYS:
            average = reading.averages.get(key)
            if average is not None and math.isfinite(average):
                yield Sample("llm_gateway_average_seconds", {**labels, "phase": key}, average)
            histogram = reading.histograms.get(key)
            if histogram is not None:
                yield self._summary(now, key, histogram, labels)
        for step, histogram in sorted(reading.steps.items()):
            yield self._summary(now, f"step:{step}", histogram, {**labels, "step": step}, STEP_FAMILY)

    def _summary(
        self, now: float, key: str, histogram: Histogram, labels: dict[str, str], family: str | None = None
    ) -> QuantileSummary:
        window = self._windows.get(key)
        values = histogram_vector(histogram)
        if window is None:
            window = self._windows[key] = DeltaWindow(self._window_seconds)
            if self._lifetime_baseline:
                window.seed_lifetime(now, values, histogram.bounds)
            else:
                window.observe(now, values, histogram.bounds)
        else:
            window.observe(now, values, histogram.bounds)
        totals = window_histogram(window)
        if totals is None:
            quantiles = tuple((q, math.nan) for q in QUANTILES)
        else:
            quantiles = tuple((q, histogram_quantile(q, histogram.bounds, totals[0])) for q in QUANTILES)
        # the window's increase rides along, unexported, for the means the pair diagnosis takes apart
        increase = Histogram(histogram.bounds, totals[0], totals[1], totals[2]) if totals is not None else None
        name = family or LATENCY_FAMILIES[key]
        return QuantileSummary(name, labels, quantiles, histogram.count, histogram.sum, window=increase)
