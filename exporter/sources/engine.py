"""The engine source: scrape one inference engine's /metrics and normalize it.

One instance per target, so each target has its own timeout, its own `llm_engine_up` and its own
error counts: a dead or garbage-spewing engine never hides the others.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from urllib.parse import urlsplit, urlunsplit

import requests

from exporter.budget import CARDINALITY, cap_target, keep_known_first
from exporter.catalogue import LATENCY_FAMILIES, QUANTILES
from exporter.model import EngineReading, Metric, QuantileSummary, Sample
from exporter.promtext import TooManySeries, parse_wanted, sample_names
from exporter.sanity import INVALID_VALUE, screened
from exporter.settings import EngineTarget
from exporter.sources.base import Source, SourceError
from exporter.sources.engines import MAPPINGS, detect
from exporter.sources.engines.common import HISTOGRAM_KEYS, DeclarativeMapping
from exporter.sources.http_fetch import fetch_text
from exporter.window import DeltaWindow, histogram_quantile, histogram_vector, window_histogram

log = logging.getLogger(__name__)

_GAUGES = {
    "requests_running": "llm_engine_requests_running",
    "requests_waiting": "llm_engine_requests_waiting",
    "kv_cache_usage_ratio": "llm_engine_kv_cache_usage_ratio",
}
_PROCESS_CPU = "process_cpu_seconds_total"
_COUNTERS = {
    "process_cpu_seconds_total": "llm_engine_process_cpu_seconds_total",
    "preemptions_total": "llm_engine_preemptions_total",
    "prompt_tokens_total": "llm_engine_prompt_tokens_total",
    "generation_tokens_total": "llm_engine_generation_tokens_total",
}


class _NoRedirectSession(requests.Session):
    """A session that returns a 3xx as it is (the scrape then fails with its status)."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


class EngineSource(Source):
    name = "engine"
    #: what the last collection left out, by reason (exporter.budget.Discarding); a fresh Counter
    #: (`_counting`) per collection, with `_discard_log` saying what, for one log line on change
    discards: Mapping[str, int] = MappingProxyType({})

    def __init__(self, target: EngineTarget, window_seconds: float, lifetime_baseline: bool = False) -> None:
        self.config = target
        self.target = target.name
        self.timeout_seconds = target.limits.timeout_seconds
        self._window_seconds = window_seconds
        # `once` has no earlier scrape to diff against: count the engine's lifetime instead.
        self._lifetime_baseline = lifetime_baseline
        self._mapping: DeclarativeMapping | None = MAPPINGS[target.type] if target.type else None
        self._session = requests.Session() if target.follow_redirects else _NoRedirectSession()
        self._windows: dict[tuple[str, str], DeltaWindow] = {}
        self._info_model: str | None = None
        self._known_models: tuple[str, ...] = ()
        #: the engine exports its own process CPU, so the host source need not look it up
        self.reports_process_cpu = False

    @property
    def engine_type(self) -> str:
        return self._mapping.engine_type if self._mapping else "unknown"

    def collect(self, now: float) -> list[Metric]:
        text, content_type = fetch_text(
            self._session, self.config.url, self.timeout_seconds, self.config.limits.max_response_bytes
        )
        if "json" in content_type:
            raise SourceError(
                "parse",
                f"{self.config.url}: got JSON, not Prometheus text "
                "(trtllm-serve serves Prometheus text at /prometheus/metrics)",
            )
        mapping = self._mapping or detect(sample_names(text))
        if mapping is None:
            raise SourceError("parse", f"{self.config.url}: no known engine metrics in the response")
        try:
            parsed = parse_wanted(
                text,
                mapping.wanted() | {_PROCESS_CPU},
                self.config.limits.max_series,
                self.config.limits.max_label_value_length,
            )
        except TooManySeries as exc:
            raise SourceError("cardinality", f"{self.config.url}: {exc}") from exc
        if not any(parsed.values()) and not mapping.matches(sample_names(text)):
            raise SourceError("parse", f"{self.config.url}: no {mapping.engine_type} metrics in the response")
        if self._mapping is None:
            log.info("engine %s detected as %s", self.target, mapping.engine_type)
            self._mapping = mapping
        readings = mapping.read(parsed)
        readings = self._within_model_cap(readings)
        if not readings:
            # Up, but nothing served yet (families declared, no samples): still say it is up.
            readings = [EngineReading(model=self.config.model or (self._known_models or ("",))[0])]
        if mapping.needs_model_from_info:
            model = self._model_without_label()
            for reading in readings:
                reading.model = reading.model or model
        # prometheus_client's process collector (vLLM, SGLang, trtllm-serve) labels nothing: the
        # serving process's CPU belongs to every model it serves.
        process_cpu = parsed[_PROCESS_CPU].get(())
        self.reports_process_cpu = process_cpu is not None
        for reading in readings:
            reading.process_cpu_seconds_total = process_cpu
        self._known_models = tuple(r.model for r in readings)
        self._forget_windows({r.model for r in readings})
        return self._within_series_cap([metric for reading in readings for metric in self._render(now, reading)])

    def down_metrics(self) -> list[Metric]:
        models = self._known_models or (self.config.model or "",)
        return [Sample("llm_engine_up", self._labels(model), 0.0) for model in models]

    def close(self) -> None:
        self._session.close()

    def _labels(self, model: str) -> dict[str, str]:
        return {"engine": self.target, "engine_type": self.engine_type, "model": model, **dict(self.config.labels)}

    # -- the output budget and impossible values (exporter/budget.py, exporter/sanity.py) ----------

    def _within_model_cap(self, readings: list[EngineReading]) -> list[EngineReading]:
        """At most `max_models` readings, those exported last time first; starts this collection's
        discards (read by the loop once `collect` returns)."""
        limit = self.config.limits.max_models
        kept = keep_known_first(readings, lambda r: r.model, self._known_models, limit)
        self._counting: Counter[str] = Counter()
        self._previous_discards: Mapping[str, int] = self.discards
        self.discards = self._counting
        self._discard_log: list[str] = []
        if len(kept) < len(readings):
            self._counting[CARDINALITY] += len(readings) - len(kept)
            names = sorted({r.model for r in readings} - {r.model for r in kept})
            self._discard_log.append(
                f"{len(names)} model(s) over max_models={limit} left out: {', '.join(names[:5])}"
                + (", ..." if len(names) > 5 else "")
            )
        return kept

    def _within_series_cap(self, metrics: list[Metric]) -> list[Metric]:
        limit = self.config.limits.max_exported_series
        kept, dropped = cap_target(metrics, limit)
        if dropped:
            self._counting[CARDINALITY] += dropped
            self._discard_log.append(f"{dropped} series over max_exported_series={limit} left out")
        if dict(self.discards) != dict(self._previous_discards):
            log.warning("engine %s: %s", self.target, "; ".join(self._discard_log) or "output complete again")
        return kept

    def _render(self, now: float, reading: EngineReading) -> Iterator[Metric]:
        reading, problems = screened(reading)
        if problems:
            self._counting[INVALID_VALUE] += len(problems)
            self._discard_log.append(f"model {reading.model!r}: impossible values dropped: {', '.join(problems)}")
        labels = self._labels(reading.model)
        yield Sample("llm_engine_up", labels, 1.0)
        for field, family in (*_GAUGES.items(), *_COUNTERS.items()):
            value = getattr(reading, field)
            if value is not None:
                yield Sample(family, labels, value)
        ratio = self._prefix_hit_ratio(now, reading)
        if ratio is not None:
            yield Sample("llm_engine_prefix_cache_hit_ratio", labels, ratio)
        for key in HISTOGRAM_KEYS:
            histogram = reading.histograms.get(key)
            if histogram is None:
                continue
            window = self._observe((reading.model, key), now, histogram_vector(histogram), histogram.bounds)
            totals = window_histogram(window)
            if totals is None:
                quantiles = tuple((q, math.nan) for q in QUANTILES)
            else:
                quantiles = tuple((q, histogram_quantile(q, histogram.bounds, totals[0])) for q in QUANTILES)
            yield QuantileSummary(LATENCY_FAMILIES[key], labels, quantiles, histogram.count, histogram.sum)

    def _prefix_hit_ratio(self, now: float, reading: EngineReading) -> float | None:
        hits, queries = reading.prefix_cache_hits_total, reading.prefix_cache_queries_total
        if hits is not None and queries is not None:
            totals = self._observe((reading.model, "prefix_cache"), now, (hits, queries), None).total()
            if totals is None or totals[1] <= 0:
                return None
            return min(1.0, max(0.0, totals[0] / totals[1]))
        return reading.prefix_cache_hit_ratio

    def _observe(self, key: tuple[str, str], now: float, values: tuple[float, ...], shape: object) -> DeltaWindow:
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = DeltaWindow(self._window_seconds)
            if self._lifetime_baseline:
                window.seed_lifetime(now, values, shape)
                return window
        window.observe(now, values, shape)
        return window

    def _forget_windows(self, models: set[str]) -> None:
        for key in [k for k in self._windows if k[0] not in models]:
            del self._windows[key]

    def _model_without_label(self) -> str:
        """TGI labels nothing with the model: take it from the config, else from its /info."""
        if self.config.model:
            return self.config.model
        if self._info_model is None:
            parts = urlsplit(self.config.url)
            info_url = urlunsplit((parts.scheme, parts.netloc, "/info", "", ""))
            try:
                response = self._session.get(info_url, timeout=self.timeout_seconds)
                model_id = response.json().get("model_id") if response.ok else None
            except (requests.RequestException, ValueError, AttributeError):
                model_id = None
            if not model_id:
                return ""  # asked again next scrape: /info may only answer once the model loaded
            self._info_model = str(model_id)
        return self._info_model
