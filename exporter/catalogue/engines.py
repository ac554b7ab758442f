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

#: every engine histogram the engine source summarizes (the latency ones above, and those an SLO
#: does not judge: the per-request prefill and decode phases)
ENGINE_SUMMARIES: Mapping[str, str] = MappingProxyType(
    {
        **LATENCY_FAMILIES,
        "prefill_time": "llm_engine_request_prefill_time_seconds",
        "decode_time": "llm_engine_request_decode_time_seconds",
    }
)
#: the slice dimensions' own label names on the exported series
SLICE_LABELS = ("slice_by", "slice")

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
    summary(
        "llm_engine_request_prefill_time_seconds",
        f"Time a request spent in prefill (vLLM's request_prefill_time_seconds); {_WINDOW_NOTE}.",
    ),
    summary(
        "llm_engine_request_decode_time_seconds",
        f"Time a request spent decoding after its first token (vLLM's request_decode_time_seconds); {_WINDOW_NOTE}.",
    ),
    counter(
        "llm_engine_admission_rejections_total",
        "Requests the engine refused at the door, by reason (vLLM --max-num-queued-reqs / --max-num-queued-tokens: "
        "HTTP 503). They reach no latency histogram: the SLOs count them as misses.",
        "reason",
    ),
    counter(
        "llm_engine_prompt_tokens_cached_total",
        "Prompt tokens not computed because a cache held them, by source: local (the engine's own prefix cache, "
        "SGLang's device and host tiers) or external (a KV connector, SGLang's shared storage tier).",
        "source",
    ),
    gauge(
        "llm_engine_prompt_reuse_ratio",
        "Share of prompt tokens over the exporter's window served from a cache rather than computed, local and "
        "external together, from the engine's token counters (never from a last-batch gauge).",
    ),
    gauge(
        "llm_engine_external_prefix_cache_hit_ratio",
        "Hit ratio 0-1 of the engine's KV connector lookups over the window (vLLM external_prefix_cache_*, tokens).",
    ),
    gauge(
        "llm_engine_asleep",
        "1 while the engine reports itself asleep (vLLM sleep mode), else 0; sleep_state says how: "
        "weights_offloaded (level 1), discard_all (level 2), kv_cache_released. An engine asleep is neither down "
        "nor idle capacity.",
        "sleep_state",
    ),
    counter(
        "llm_engine_estimated_flops_total",
        "Floating-point operations per GPU as the engine estimates them from its model and batch "
        "(vLLM --enable-mfu-metrics, SGLang --enable-mfu-metrics); mean over data-parallel ranks.",
    ),
    counter(
        "llm_engine_estimated_memory_bytes_total",
        "Device-memory bytes read or written per GPU as the engine estimates them (the MFU counters), by direction.",
        "direction",
    ),
    counter("llm_engine_spec_decode_drafts_total", "Speculative-decoding drafts proposed."),
    counter("llm_engine_spec_decode_draft_tokens_total", "Draft tokens proposed."),
    counter("llm_engine_spec_decode_accepted_tokens_total", "Draft tokens the target model accepted."),
    gauge(
        "llm_engine_spec_decode_acceptance_ratio",
        "Accepted over proposed draft tokens over the window (vLLM's counters); SGLang's own last-batch rate.",
    ),
    counter(
        "llm_engine_corrupted_requests_total",
        "Requests whose logits held NaNs (vLLM with VLLM_COMPUTE_NANS_IN_LOGITS).",
    ),
    gauge(
        "llm_engine_requests_waiting_deferred",
        "Of the requests waiting, those held back by something other than a free slot (vLLM reason=deferred: "
        "the LoRA budget, a KV transfer, a blocked request).",
    ),
    gauge(
        "llm_engine_kv_cache_pool_usage_ratio",
        "Usage 0-1 of each KV pool of a hybrid model (SGLang full, swa, mamba); llm_engine_kv_cache_usage_ratio is "
        "the fullest. Present only where the engine has more than one pool.",
        "pool",
    ),
    gauge(
        "llm_engine_lora_adapter_slots",
        "LoRA adapter slots: used (adapters with requests running) and total (vLLM max_lora, SGLang "
        "max_loras_per_batch).",
        "state",
    ),
    gauge(
        "llm_engine_tokens_per_step",
        "Mean tokens an engine step processed over the window (vLLM iteration_tokens_total): the batch's size "
        "in tokens.",
    ),
    gauge(
        "llm_engine_rank_up",
        "Per rank of an engine with several (vLLM data-parallel engine, SGLang scheduler rank, a URL of a "
        "multi-node engine): 1 while its series are reported, 0 once it stops (docs/metrics.md).",
        "rank",
    ),
    gauge(
        "llm_engine_slice_requests_running",
        "Requests running per slice (docs/metrics.md, Slices): the breakdown the engine reports, e.g. SGLang's per "
        "priority class.",
        *SLICE_LABELS,
    ),
    gauge("llm_engine_slice_requests_waiting", "Requests waiting per slice.", *SLICE_LABELS),
    gauge(
        "llm_engine_slices_folded",
        'Values of a slice dimension folded into slice="other" because the dimension has more than '
        "max_slices_per_dimension.",
        "slice_by",
    ),
)
