"""Normalized samples: the one schema every source produces and everything downstream reads.

Sources translate outside formats (engine exposition text, NVML structs, sysfs files) into these
objects; exposition and diagnosis never see an engine's own metric names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of a catalogue family (gauge or counter) with its labels."""

    name: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class QuantileSummary:
    """A summary family sample: windowed quantiles plus the cumulative count and sum.

    Quantiles are NaN when the window saw no observation, as Prometheus' Go client reports an
    empty summary; count and sum stay cumulative so `rate()` works on them.
    """

    name: str
    labels: Labels
    quantiles: tuple[tuple[float, float], ...]
    count: float
    sum: float
    #: the engine's cumulative histogram and its increase over the window (for SLO attainment,
    #: exporter/slo/); not exported. `window_seconds` is the time the increase covers (NaN unknown).
    histogram: Histogram | None = None
    window: Histogram | None = None
    window_seconds: float = math.nan


Metric = Sample | QuantileSummary


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram as an engine exposes it, bounds in seconds, ending with +Inf."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.cumulative):
            raise ValueError("bounds and cumulative counts differ in length")
        if not self.bounds or not math.isinf(self.bounds[-1]):
            raise ValueError("a histogram needs a +Inf bucket")


@dataclass(slots=True)
class EngineReading:
    """What one engine reports for one served model, already summed over data-parallel ranks.

    `None` means the engine has no such signal (TGI has no KV usage): it is left out of the
    exposition rather than faked as zero.
    """

    model: str
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage_ratio: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    # CPU seconds of the serving process, where the engine exports prometheus_client's process
    # metrics (the API server's process; vLLM V1's engine core runs in a child process).
    process_cpu_seconds_total: float | None = None
    # Prefix cache: counters whose window delta gives the hit ratio, or a ready ratio gauge from
    # engines that only expose one.
    prefix_cache_hits_total: float | None = None
    prefix_cache_queries_total: float | None = None
    prefix_cache_hit_ratio: float | None = None
    # Keys: "time_to_first_token", "inter_token_latency", "e2e_request_latency", "queue_time".
    histograms: dict[str, Histogram] = field(default_factory=dict)
    # The engine's serving settings where it exports them (vLLM's `cache_config_info`), under the
    # normalized names of `llm_engine_config_info` (ENGINE_SETTINGS): advice names their values.
    settings: dict[str, str] = field(default_factory=dict)
