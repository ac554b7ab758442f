"""What a request leaves in the engine's metrics when it gets its first token and when it leaves.

The definitions follow vLLM V1's output processor and `PrometheusStatLogger` (research note
engine-metrics.md §1.3): TTFT from arrival to the first token; queue time from arrival to the first
scheduling; prefill time from the first scheduling to the first token; decode time from the first
to the last token; prompt tokens counted once per request when its first token comes out (a
recompute after preemption does not count them again), generation tokens one by one.
"""

from __future__ import annotations

from exporter.simulate.stats import EngineStats
from exporter.simulate.workload import Request

CPU_SECONDS_PER_REQUEST = 0.002  # API server: parse, tokenize, respond
CPU_SECONDS_PER_OUTPUT_TOKEN = 1e-5  # detokenize and stream
BYTES_PER_TOKEN = 4  # of request and response bodies (text)


def first_token(stats: EngineStats, request: Request, at: float) -> None:
    request.first_token = at
    stats.prompt_tokens += request.prompt_tokens
    stats.prompt_tokens_cached += request.cached_tokens
    stats.prompt_tokens_computed += request.prompt_tokens - request.cached_tokens
    stats.observe("time_to_first_token_seconds", at - request.arrival)


def finished(stats: EngineStats, request: Request, at: float, max_model_len: int) -> str:
    """Record a request that generated its last token; returns its finish reason."""
    truncated = request.target_tokens < request.output_tokens
    reason = "length" if truncated or request.generated == request.max_tokens else "stop"
    observe = stats.observe
    observe("e2e_request_latency_seconds", at - request.arrival)
    observe("request_inference_time_seconds", at - request.first_scheduled)
    observe("request_prefill_time_seconds", request.first_token - request.first_scheduled)
    observe("request_decode_time_seconds", at - request.first_token)
    if request.generated > 1:
        observe("request_time_per_output_token_seconds", (at - request.first_token) / (request.generated - 1))
    observe("request_prompt_tokens", request.prompt_tokens)
    observe("request_generation_tokens", request.generated)
    max_tokens = request.max_tokens or max_model_len - request.prompt_tokens
    observe("request_max_num_generation_tokens", max_tokens)
    observe("request_params_max_tokens", max_tokens)
    observe("request_params_n", 1)
    observe("request_num_preemptions", request.preemptions)
    observe("request_prefill_kv_computed_tokens", request.prompt_tokens - request.cached_tokens)
    stats.cpu_seconds += CPU_SECONDS_PER_OUTPUT_TOKEN * request.generated
    return reason


def closed(stats: EngineStats, request: Request, at: float, reason: str, gc_per_request: float) -> None:
    """Every way a request leaves: finished, aborted by its client, rejected (HTTP 400), refused at
    the admission limit (HTTP 503) or failed."""
    request.finished = at
    request.finish_reason = reason
    stats.cpu_seconds += CPU_SECONDS_PER_REQUEST
    stats.gc_collections += gc_per_request
    stats.http_request_bytes += BYTES_PER_TOKEN * request.prompt_tokens + 200
    if reason == "rejected":
        stats.rejected += 1
        return
    if reason == "refused":
        stats.refused += 1
        return
    stats.finished[reason] += 1
    stats.http_response_bytes += BYTES_PER_TOKEN * request.generated + 300
    stats.observe("http_request_duration_highr_seconds", at - request.arrival)
    stats.observe("http_request_duration_seconds", at - request.arrival)
