"""vLLM: V1 (`engine` label = data-parallel rank), V0 names, and Triton's vLLM-backend subset.

V1 ≥ 0.9.2 renamed `gpu_cache_usage_perc` → `kv_cache_usage_perc` and `gpu_prefix_cache_*` →
`prefix_cache_*`; 0.11 deprecated `time_per_output_token_seconds` for `inter_token_latency_seconds`.
Newest names come first so a server that exposes both (during deprecation) is read once.
Triton's vLLM backend labels series `model`/`version` and has no queue or KV gauges: those stay absent.
"""

from __future__ import annotations

from exporter.sources.engines.common import DeclarativeMapping, HistogramSignal, Signal, has_prefix


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

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "vllm:")
