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
from dataclasses import replace
from types import MappingProxyType

from exporter.catalogue import QUANTILES
from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.promtext import MALFORMED_LINE, NAMES_HEAD_CHARS, LineCache, WantedParser
from exporter.settings import GatewayTarget
from exporter.sources.access_log import AccessLogReceiver
from exporter.sources.base import Source, SourceError
from exporter.sources.engine_slices import SliceFolder
from exporter.sources.gateway_slices import read_gateway_slices
from exporter.sources.gateways import MAPPINGS, detect
from exporter.sources.gateways.common import LATENCY_KEYS, GatewayMapping, GatewayReading
from exporter.sources.http_fetch import HttpClient, feed_parser, open_body, redact
from exporter.sources.scrape_auth import authorizer
from exporter.window import DeltaWindow, histogram_vector, observed, windowed_summary

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
    """Which gateway a body is, is decided from the whole body, never from a head of fixed size
    alone (an EPP's first request counter comes ~95 KB in, after the Go runtime, controller-runtime
    and plugin families): a configured type matches when any family it reads has a sample or a
    `# TYPE` line anywhere, or, failing that, its names are in the first KNOWN_TYPE_HEAD_CHARS;
    an unconfigured one is detected from the names in the first NAMES_HEAD_CHARS and every wanted
    family the body has anywhere."""

    name = "gateway"  # its `discards` (Source's): malformed lines

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
        self._slices = SliceFolder(window_seconds, lifetime_baseline)
        #: per-request timings from the gateway's access log, where configured (histograms the
        #: gateway's own metrics lack)
        self._access_log = AccessLogReceiver(target.access_log, target.url) if target.access_log else None

    @property
    def gateway_type(self) -> str:
        return self._mapping.gateway_type if self._mapping else "unknown"

    def labels(self) -> dict[str, str]:
        return {"gateway": self.target, "gateway_type": self.gateway_type}

    async def collect(self, now: float) -> list[Metric]:
        mapping, parser = await self._scrape()
        if self._mapping is None:
            log.info("gateway %s detected as %s", self.target, mapping.gateway_type)
            self._mapping = mapping
        discards = {MALFORMED_LINE: parser.malformed} if parser.malformed else {}
        if discards != self.discards:
            log.warning("gateway %s: %s malformed line(s) of wanted families dropped", self.target, parser.malformed)
        self.discards = MappingProxyType(discards)
        reading = mapping.read(parser.result)
        read_gateway_slices(mapping, parser.result, self.config.limits, reading)
        log_lines: list[Metric] = []
        if self._access_log is not None:
            reading.histograms.update(self._access_log.histograms())
            log_lines = list(self._access_log.samples(self.labels()))
        return [*self._render(now, reading), *log_lines]

    def down_metrics(self) -> list[Metric]:
        return [Sample("llm_gateway_up", self.labels(), 0.0)]

    def close(self) -> None:
        self._client.close()
        if self._access_log is not None:
            self._access_log.close()

    async def _scrape(self) -> tuple[GatewayMapping, WantedParser]:
        limits = self.config.limits
        configured = self._mapping
        parser = WantedParser(
            configured.wanted() if configured else _EVERY_WANTED,
            limits.max_series,
            limits.max_label_value_length,
            KNOWN_TYPE_HEAD_CHARS if configured else NAMES_HEAD_CHARS,
            names_on_demand=configured is not None,
            line_cache=self._line_cache,
            declared="until_sample" if configured else "whole_body",
        )
        async with open_body(self._client, self.config.url, self.timeout_seconds, limits.max_response_bytes) as body:
            await feed_parser(body, parser, self._shown_url)
        if configured is not None:
            if parser.present & configured.wanted() or configured.matches(parser.names):
                return configured, parser
            raise SourceError("parse", f"{self._shown_url}: no {configured.gateway_type} metrics in the response")
        mapping = detect(parser.names | parser.present)
        if mapping is None:
            raise SourceError("parse", f"{self._shown_url}: no known gateway metrics in the response")
        return mapping, parser

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
        slice_samples, slice_windows = self._slices.render(
            now, reading, labels, self.config.limits, prefix="llm_gateway"
        )
        yield from slice_samples
        for key in LATENCY_KEYS:
            average = reading.averages.get(key)
            if average is not None and math.isfinite(average):
                yield Sample("llm_gateway_average_seconds", {**labels, "phase": key}, average)
            histogram = reading.histograms.get(key)
            if histogram is not None:
                yield replace(self._summary(now, key, histogram, labels), slices=tuple(slice_windows.get(key, ())))
        for step, histogram in sorted(reading.steps.items()):
            yield self._summary(now, f"step:{step}", histogram, {**labels, "step": step}, STEP_FAMILY)

    def _summary(
        self, now: float, key: str, histogram: Histogram, labels: dict[str, str], family: str | None = None
    ) -> QuantileSummary:
        """A latency summary over the window; its increase (`window`) rides along, unexported, for the
        SLO attainment and the means the pair diagnosis takes apart (exporter/diagnosis/pd.py)."""
        vector, bounds = histogram_vector(histogram), histogram.bounds
        window = observed(self._windows, key, self._window_seconds, self._lifetime_baseline, now, vector, bounds)
        return windowed_summary(family or LATENCY_FAMILIES[key], labels, histogram, window, QUANTILES)
