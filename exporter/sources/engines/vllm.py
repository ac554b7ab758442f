"""vLLM: V1 (`engine` label = data-parallel rank), V0 names, and Triton's vLLM-backend subset.

V1 ≥ 0.9.2 renamed `gpu_cache_usage_perc` → `kv_cache_usage_perc` and `gpu_prefix_cache_*` →
`prefix_cache_*`; 0.11 deprecated `time_per_output_token_seconds` for `inter_token_latency_seconds`.
Newest names come first so a server that exposes both (during deprecation) is read once.
Triton's vLLM backend labels series `model`/`version` and has no queue or KV gauges: those stay absent.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.model import EngineReading
from exporter.promtext import ParsedSamples
from exporter.sources.engines.common import DeclarativeMapping, HistogramSignal, Signal, has_prefix

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
    return settings


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
