"""The engine source: scrape one inference engine's /metrics and normalize it.

One instance per target, so each target has its own timeout, its own `llm_engine_up` and its own
error counts: a dead or garbage-spewing engine never hides the others.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from functools import cache
from urllib.parse import urlsplit, urlunsplit

from exporter.budget import CARDINALITY, cap_target, keep_known_first
from exporter.catalogue import ENGINE_SUMMARIES, QUANTILES
from exporter.model import EngineReading, Histogram, Metric, QuantileSummary, Sample
from exporter.promtext import MALFORMED_LINE, NAMES_HEAD_CHARS, LineCache, WantedParser
from exporter.sanity import INVALID_VALUE, screened
from exporter.settings import EngineTarget
from exporter.sources.base import Source, SourceError
from exporter.sources.engine_pd import EngineHandOver
from exporter.sources.engine_process import NAMES as PROCESS_NAMES
from exporter.sources.engine_process import process_samples
from exporter.sources.engine_ranks import RankTracker
from exporter.sources.engine_signals import signal_samples
from exporter.sources.engine_slices import SliceFolder
from exporter.sources.engine_urls import URL_LABEL, Joined, scrape_all
from exporter.sources.engines import MAPPINGS, detect
from exporter.sources.engines.common import DeclarativeMapping, EngineMapping
from exporter.sources.http_fetch import HttpClient, feed_parser, open_body, redact
from exporter.sources.scrape_auth import authorizer
from exporter.window import DeltaWindow, histogram_quantile, histogram_vector, observed, window_histogram

log = logging.getLogger(__name__)

_GAUGES = {
    "requests_running": "llm_engine_requests_running",
    "requests_waiting": "llm_engine_requests_waiting",
    "kv_cache_usage_ratio": "llm_engine_kv_cache_usage_ratio",
    "requests_waiting_deferred": "llm_engine_requests_waiting_deferred",
}
_PROCESS_CPU = "process_cpu_seconds_total"
_COUNTERS = {
    "process_cpu_seconds_total": "llm_engine_process_cpu_seconds_total",
    "preemptions_total": "llm_engine_preemptions_total",
    "prompt_tokens_total": "llm_engine_prompt_tokens_total",
    "generation_tokens_total": "llm_engine_generation_tokens_total",
    "spec_decode_drafts_total": "llm_engine_spec_decode_drafts_total",
    "spec_decode_draft_tokens_total": "llm_engine_spec_decode_draft_tokens_total",
    "spec_decode_accepted_tokens_total": "llm_engine_spec_decode_accepted_tokens_total",
    "corrupted_requests_total": "llm_engine_corrupted_requests_total",
}


#: TGI's /info is a small JSON document (model id, a few settings): a megabyte is plenty
INFO_MAX_BYTES = 1024 * 1024
KNOWN_TYPE_HEAD_CHARS = 64 * 1024


@cache
def _wanted(mapping: EngineMapping) -> frozenset[str]:
    """What the parser keeps once the engine is known: its mapping's names, its hand-over's, the
    process families (worked out once per mapping, not per scrape)."""
    return _read_names(mapping) | EngineHandOver.wanted(mapping.engine_type) | {_PROCESS_CPU} | PROCESS_NAMES


@cache
def _read_names(mapping: EngineMapping) -> frozenset[str]:
    return mapping.read_names()


_EVERY_WANTED = frozenset().union(*(_wanted(mapping) for mapping in MAPPINGS.values()))

_EVERY_INFO = {name: labels for mapping in MAPPINGS.values() for name, labels in mapping.info_labels.items()}


class EngineSource(Source):
    name = "engine"
    # `discards` (Source's): a fresh Counter (`_counting`) per collection, with `_discard_log`
    # saying what, for one log line on change

    def __init__(self, target: EngineTarget, window_seconds: float, lifetime_baseline: bool = False) -> None:
        self.config = target
        self.target = target.name
        self.timeout_seconds = target.limits.timeout_seconds
        self._window_seconds = window_seconds
        # `once` has no earlier scrape to diff against: count the engine's lifetime instead.
        self._lifetime_baseline = lifetime_baseline
        self._mapping: EngineMapping | None = MAPPINGS[target.type] if target.type else None
        self._client = HttpClient(follow_redirects=target.follow_redirects, auth=authorizer(target.auth))
        #: per URL of this target, its series parsed once (promtext.LineCache)
        self._line_caches: dict[int, LineCache] = {}
        self._shown_url = redact(target.url)
        self._windows: dict[tuple[str, str], DeltaWindow] = {}
        self._ranks = RankTracker()
        self._slices = SliceFolder(window_seconds, lifetime_baseline)
        #: its role and its KV hand-over in a disaggregated deployment (engine_pd.py)
        self.hand_over = EngineHandOver(target.role, target.role_source, window_seconds, lifetime_baseline)
        self._info_model: str | None = None
        self._known_models: tuple[str, ...] = ()
        #: the engine's last answered scrape carried its own process CPU, so the host source need
        #: not walk its process tree (exporter.app.build_pipeline tells it). A failed scrape keeps
        #: the claim: `llm_engine_process_cpu_seconds_total` is one series per engine, and the
        #: host's tree reading (every process of the engine) is another counter than the engine's
        #: own (its serving process), so filling the gaps of a busy host's timed-out scrapes with
        #: it made the series jump between the two (12 s and 50-100 s, live: read as resets, the
        #: host-overhead engine's CPU rate came out 0.66 cores where it ran at 0.95).
        self.reports_process_cpu = False

    @property
    def engine_type(self) -> str:
        return self._mapping.engine_type if self._mapping else "unknown"

    async def collect(self, now: float) -> list[Metric]:
        # A failed scrape raises and leaves the process-CPU claim as it was (see __init__).
        started = time.monotonic()
        if not self.config.rank_urls:
            return await self._readings(now, await self._scrape(), started)
        urls = (self.config.url, *self.config.rank_urls)
        joined = await scrape_all(self._scrape, urls, [redact(url) for url in urls])
        return await self._readings(now, joined, started, joined)

    async def _readings(
        self, now: float, parser: WantedParser | Joined, started: float, joined: Joined | None = None
    ) -> list[Metric]:
        """The normalized series from a parsed scrape (the engine detected on the first)."""
        # Families anywhere in the body count, not only those in the head (see GatewaySource).
        mapping = self._mapping or detect(parser.names | parser.present)
        if mapping is None:
            raise SourceError("parse", f"{self._shown_url}: no known engine metrics in the response")
        parsed = parser.result
        if self._mapping is None:
            parsed = {name: parsed[name] for name in _wanted(mapping)}
        if not parser.present & _read_names(mapping) and not mapping.matches(parser.names):
            raise SourceError("parse", f"{self._shown_url}: no {mapping.engine_type} metrics in the response")
        if self._mapping is None:
            log.info("engine %s detected as %s", self.target, mapping.engine_type)
            self._mapping = mapping
        readings = mapping.read(parsed)
        mapping.read_slices(parsed, self.config.limits, readings)
        duplicates = mapping.duplicate_labels if isinstance(mapping, DeclarativeMapping) else frozenset()
        self.hand_over.read(mapping.engine_type, parsed, duplicates, readings, now)
        readings = self._within_model_cap(readings)
        if parser.malformed:  # lines the formats do not allow: dropped, the rest of the scrape read
            self._counting[MALFORMED_LINE] += parser.malformed
            self._discard_log.append(f"{parser.malformed} malformed line(s) of wanted families dropped")
        if not readings:
            # Up, but nothing served yet (families declared, no samples): still say it is up.
            readings = [EngineReading(model=self.config.model or (self._known_models or ("",))[0])]
        if mapping.needs_model_from_info:
            model = await self._model_without_label(self.timeout_seconds - (time.monotonic() - started))
            for reading in readings:
                reading.model = reading.model or model
        # prometheus_client's process collector (vLLM, SGLang, trtllm-serve) labels nothing: the
        # serving process's CPU belongs to every model it serves.
        process_cpu = parsed[_PROCESS_CPU].get(((URL_LABEL, "0"),) if joined else ())
        self.reports_process_cpu = process_cpu is not None
        for reading in readings:
            reading.process_cpu_seconds_total = process_cpu
        if joined is not None:  # each URL of the engine is a rank of its own
            for reading in readings:
                reading.ranks = (*reading.ranks, *joined.answered)
        self._known_models = tuple(r.model for r in readings)
        self._forget_windows({r.model for r in readings})
        self._ranks.update(now, readings, joined.silent if joined else ())
        metrics = [
            metric
            for reading in readings
            for part in (
                self._render(now, reading),
                self.hand_over.metrics(now, reading.model, self._labels(reading.model)),
                process_samples(parsed, self._labels(reading.model), reading.model),
            )
            for metric in part
        ]
        return self._within_series_cap(metrics)

    def _parser(self, index: int = 0) -> WantedParser:
        """A parser for this target's next scrape. Before the engine type is known every mapping's
        names are wanted, so detection needs no second pass over a body that is never held whole;
        detection reads names from the first MiB, and once the type is known a block's worth tells
        a payload that declares the families from one that is not this engine's any more."""
        limits = self.config.limits
        wanted = _wanted(self._mapping) if self._mapping else _EVERY_WANTED
        known = self._mapping is not None
        return WantedParser(
            wanted,
            limits.max_series,
            limits.max_label_value_length,
            KNOWN_TYPE_HEAD_CHARS if known else NAMES_HEAD_CHARS,
            names_on_demand=known,
            line_cache=self._line_caches.setdefault(index, LineCache()),
            info_labels=self._mapping.info_labels if self._mapping else _EVERY_INFO,
            declared="until_sample" if known else "whole_body",
        )

    def _refuse_json(self, content_type: str) -> None:
        if "json" in content_type:
            raise SourceError(
                "parse",
                f"{self._shown_url}: got JSON, not Prometheus text "
                "(trtllm-serve serves Prometheus text at /prometheus/metrics)",
            )

    async def _scrape(self, url: str | None = None, index: int = 0) -> WantedParser:
        """Fetch and parse in one pass as the body streams in (`url`: one of the engine's ranks)."""
        parser = self._parser(index)
        limits = self.config.limits
        url = url or self.config.url
        async with open_body(self._client, url, self.timeout_seconds, limits.max_response_bytes) as body:
            self._refuse_json(body.content_type)
            await feed_parser(body, parser, redact(url))
        return parser

    def down_metrics(self) -> list[Metric]:
        models = self._known_models or (self.config.model or "",)
        return [Sample("llm_engine_up", self._labels(model), 0.0) for model in models]

    def close(self) -> None:
        self._client.close()

    def _labels(self, model: str) -> dict[str, str]:
        return {
            "engine": self.target,
            "engine_type": self.engine_type,
            "model": model,
            **dict(self.config.labels),
            **self.hand_over.role_labels(),
        }

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
        if reading.settings:
            # The engine's identity labels win over a setting of the same name.
            yield Sample("llm_engine_config_info", {**reading.settings, **labels}, 1.0)
        ratio = self._prefix_hit_ratio(now, reading)
        if ratio is not None:
            yield Sample("llm_engine_prefix_cache_hit_ratio", labels, ratio)
        yield from signal_samples(
            reading, labels, lambda key, values: self._observe((reading.model, key), now, values, None)
        )
        for rank, reporting, _ in self._ranks.states(now, reading.model):
            yield Sample("llm_engine_rank_up", {**labels, "rank": rank}, 1.0 if reporting else 0.0)
        slice_samples, slice_windows = self._slices.render(now, reading, labels, self.config.limits, reading.model)
        yield from slice_samples
        for key, family in ENGINE_SUMMARIES.items():
            histogram = reading.histograms.get(key)
            if histogram is None:
                continue
            window = self._observe((reading.model, key), now, histogram_vector(histogram), histogram.bounds)
            totals = window_histogram(window)
            windowed = None
            if totals is None:
                quantiles = tuple((q, math.nan) for q in QUANTILES)
            else:
                quantiles = tuple((q, histogram_quantile(q, histogram.bounds, totals[0])) for q in QUANTILES)
                windowed = Histogram(histogram.bounds, totals[0], totals[1], totals[2])
            yield QuantileSummary(
                family,
                labels,
                quantiles,
                histogram.count,
                histogram.sum,
                histogram=histogram,
                window=windowed,
                window_seconds=window.span(),
                slices=tuple(slice_windows.get(key, ())),
            )

    def _prefix_hit_ratio(self, now: float, reading: EngineReading) -> float | None:
        hits, queries = reading.prefix_cache_hits_total, reading.prefix_cache_queries_total
        if hits is not None and queries is not None:
            totals = self._observe((reading.model, "prefix_cache"), now, (hits, queries), None).total()
            if totals is None or totals[1] <= 0:
                return None
            return min(1.0, max(0.0, totals[0] / totals[1]))
        return reading.prefix_cache_hit_ratio

    def _observe(self, key: tuple[str, str], now: float, values: tuple[float, ...], shape: object) -> DeltaWindow:
        return observed(self._windows, key, self._window_seconds, self._lifetime_baseline, now, values, shape)

    def _forget_windows(self, models: set[str]) -> None:
        for key in [k for k in self._windows if k[0] not in models]:
            del self._windows[key]
        self._ranks.forget_models(models)
        self._slices.forget_models(models)
        self.hand_over.forget(models)

    async def _model_without_label(self, seconds_left: float) -> str:
        """TGI labels nothing with the model: take it from the config, else from its /info.

        /info gets half the time the scrape has left, so a slow /info costs the model label, not
        the scrape: the loop marks a source down once its collect outlives the timeout.
        """
        if self.config.model:
            return self.config.model
        if self._info_model is None and seconds_left > 0:
            parts = urlsplit(self.config.url)
            info_url = urlunsplit((parts.scheme, parts.netloc, "/info", "", ""))
            try:
                async with open_body(
                    self._client, info_url, seconds_left / 2, INFO_MAX_BYTES, "application/json"
                ) as body:
                    model_id = json.loads(await body.read()).get("model_id")
            except (SourceError, ValueError, AttributeError) as exc:
                log.debug("engine %s: no model from /info: %s", self.target, exc)
                model_id = None
            if not model_id:
                return ""  # asked again next scrape: /info may only answer once the model loaded
            self._info_model = str(model_id)
        return self._info_model or ""
