"""What a prefill or decode replica reports about its hand-overs, in each engine's bucket layouts.

vLLM's NIXL connector (vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py, 0.32.0,
`NixlPromMetrics`): the reading side (decode) observes every transfer's duration, post time, bytes
and descriptors; the prefill side counts requests whose held KV expired before anyone read it.
SGLang's PD disaggregation (python/sglang/srt/observability/metrics_collector.py,
`SchedulerMetricsCollector`): the sending side (prefill) observes each request's transfer latency
(ms), speed (GB/s) and size (MB); both sides observe their bootstrap and allocation waits, and
`per_stage_req_latency_seconds{stage}` times each step of a request on either side.

SGLang's speed overstates (its PR #31993): the bytes are every chunk's, the latency only the last
chunk's, and until that fix its latency falls back to the same last-chunk time. The simulator
reproduces it (`SGLANG_LAST_CHUNK_SHARE`), so the exporter's guard is exercised against the
number a real SGLang shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.simulate.stats import EngineStats, Histogram

NIXL_XFER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_POST_BUCKETS = (0.001, *NIXL_XFER_BUCKETS)
NIXL_BYTES_BUCKETS = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))
NIXL_DESCRIPTOR_BUCKETS = (10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000)
SGLANG_LATENCY_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
SGLANG_SPEED_BUCKETS = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
SGLANG_MB_BUCKETS = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)
SGLANG_PHASE_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
#: sglang/srt/observability/utils.py exponential_buckets(start=0.001, width=1.62, length=30)
SGLANG_STAGE_BUCKETS = tuple(0.001 * 1.62**i for i in range(30))
SGLANG_PREFILL_STAGES = ("prefill_waiting", "prefill_bootstrap", "prefill_forward", "prefill_transfer_kv_cache")
SGLANG_DECODE_STAGES = ("decode_prepare", "decode_bootstrap", "decode_transferred", "decode_waiting")
#: the last of this many chunks' latency is what SGLang divides every chunk's bytes by
SGLANG_LAST_CHUNK_SHARE = 0.3
#: NIXL posts one descriptor per block and layer; posting costs a fixed part and a part per descriptor
POST_SECONDS = 40e-6
POST_SECONDS_PER_DESCRIPTOR = 0.05e-6
BOOTSTRAP_SECONDS = 0.002


def _histograms(layouts: dict[str, tuple[float, ...]]) -> dict[str, Histogram]:
    return {name: Histogram(tuple(float(b) for b in bounds)) for name, bounds in layouts.items()}


@dataclass
class PdStats:
    """One replica's hand-over counters and histograms since it started, both formats' layouts."""

    role: str
    transfers: int = 0
    bytes: float = 0.0
    expired: int = 0
    failed: int = 0
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.histograms = _histograms(
            {
                "nixl_xfer_time_seconds": NIXL_XFER_BUCKETS,
                "nixl_post_time_seconds": NIXL_POST_BUCKETS,
                "nixl_bytes_transferred": NIXL_BYTES_BUCKETS,
                "nixl_num_descriptors": NIXL_DESCRIPTOR_BUCKETS,
                "kv_transfer_latency_ms": SGLANG_LATENCY_MS_BUCKETS,
                "kv_transfer_speed_gb_s": SGLANG_SPEED_BUCKETS,
                "kv_transfer_total_mb": SGLANG_MB_BUCKETS,
                "kv_transfer_bootstrap_ms": SGLANG_PHASE_MS_BUCKETS,
                "kv_transfer_alloc_ms": SGLANG_PHASE_MS_BUCKETS,
            }
        )
        stages = SGLANG_PREFILL_STAGES if self.role == "prefill" else SGLANG_DECODE_STAGES
        self.stages = {stage: Histogram(SGLANG_STAGE_BUCKETS) for stage in stages}

    def observe(self, name: str, value: float) -> None:
        self.histograms[name].observe(value)

    def read(self, seconds: float, nbytes: float, descriptors: int) -> None:
        """The decode side read one request's KV (NIXL observes it where the read is driven)."""
        self.transfers += 1
        self.bytes += nbytes
        self.observe("nixl_xfer_time_seconds", seconds)
        self.observe("nixl_post_time_seconds", POST_SECONDS + POST_SECONDS_PER_DESCRIPTOR * descriptors)
        self.observe("nixl_bytes_transferred", nbytes)
        self.observe("nixl_num_descriptors", descriptors)

    def sent(self, wire_seconds: float, nbytes: float) -> None:
        """The prefill side finished sending one request's KV (SGLang observes it at the sender)."""
        self.transfers += 1
        self.bytes += nbytes
        last_chunk = max(1e-6, wire_seconds * SGLANG_LAST_CHUNK_SHARE)
        self.observe("kv_transfer_latency_ms", last_chunk * 1000.0)
        self.observe("kv_transfer_speed_gb_s", nbytes / last_chunk / 1e9)
        self.observe("kv_transfer_total_mb", nbytes / 1e6)
        self.observe("kv_transfer_bootstrap_ms", BOOTSTRAP_SECONDS * 1000.0)

    def stage(self, name: str, seconds: float) -> None:
        self.stages[name].observe(max(0.0, seconds))


#: SGLang's tokenizer- and scheduler-side latency layouts (TokenizerMetricsCollector defaults and
#: `sglang:queue_time_seconds`), keyed by the vLLM-named observation the replica makes
SGLANG_LATENCY_LAYOUTS: dict[str, tuple[float, ...]] = {
    "time_to_first_token_seconds": (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400),
    "inter_token_latency_seconds": (
        *(0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080),
        *(0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000),
    ),
    "e2e_request_latency_seconds": (
        *(0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400),
        *(600, 1200, 1800, 2400),
    ),
    "request_queue_time_seconds": (
        *(0.0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60),
        *(70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000),
    ),
}


class SglangStats(EngineStats):
    """A replica's counters whose latencies also land in SGLang's own bucket layouts."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sglang = _histograms(SGLANG_LATENCY_LAYOUTS)

    def observe(self, name: str, value: float, times: int = 1) -> None:
        super().observe(name, value, times)
        mirror = self.sglang.get(name)
        if mirror is not None:
            mirror.observe(value, times)
