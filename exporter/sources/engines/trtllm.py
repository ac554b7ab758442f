"""TensorRT-LLM's trtllm-serve (`/prometheus/metrics`; `/metrics` there is JSON).

Current builds prefix `trtllm_`; the first implementation (PR #5785) exported five unprefixed
families with vLLM's names and an `engine_type` label. KV usage is `trtllm_kv_cache_utilization`
or used/max blocks; the prefix hit ratio comes from reused vs missed block counters. There is no
preemption counter (paused requests are a gauge), and its inter-token signal is per-request TPOT.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.model import EngineReading
from exporter.promtext import ParsedSamples
from exporter.sources.engines.common import (
    DeclarativeMapping,
    HistogramSignal,
    Signal,
    first_present,
    has_prefix,
    read_counter,
    reduce_by_model,
)
from exporter.sources.engines.kv_transfer import TRTLLM_CONNECTOR
from exporter.sources.engines.registry import MAPPINGS

_EARLY_HISTOGRAMS = ("time_to_first_token_seconds", "e2e_request_latency_seconds")


class TrtllmMapping(DeclarativeMapping):
    engine_type = "trtllm"
    kv_connectors = (TRTLLM_CONNECTOR,)
    signals = (
        Signal("requests_running", ("trtllm_num_requests_running",)),
        Signal("requests_waiting", ("trtllm_num_requests_waiting",)),
        Signal("kv_cache_usage_ratio", ("trtllm_kv_cache_utilization",), reduce="max"),
        Signal("prompt_tokens_total", ("trtllm_prompt_tokens_total",)),
        Signal("generation_tokens_total", ("trtllm_generation_tokens_total",)),
        Signal("prefix_cache_hits_total", ("trtllm_kv_cache_reused_blocks_total",)),
        Signal("prefix_cache_hit_ratio", ("trtllm_kv_cache_hit_rate",), reduce="max"),
    )
    histograms = (
        HistogramSignal("time_to_first_token", ("trtllm_time_to_first_token_seconds", "time_to_first_token_seconds")),
        HistogramSignal(
            "inter_token_latency", ("trtllm_time_per_output_token_seconds", "time_per_output_token_seconds")
        ),
        HistogramSignal("e2e_request_latency", ("trtllm_e2e_request_latency_seconds", "e2e_request_latency_seconds")),
        HistogramSignal("queue_time", ("trtllm_request_queue_time_seconds", "request_queue_time_seconds")),
    )
    extra_names = (
        "trtllm_kv_cache_used_blocks",
        "trtllm_kv_cache_max_blocks",
        "trtllm_kv_cache_missed_blocks_total",
    )

    def matches(self, names: set[str]) -> bool:
        if has_prefix(names, "trtllm_"):
            return True
        return any(base + "_bucket" in names or base + "_count" in names for base in _EARLY_HISTOGRAMS)

    def finish(
        self,
        parsed: ParsedSamples,
        reading: Callable[[str], EngineReading],
        readings: dict[str, EngineReading],
    ) -> None:
        used = reduce_by_model(first_present(parsed, ("trtllm_kv_cache_used_blocks",)), "max")
        capacity = reduce_by_model(first_present(parsed, ("trtllm_kv_cache_max_blocks",)), "max")
        for model, blocks in used.items():
            if capacity.get(model, 0) > 0 and reading(model).kv_cache_usage_ratio is None:
                reading(model).kv_cache_usage_ratio = blocks / capacity[model]
        missed = reduce_by_model(read_counter(parsed, "trtllm_kv_cache_missed_blocks_total"), "sum")
        for model, miss in missed.items():
            hits = reading(model).prefix_cache_hits_total
            if hits is not None:
                reading(model).prefix_cache_queries_total = hits + miss


# Last: its first release's families are unprefixed (vLLM's names without `vllm:`), so a payload
# another mapping recognises is that engine's.
MAPPINGS.register(TrtllmMapping(), order=90)
