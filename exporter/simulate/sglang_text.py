"""SGLang's /metrics, written from a simulated replica.

Family names, HELP texts, types, label names and order, bucket boundaries and sample order are
those of SGLang 0.5.23's collectors as its HTTP server renders them (prometheus_client's
multiprocess collector: no `_created`, a histogram's `_sum` before its buckets), modelled on the
capture tests/fixtures/engines/sglang-0.5.23-hybrid-priority.prom. One scheduler (tp 1, no data
parallelism, no priority scheduling, `--enable-mfu-metrics`) and its tokenizer.

The KV gauges follow SGLang's scheduler: for a hybrid sliding-window model `token_usage` and
`num_used_tokens` are the larger of the two pools (scheduler_metrics_mixin `_get_swa_token_info`,
then `max(full, swa)`), `full_token_usage` and `swa_token_usage` each pool's own, rounded to two
places as the scheduler logs them. Families whose value depends on what the simulator does not
model (gen_throughput, cache_hit_rate, utilization, fwd_occupancy, new_token_ratio, is_cuda_graph,
the routing-key distributions, the scheduler stage and idle clocks, prefill_effective_tokens) are
left out rather than printed with made-up values; those SGLang logs as a constant for this
configuration (speculative decoding off, no disaggregation, no DP attention) are printed so.
"""

from __future__ import annotations

from prometheus_client.utils import floatToGoString

from exporter.simulate.engine import EngineReplica
from exporter.simulate.stats import Histogram
from exporter.simulate.vllm_text import Labels, TextWriter

ENGINE_TYPE = "unified"
SCHEDULER_ZEROS = (
    (
        "spec_accept_length",
        "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    ),
    ("spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."),
    ("num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue."),
    ("num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue."),
    ("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."),
    ("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."),
)
#: tokenizer histograms: SGLang's name, the simulator's histogram, its HELP, whether it has is_streaming
TOKENIZER_HISTOGRAMS = (
    (
        "time_to_first_token_seconds",
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        True,
    ),
    (
        "inter_token_latency_seconds",
        "inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        False,
    ),
    (
        "e2e_request_latency_seconds",
        "e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        True,
    ),
    (
        "request_time_per_output_token_seconds",
        "request_time_per_output_token_seconds",
        "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
        True,
    ),
    ("prompt_tokens_histogram", "request_prompt_tokens", "Histogram of prompt token length.", False),
    (
        "uncached_prompt_tokens_histogram",
        "request_prefill_kv_computed_tokens",
        "Histogram of uncached (compute) prompt token length.",
        False,
    ),
    ("generation_tokens_histogram", "request_generation_tokens", "Histogram of generation token length.", False),
)


class _MultiprocessWriter(TextWriter):
    """prometheus_client's multiprocess rendering: counters without `_created`, histograms as
    `_sum`, the buckets, `_count`."""

    def counter_total(self, name: str, help_: str, series: list[tuple[Labels, float]]) -> None:
        self.family(name, help_, "counter")
        for labels, value in series:
            self.sample(name, labels, value)

    def multiprocess_histogram(self, name: str, help_: str, labels: Labels, histogram: Histogram) -> None:
        self.family(name, help_, "histogram")
        self.sample(name + "_sum", labels, histogram.sum)
        for bound, count in zip((*histogram.bounds, float("inf")), histogram.cumulative()):
            self.sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, count)
        self.sample(name + "_count", labels, histogram.count)


def render_sglang(replica: EngineReplica) -> str:
    """The replica's /metrics text as SGLang serves it."""
    stats, kv, swa = replica.stats, replica.kv, replica.swa
    model = replica.model.served_name
    out = _MultiprocessWriter(0.0)
    scheduler = {"engine_type": ENGINE_TYPE, "model_name": model, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}

    def gauge(name: str, help_: str, value: float, labels: Labels = scheduler) -> None:
        out.gauge("sglang:" + name, help_, [(labels, value)])

    gauge("num_running_reqs", "The number of running requests.", len(replica.running))
    gauge("num_queue_reqs", "The number of requests in the waiting queue.", len(replica.waiting))
    gauge("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0.0)
    decoding = sum(r.computed for r in replica.running if r.generated > 0)
    gauge("decode_sum_seq_lens", "The sum of all sequence lengths in decode.", decoding)
    full_used = kv.used_blocks * kv.block_size
    full_total = kv.total_blocks * kv.block_size
    swa_used = swa.used_tokens if swa is not None else 0
    full_usage = round(kv.usage, 2)
    swa_usage = round(swa_used / swa.total_tokens, 2) if swa is not None else 0.0
    gauge("token_usage", "The token usage.", max(full_usage, swa_usage))
    gauge("full_token_usage", "The token usage for full attention layers.", full_usage)
    gauge("swa_token_usage", "The token usage for SWA layers.", swa_usage)
    gauge("mamba_usage", "The token usage for Mamba layers.", 0.0)
    gauge("num_used_tokens", "The number of used tokens.", max(full_used, swa_used))
    pools = (
        ("kv", "KV cache pool", full_used, full_total - full_used, kv.idle_cached_blocks * kv.block_size),
        ("swa", "SWA pool (hybrid-SWA only)", swa_used, swa.free_tokens if swa is not None else 0, 0),
    )
    for pool, where, used, available, evictable in pools:
        short = where.split(" (")[0]
        gauge(f"{pool}_available_tokens", f"Number of free token slots in the {where}.", available)
        gauge(f"{pool}_evictable_tokens", f"Number of evictable (radix-cached) token slots in the {short}.", evictable)
        gauge(f"{pool}_used_tokens", f"Number of actively used token slots in the {short}.", used)
    for name, help_ in SCHEDULER_ZEROS:
        gauge(name, help_, 0.0)
    gauge(
        "num_retracted_reqs",
        "The number of retracted requests.",
        0.0,
        {**scheduler, "pid": str(1000 + replica.index)},
    )
    out.counter_total(
        "sglang:scheduler_process_cpu_seconds_total",
        "Total CPU time consumed by the scheduler process across all threads.",
        [(scheduler, round(stats.cpu_seconds, 2))],
    )
    out.counter_total(
        "sglang:num_retracted_requests_total", "Total number of retracted requests.", [(scheduler, stats.preemptions)]
    )
    for kind, noun in (
        ("flops", "floating point operations"),
        ("read_bytes", "bytes read from memory"),
        ("write_bytes", "bytes written to memory"),
    ):
        total = {"flops": stats.flops, "read_bytes": stats.read_bytes, "write_bytes": stats.written_bytes}[kind]
        out.counter_total(
            f"sglang:estimated_{kind}_per_gpu_total",
            f"Estimated number of {noun} per GPU (for Model FLOPs Utilization calculations).",
            [(scheduler, total)],
        )
    _tokenizer_families(out, replica)
    return "\n".join(out.lines) + "\n"


def _tokenizer_families(out: _MultiprocessWriter, replica: EngineReplica) -> None:
    stats = replica.stats
    plain = {"engine_type": ENGINE_TYPE, "model_name": replica.model.served_name}
    streaming = {**plain, "is_streaming": "true"}
    for name, source, help_, is_streaming in TOKENIZER_HISTOGRAMS:
        out.multiprocess_histogram(
            "sglang:" + name, help_, streaming if is_streaming else plain, stats.histograms[source]
        )
    answered = stats.finished["stop"] + stats.finished["length"]
    for name, help_, value in (
        ("prompt_tokens_total", "Number of prefill tokens processed.", stats.prompt_tokens),
        ("generation_tokens_total", "Number of generation tokens processed.", stats.generation_tokens),
        ("num_requests_total", "Number of requests processed.", answered),
    ):
        out.counter_total("sglang:" + name, help_, [(streaming, value)])
    out.counter_total(
        "sglang:cached_tokens_total",
        "Number of cached prompt tokens by source (device/host/storage).",
        [({**plain, "cache_source": "device"}, stats.prompt_tokens_cached)],
    )
