"""Normalized samples: the one schema every source produces and everything downstream reads.

Sources translate outside formats (engine exposition text, NVML structs, sysfs files) into these
objects; exposition and diagnosis never see an engine's own metric names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

Labels = Mapping[str, str]
#: (dimension, value) of one slice: ("tenant", "team-a"), ("adapter", "sql-lora"), ("priority", "0")
SliceKey = tuple[str, str]


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
    #: the same histogram per slice (tenant, adapter, priority class: exporter/slicing.py) where
    #: the source carries one, already folded to the configured number per dimension; not exported
    slices: tuple[tuple[SliceKey, SliceHistograms], ...] = ()


Metric = Sample | QuantileSummary


@dataclass(frozen=True, slots=True)
class SliceHistograms:
    """One slice's histogram: cumulative, and its increase over the window (None before two scrapes)."""

    lifetime: Histogram
    window: Histogram | None
    window_seconds: float = math.nan


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
    # Keys: "time_to_first_token", "inter_token_latency", "e2e_request_latency", "queue_time", and
    # where the engine has them "prefill_time", "decode_time" (per request) and "iteration_tokens"
    # (tokens per engine step, a count not seconds).
    histograms: dict[str, Histogram] = field(default_factory=dict)
    # The engine's serving settings where it exports them (vLLM's `cache_config_info`), under the
    # normalized names of `llm_engine_config_info` (ENGINE_SETTINGS): advice names their values.
    settings: dict[str, str] = field(default_factory=dict)
    # Requests refused at the door by reason (vLLM `--max-num-queued-reqs`/`-tokens`: HTTP 503):
    # they never reach a latency histogram, so the SLOs count them as misses (exporter/slo/refusals.py).
    admission_rejections_total: dict[str, float] = field(default_factory=dict)
    # Prompt tokens not computed because a cache held them, by source: "local" (the engine's own
    # prefix cache), "external" (a KV connector: another instance, an offload tier).
    prompt_tokens_cached_total: dict[str, float] = field(default_factory=dict)
    # The KV connector's own lookups (vLLM `external_prefix_cache_*`), in tokens.
    external_prefix_cache_hits_total: float | None = None
    external_prefix_cache_queries_total: float | None = None
    # vLLM's sleep mode: "awake", or asleep as "weights_offloaded" (level 1), "discard_all"
    # (level 2) or "kv_cache_released": an engine asleep serves nothing and is neither down nor
    # idle capacity.
    sleep_state: str | None = None
    # The engine's own estimate of the work its steps did, per GPU (vLLM/SGLang MFU counters).
    estimated_flops_total: float | None = None
    estimated_read_bytes_total: float | None = None
    estimated_write_bytes_total: float | None = None
    # Speculative decoding: counters (vLLM), or the engine's own last-batch rate (SGLang).
    spec_decode_drafts_total: float | None = None
    spec_decode_draft_tokens_total: float | None = None
    spec_decode_accepted_tokens_total: float | None = None
    spec_decode_acceptance_ratio: float | None = None
    corrupted_requests_total: float | None = None
    # Waiting not for a batch slot but on something else (vLLM's reason="deferred": LoRA budget,
    # a KV transfer, a blocked request).
    requests_waiting_deferred: float | None = None
    # KV pools of a hybrid model (SGLang `full`, `swa`, `mamba`): usage 0-1 each; the reading's
    # `kv_cache_usage_ratio` is the fullest of them.
    kv_pool_usage: dict[str, float] = field(default_factory=dict)
    # LoRA adapter slots: in use (adapters with requests running) and how many fit at once.
    lora_slots_used: float | None = None
    lora_slots_total: float | None = None
    # The ranks (data-parallel engines, schedulers) whose series this reading joined, by name
    # ("engine=1", "dp_rank=3"): the engine source names one that stops reporting.
    ranks: tuple[str, ...] = ()
    # Per slice (tenant, adapter, priority class): requests running and waiting, and latency
    # histograms keyed as `histograms`, where the engine labels its series with one.
    slice_running: dict[SliceKey, float] = field(default_factory=dict)
    slice_waiting: dict[SliceKey, float] = field(default_factory=dict)
    slice_histograms: dict[SliceKey, dict[str, Histogram]] = field(default_factory=dict)
