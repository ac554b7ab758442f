"""vLLM: V1 (`engine` label = data-parallel rank), V0 names, and Triton's vLLM-backend subset.

V1 ≥ 0.9.2 renamed `gpu_cache_usage_perc` → `kv_cache_usage_perc` and `gpu_prefix_cache_*` →
`prefix_cache_*`; 0.11 deprecated `time_per_output_token_seconds` for `inter_token_latency_seconds`.
Newest names come first so a server that exposes both (during deprecation) is read once.
Triton's vLLM backend labels series `model`/`version` and has no queue or KV gauges: those stay absent.

Since 0.11 (names and help texts as vllm/v1/metrics/loggers.py of 0.32.0 prints them):
`admission_rejections{reason}` (0.32, `--max-num-queued-reqs`/`-tokens`, labelled `model_name`
only: the API server refuses before any engine rank sees the request), `prompt_tokens_by_source`,
`engine_sleep_state`, `num_requests_waiting_by_reason`, the per-request prefill/decode and the
per-step token histograms, speculative-decoding counters (with `--speculative-config`),
`corrupted_requests` (with `VLLM_COMPUTE_NANS_IN_LOGITS`), `lora_requests_info` (with LoRA) and the
MFU counters `estimated_*_per_gpu_total` (with `--enable-mfu-metrics`). A family an option turns
off is absent, and stays absent here: never read as zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType

from exporter.model import EngineReading
from exporter.promtext import LabelKey, ParsedSamples, parse_number
from exporter.sources.engines.common import (
    DeclarativeMapping,
    HistogramSignal,
    Signal,
    has_prefix,
    model_of,
    read_counter,
    reduce_by_model,
)
from exporter.sources.engines.kv_transfer import VLLM_CONNECTORS
from exporter.sources.engines.registry import MAPPINGS

CACHE_CONFIG_INFO = "vllm:cache_config_info"
# vLLM's CacheConfig fields (labels of `vllm:cache_config_info`, vllm/v1/metrics/loggers.py
# `log_metrics_info`) → the normalized setting names of `llm_engine_config_info`. Only these: the
# info carries ~40 labels, most of them internal (mamba, hashing), and advice needs these.
CACHE_CONFIG_SETTINGS = {
    "enable_prefix_caching": "prefix_caching",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "block_size": "block_size",
    "num_gpu_blocks": "num_gpu_blocks",
    "cache_dtype": "kv_cache_dtype",
    "kv_cache_size_tokens": "kv_cache_size_tokens",
}
ADMISSION_REJECTIONS = "vllm:admission_rejections_total"
PROMPT_TOKENS_BY_SOURCE = "vllm:prompt_tokens_by_source_total"
PROMPT_TOKENS_CACHED = "vllm:prompt_tokens_cached_total"
#: `prompt_tokens_by_source` sources → the normalized `source` of llm_engine_prompt_tokens_cached_total
CACHED_SOURCES = {"local_cache_hit": "local", "external_kv_transfer": "external"}
SLEEP_STATE = "vllm:engine_sleep_state"
LORA_INFO = "vllm:lora_requests_info"
#: how many requests of max_model_len tokens the KV pool holds (vLLM's
#: get_max_concurrency_for_kv_cache_config): the pool over it is the context one request may hold
KV_CACHE_MAX_CONCURRENCY = "kv_cache_max_concurrency"


def cache_config_settings(parsed: ParsedSamples) -> dict[str, str]:
    """The normalized settings from `vllm:cache_config_info`: data-parallel ranks (`engine`
    "0", "1", ...) share one CacheConfig, so the first rank's labels stand for the server.
    vLLM writes Python's str() of each value ("True", "None"): booleans become "true"/"false",
    "None" (unset) is left out."""
    series = parsed.get(CACHE_CONFIG_INFO) or {}
    if not series:
        return {}
    labels = dict(min(series))
    settings = {}
    for wire, name in CACHE_CONFIG_SETTINGS.items():
        value = labels.get(wire)
        if value is None or value == "None" or value == "":
            continue
        settings[name] = value.lower() if value in ("True", "False") else value
    context = _max_model_len(settings.get("kv_cache_size_tokens"), labels.get(KV_CACHE_MAX_CONCURRENCY))
    if context is not None:
        settings["max_model_len"] = context
    return settings


def _max_model_len(pool_tokens: str | None, concurrency: str | None) -> str | None:
    """max_model_len from the pool and how many requests of that length it holds.

    vLLM exports no max_model_len, but its cache_config_info carries `kv_cache_max_concurrency`:
    the pool's blocks over the blocks one request of max_model_len needs. For a model of full
    attention layers the pool in tokens over it is max_model_len to within a block (the real
    0.32.0 capture: 1,536 / 1.333 = 1,152, its `--max-model-len`). A sliding-window or hybrid
    model keeps fewer blocks per request than its context, so there the figure is the KV one
    request holds at most, below its max_model_len (the docs say so where the label is listed).
    """
    try:
        tokens, requests = float(pool_tokens or ""), float(concurrency or "")
    except ValueError:
        return None
    if not (0 < tokens < math.inf and 0 < requests < math.inf):
        return None
    context = round(tokens / requests)
    return str(context) if context >= 1 else None


class VllmMapping(DeclarativeMapping):
    engine_type = "vllm"
    kv_connectors = VLLM_CONNECTORS
    signals = (
        Signal("requests_running", ("vllm:num_requests_running",)),
        Signal("requests_waiting", ("vllm:num_requests_waiting",)),
        Signal("kv_cache_usage_ratio", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), reduce="max"),
        Signal("preemptions_total", ("vllm:num_preemptions_total",)),
        Signal("prompt_tokens_total", ("vllm:prompt_tokens_total",)),
        Signal("generation_tokens_total", ("vllm:generation_tokens_total",)),
        Signal("prefix_cache_hits_total", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")),
        Signal(
            "prefix_cache_queries_total", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
        ),
        # V0 only had a block hit-rate gauge.
        Signal("prefix_cache_hit_ratio", ("vllm:gpu_prefix_cache_hit_rate",), reduce="max"),
        Signal("external_prefix_cache_hits_total", ("vllm:external_prefix_cache_hits_total",)),
        Signal("external_prefix_cache_queries_total", ("vllm:external_prefix_cache_queries_total",)),
        Signal("requests_waiting_deferred", ("vllm:num_requests_waiting_by_reason",), match=(("reason", "deferred"),)),
        # Per GPU: the mean over data-parallel ranks is the per-GPU figure of the engine.
        Signal("estimated_flops_total", ("vllm:estimated_flops_per_gpu_total",), reduce="mean"),
        Signal("estimated_read_bytes_total", ("vllm:estimated_read_bytes_per_gpu_total",), reduce="mean"),
        Signal("estimated_write_bytes_total", ("vllm:estimated_write_bytes_per_gpu_total",), reduce="mean"),
        Signal("spec_decode_drafts_total", ("vllm:spec_decode_num_drafts_total",)),
        Signal("spec_decode_draft_tokens_total", ("vllm:spec_decode_num_draft_tokens_total",)),
        Signal("spec_decode_accepted_tokens_total", ("vllm:spec_decode_num_accepted_tokens_total",)),
        Signal("corrupted_requests_total", ("vllm:corrupted_requests_total",)),
    )
    histograms = (
        HistogramSignal("time_to_first_token", ("vllm:time_to_first_token_seconds",)),
        HistogramSignal(
            "inter_token_latency", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
        ),
        HistogramSignal("e2e_request_latency", ("vllm:e2e_request_latency_seconds",)),
        HistogramSignal("queue_time", ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests")),
        HistogramSignal("prefill_time", ("vllm:request_prefill_time_seconds",)),
        HistogramSignal("decode_time", ("vllm:request_decode_time_seconds",)),
        HistogramSignal("iteration_tokens", ("vllm:iteration_tokens_total",)),
    )
    rank_labels = ("engine",)

    extra_names = (ADMISSION_REJECTIONS, PROMPT_TOKENS_BY_SOURCE, PROMPT_TOKENS_CACHED, SLEEP_STATE)
    # Only the settings read, whatever else the info carries (a fork's has carried a model's whole
    # configuration); data-parallel ranks by `engine`. The LoRA info's adapter lists are kept
    # only while under the label value cap (an adapter list over it leaves the slots unknown).
    info_labels = MappingProxyType(
        {
            CACHE_CONFIG_INFO: frozenset(CACHE_CONFIG_SETTINGS) | {KV_CACHE_MAX_CONCURRENCY, "engine"},
            LORA_INFO: frozenset({"max_lora", "running_lora_adapters", "waiting_lora_adapters", "engine"}),
        }
    )

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "vllm:")

    def finish(
        self,
        parsed: ParsedSamples,
        reading: Callable[[str], EngineReading],
        readings: dict[str, EngineReading],
    ) -> None:
        """The cache config has no model label: it is the server's, so every model's."""
        settings = cache_config_settings(parsed)
        for each in readings.values():
            each.settings = dict(settings)
        for (model, reason), value in per_label(read_counter(parsed, ADMISSION_REJECTIONS), "reason").items():
            reading(model).admission_rejections_total[reason] = value
        by_source = per_label(read_counter(parsed, PROMPT_TOKENS_BY_SOURCE), "source")
        if by_source:
            for (model, source), value in by_source.items():
                if source in CACHED_SOURCES:
                    reading(model).prompt_tokens_cached_total[CACHED_SOURCES[source]] = value
        else:  # before the split: every cached token counted as the engine's own
            for model, value in reduce_by_model(read_counter(parsed, PROMPT_TOKENS_CACHED), "sum").items():
                reading(model).prompt_tokens_cached_total["local"] = value
        for model, state in sleep_states(parsed.get(SLEEP_STATE, {})).items():
            reading(model).sleep_state = state
        for each in readings.values():
            mfu_off(each)
        used, total = lora_slots(parsed.get(LORA_INFO, {}))
        if total is not None:
            for each in readings.values():  # labelled with no model: the server's, every model's
                each.lora_slots_used, each.lora_slots_total = used, total


def mfu_off(reading: EngineReading) -> None:
    """vLLM registers the MFU counters whether or not `--enable-mfu-metrics` is on and only counts
    with it: three zeros are "not measured", which must read as absent, never as an idle GPU."""
    estimates = (reading.estimated_flops_total, reading.estimated_read_bytes_total, reading.estimated_write_bytes_total)
    if all(value == 0.0 for value in estimates):
        reading.estimated_flops_total = reading.estimated_read_bytes_total = reading.estimated_write_bytes_total = None


def per_label(series: dict[LabelKey, float], label: str) -> dict[tuple[str, str], float]:
    """(model, value of `label`) → the sum over ranks."""
    out: dict[tuple[str, str], float] = {}
    for key, value in series.items():
        labels = dict(key)
        slot = (model_of(labels), labels.get(label, ""))
        out[slot] = out.get(slot, 0.0) + value
    return out


def sleep_states(series: dict[LabelKey, float]) -> dict[str, str]:
    """Per model, its sleep state from `engine_sleep_state{sleep_state}` (one gauge per state, 1 for
    the current one): "awake" while any rank is awake (it still serves), else the deepest level any
    rank reports; a rank with `awake` 0 and no level set has released only its KV cache
    (vLLM's `/release_kv_cache_memory` records exactly that)."""
    ranks: dict[tuple[str, str], dict[str, float]] = {}
    for key, value in series.items():
        labels = dict(key)
        ranks.setdefault((model_of(labels), labels.get("engine", "")), {})[labels.get("sleep_state", "")] = value
    states: dict[str, list[str]] = {}
    for (model, _), flags in ranks.items():
        if flags.get("awake", 1.0) >= 1.0:
            state = "awake"
        elif flags.get("discard_all", 0.0) >= 1.0:
            state = "discard_all"
        elif flags.get("weights_offloaded", 0.0) >= 1.0:
            state = "weights_offloaded"
        else:
            state = "kv_cache_released"
        states.setdefault(model, []).append(state)
    order = ("awake", "discard_all", "weights_offloaded", "kv_cache_released")
    return {model: min(found, key=order.index) for model, found in states.items()}


def lora_slots(series: dict[LabelKey, float]) -> tuple[float | None, float | None]:
    """(adapters with requests running, max_lora) from `lora_requests_info`: an info gauge set to
    the time of each update under the adapters' comma-joined names, so the newest series is now."""
    if not series:
        return None, None
    labels = dict(max(series.items(), key=lambda item: item[1])[0])
    total = parse_number(labels.get("max_lora", ""))
    if "running_lora_adapters" not in labels:  # left out by the parser: a list over the label cap
        return None, total
    running = [name for name in labels["running_lora_adapters"].split(",") if name]
    return float(len(running)), total


MAPPINGS.register(VllmMapping(), order=20)
