"""SGLang's /metrics of a prefill or decode worker (python/sglang/srt/observability/metrics_collector.py).

Scheduler families carry `engine_type` (the role), `model_name` and the ranks; tokenizer families
`model_name` (and `is_streaming`); SGLang runs prometheus_client in multiprocess mode, so no
`_created` samples.
"""

from __future__ import annotations

from exporter.simulate.engine import EngineReplica
from exporter.simulate.pd_engine import DecodeReplica, PrefillReplica
from exporter.simulate.pd_stats import SglangStats
from exporter.simulate.pd_text import external_prompt_tokens
from exporter.simulate.prom_text import PromWriter
from exporter.simulate.stats import Histogram


def render_sglang(replica: PrefillReplica | DecodeReplica) -> str:
    """A prefill or decode replica's /metrics as SGLang's PD disaggregation serves it."""
    out = PromWriter(None)
    stats, pd, kv = replica.stats, replica.pd, replica.kv
    model = replica.model.served_name
    scheduler = {"engine_type": replica.role, "model_name": model, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
    if isinstance(replica, DecodeReplica):
        # SGLang's decode waiting queue holds what has arrived; the rest waits in its PD queues.
        waiting, prealloc, transfer, inflight = len(replica.arrived), len(replica.waiting), len(replica.fetching), 0
    else:
        waiting, prealloc, transfer, inflight = len(replica.waiting), 0, 0, len(replica.held)
    out.gauge("sglang:num_running_reqs", "The number of running requests.", [(scheduler, len(replica.running))])
    out.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(scheduler, waiting)])
    out.gauge("sglang:token_usage", "The token usage.", [(scheduler, kv.usage)])
    out.gauge("sglang:num_used_tokens", "The number of used tokens.", [(scheduler, kv.used_blocks * kv.block_size)])
    out.counter(
        "sglang:num_retracted_requests", "Total number of retracted requests.", [(scheduler, stats.preemptions)]
    )
    queues = {
        "num_prefill_bootstrap_queue_reqs": 0,
        "num_prefill_inflight_queue_reqs": inflight,
        "num_decode_prealloc_queue_reqs": prealloc,
        "num_decode_transfer_queue_reqs": transfer,
    }
    for name, count in queues.items():
        queue = name.removeprefix("num_").removesuffix("_queue_reqs").replace("_", " ")
        out.gauge(f"sglang:{name}", f"The number of requests in the {queue} queue.", [(scheduler, count)])
    for name, help_ in (
        ("kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s."),
        ("kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms."),
    ):
        out.histogram(f"sglang:{name}", help_, scheduler, pd.histograms[name])
    for name, help_ in (
        ("num_bootstrap_failed_reqs", "The number of bootstrap failed requests."),
        ("num_transfer_failed_reqs", "The number of transfer failed requests."),
        ("num_prefill_retries", "Total number of prefill retries."),
    ):
        out.counter(f"sglang:{name}", help_, [(scheduler, float(pd.failed if "transfer" in name else 0))])
    for name, help_ in (
        ("kv_transfer_bootstrap_ms", "Histogram of KV transfer bootstrap time in ms."),
        ("kv_transfer_alloc_ms", "Histogram of KV transfer allocation waiting time in ms."),
        ("kv_transfer_total_mb", "Histogram of KV cache transfer size in MB."),
    ):
        out.histogram(f"sglang:{name}", help_, scheduler, pd.histograms[name])
    latency = stats.sglang if isinstance(stats, SglangStats) else {}
    out.histogram(
        "sglang:queue_time_seconds",
        "Histogram of queueing time in seconds.",
        scheduler,
        latency["request_queue_time_seconds"],
    )
    out.family("sglang:per_stage_req_latency_seconds", "The latency of each stage of requests.", "histogram")
    for stage, histogram in pd.stages.items():
        out.histogram_samples("sglang:per_stage_req_latency_seconds", {**scheduler, "stage": stage}, histogram)
    _tokenizer_families(out, replica, latency)
    return "\n".join(out.lines) + "\n"


def _tokenizer_families(out: PromWriter, replica: EngineReplica, latency: dict[str, Histogram]) -> None:
    stats = replica.stats
    model = {"model_name": replica.model.served_name}
    streaming = {**model, "is_streaming": "false"}
    out.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", [(streaming, stats.prompt_tokens)])
    out.counter(
        "sglang:generation_tokens", "Number of generation tokens processed.", [(streaming, stats.generation_tokens)]
    )
    out.counter(
        "sglang:cached_tokens",
        "Number of cached prompt tokens by source (device/host/storage).",
        [({**model, "cache_source": "device"}, stats.prompt_tokens_cached - external_prompt_tokens(replica))],
    )
    out.counter("sglang:num_requests", "Number of requests processed.", [(streaming, stats.http_responses)])
    out.counter("sglang:num_aborted_requests", "Number of requests aborted.", [(model, stats.finished["abort"])])
    out.histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        streaming,
        latency["time_to_first_token_seconds"],
    )
    out.histogram(
        "sglang:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        model,
        latency["inter_token_latency_seconds"],
    )
    out.histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        streaming,
        latency["e2e_request_latency_seconds"],
    )
