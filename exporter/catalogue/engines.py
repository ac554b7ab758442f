"""Inference-engine families (exporter/sources/engine.py and the mappings in exporter/sources/engines/)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from exporter.catalogue.spec import ENGINE_SERIES_LABELS, MetricSpec, counter, families, gauge, summary

# The engine settings `llm_engine_config_info` carries (where the engine exports them: vLLM's
# `cache_config_info`), named for what they are, not for one engine's spelling.
ENGINE_SETTINGS = (
    "prefix_caching",
    "gpu_memory_utilization",
    "block_size",
    "num_gpu_blocks",
    "kv_cache_dtype",
    "kv_cache_size_tokens",
    "max_model_len",
)
# The latency summaries, each keyed by the engine-histogram key (EngineReading.histograms) behind
# it: the engine source, the recording rules and the dashboards all read this one map.
LATENCY_FAMILIES: Mapping[str, str] = MappingProxyType(
    {
        "time_to_first_token": "llm_engine_time_to_first_token_seconds",
        "inter_token_latency": "llm_engine_inter_token_latency_seconds",
        "e2e_request_latency": "llm_engine_e2e_request_latency_seconds",
        "queue_time": "llm_engine_queue_time_seconds",
    }
)

_WINDOW_NOTE = "quantiles over the exporter's window, from the engine's histogram bucket deltas"

ENGINE_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_SERIES_LABELS,
    gauge("llm_engine_up", "1 if the last scrape of the engine succeeded and parsed, else 0."),
    gauge("llm_engine_requests_running", "Requests in the running batch, summed over data-parallel ranks."),
    gauge("llm_engine_requests_waiting", "Requests waiting for admission, summed over data-parallel ranks."),
    gauge(
        "llm_engine_kv_cache_usage_ratio",
        "KV-cache usage 0-1; the maximum over data-parallel ranks, since the fullest rank is the one that preempts.",
    ),
    counter(
        "llm_engine_preemptions_total",
        "Requests preempted (vLLM) or retracted (SGLang) because KV-cache blocks ran out.",
    ),
    counter("llm_engine_prompt_tokens_total", "Prompt tokens processed."),
    counter("llm_engine_generation_tokens_total", "Tokens generated."),
    gauge(
        "llm_engine_prefix_cache_hit_ratio",
        "Prefix-cache hit ratio 0-1 over the exporter's window (hit tokens / queried tokens).",
    ),
    gauge(
        "llm_engine_config_info",
        "Always 1; labels carry the engine's serving settings where it exports them (vLLM's cache_config_info): "
        "prefix_caching true/false, gpu_memory_utilization, block_size, num_gpu_blocks, kv_cache_dtype, "
        "kv_cache_size_tokens, max_model_len (vLLM's pool over its kv_cache_max_concurrency: the context one "
        "request may hold, max_model_len for full-attention models); a setting the engine does not report is "
        "left out.",
        *ENGINE_SETTINGS,
    ),
    summary("llm_engine_time_to_first_token_seconds", f"Time to first token; {_WINDOW_NOTE}."),
    summary(
        "llm_engine_inter_token_latency_seconds",
        f"Inter-token latency (time per output token where the engine only has that); {_WINDOW_NOTE}.",
    ),
    summary("llm_engine_e2e_request_latency_seconds", f"End-to-end request latency; {_WINDOW_NOTE}."),
    summary("llm_engine_queue_time_seconds", f"Time requests waited in the engine queue; {_WINDOW_NOTE}."),
)
