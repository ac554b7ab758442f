"""vLLM: V1 (`engine` label = data-parallel rank), V0 names, and Triton's vLLM-backend subset.

V1 ≥ 0.9.2 renamed `gpu_cache_usage_perc` → `kv_cache_usage_perc` and `gpu_prefix_cache_*` →
`prefix_cache_*`; 0.11 deprecated `time_per_output_token_seconds` for `inter_token_latency_seconds`.
Newest names come first so a server that exposes both (during deprecation) is read once.
Triton's vLLM backend labels series `model`/`version` and has no queue or KV gauges: those stay absent.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from exporter.model import EngineReading
from exporter.promtext import ParsedSamples
from exporter.sources.engines.common import DeclarativeMapping, HistogramSignal, Signal, has_prefix
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
    )
    histograms = (
        HistogramSignal("time_to_first_token", ("vllm:time_to_first_token_seconds",)),
        HistogramSignal(
            "inter_token_latency", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
        ),
        HistogramSignal("e2e_request_latency", ("vllm:e2e_request_latency_seconds",)),
        HistogramSignal("queue_time", ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests")),
    )

    extra_names = (CACHE_CONFIG_INFO,)

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


MAPPINGS.register(VllmMapping(), order=20)
