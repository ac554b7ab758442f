"""One scoring function per stage of the framework (DESIGN.md), each from several signals.

Each returns a score 0–1 and evidence lines that quote the numbers it used, or says which inputs
were missing. Scores are soft ramps between documented thresholds, so a stage's score rises with
the strength of the evidence instead of flipping at one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from exporter.diagnosis.signals import History
from exporter.diagnosis.vendors import bandwidth_signal, missing_bandwidth_reason
from exporter.settings import Thresholds


@dataclass
class StageResult:
    score: float = 0.0
    evidence: list[str] = field(default_factory=list)


def ramp(value: float | None, low: float, high: float) -> float:
    """0 at or below `low`, 1 at or above `high`, linear between; 0 for a missing value."""
    if value is None:
        return 0.0
    if high <= low:
        return 1.0 if value >= high else 0.0
    return min(1.0, max(0.0, (value - low) / (high - low)))


def _gpus(h: History) -> str:
    gpus = h.latest().gpus
    if not gpus:
        return "GPUs"
    return "GPU " + gpus[0] if len(gpus) == 1 else f"GPUs {', '.join(gpus)}"


def _itl_slowdown(h: History, t: Thresholds) -> tuple[float | None, float | None]:
    """(ITL p95 now, ratio to the engine's best over the baseline window)."""
    now = h.mean("itl_p95", t.level_seconds)
    best = h.minimum("itl_p95", t.baseline_seconds)
    if now is None or not best:
        return now, None
    return now, now / best


def _slowing(slowdown: float | None, t: Thresholds) -> float:
    """How clearly tokens slowed: 0 up to 30 % of the way to `itl_slowdown_ratio`, 1 at it.

    Decode-bandwidth needs it and queueing is damped by it, so both read the same line.
    """
    return ramp(slowdown, 1.0 + (t.itl_slowdown_ratio - 1.0) * 0.3, t.itl_slowdown_ratio)


def _requests_in_engine(h: History, t: Thresholds) -> float:
    """Mean requests in the engine over the level window: the running gauge's mean, or the rate of
    finished request-seconds (Little's law: the e2e latency sum's rate), whichever is higher.

    Why not the gauge alone: it is sampled when the engine answers /metrics, and a CPU-starved
    frontend (vLLM's API server on a busy host) answers between bursts of streaming, when nothing
    runs. A 2-core CPU vLLM read running 0 in 11 reads of 11 while four clients kept it busy,
    so the host-bound engine would have scored as idle. The e2e sum is a counter and misses no
    request; it counts each only once finished (and queued time too), so the gauge still covers
    a load that just started.
    """
    running = h.mean("running", t.level_seconds) or 0.0
    return max(running, h.rate("e2e_seconds_total", t.level_seconds) or 0.0)


def _no_gpu_line(h: History, t: Thresholds, what: str, withheld: str = "") -> str:
    """`what`, and why: unattributed GPUs on a node of several engines are named as such, and
    `withheld` says where their readings disagreed."""
    unattributed = h.unattributed_gpus(t.level_seconds)
    if not unattributed:
        return what
    why = withheld or "no engine label, several engines"
    return f"{what} (GPU signals unattributed: node-wide, {len(unattributed)} GPUs; {why}; set gpu_attribution)"


@dataclass(frozen=True)
class GpuLevel:
    """A GPU ratio as a stage may score it: the engine's own GPUs' mean, or a node-wide bound."""

    #: None: no reading, or node-wide readings that disagree about the band (withheld)
    value: float | None
    #: where the value comes from, for the evidence: "on GPU 0", "on every GPU of the node (...)"
    where: str = ""
    #: why a node-wide reading was withheld, for the evidence; "" otherwise
    withheld: str = ""
    #: the value is a bound over the node's unattributed GPUs, not the engine's own mean
    node_wide: bool = False
    #: withheld: (lowest, highest) over the node's unattributed GPUs, which still bound the score
    bounds: tuple[float, float] | None = None


def gpu_level(h: History, attr: str, t: Thresholds, low: float, high: float) -> GpuLevel:
    """The engine's GPU ratio `attr` for a stage that ramps it from `low` to `high`.

    The engine's own (attributed) GPUs give their mean. Without them, the node's unattributed GPUs
    are evidence only where they are unanimous: if even the lowest reads >= `high`, every GPU (so
    every engine's) is at the top of the ramp, and the lowest is used; if even the highest reads
    <= `low`, every one is at the bottom, and the highest is used. Between, one engine's GPUs would
    decide another's stage: the reading is withheld and the stage scores without it, within what
    the two ends allow (`bounds`, `clamp`).
    """
    own = h.mean(attr, t.level_seconds)
    if own is not None:
        return GpuLevel(own, f"on {_gpus(h)}")
    bounds = h.node_range(attr, t.level_seconds)
    if bounds is None:
        return GpuLevel(None)
    lowest, highest = bounds
    count = len(h.unattributed_gpus(t.level_seconds))
    if lowest >= high:
        where = f"at least, on every one of the node's {count} unattributed GPUs (all >= {high:g})"
        return GpuLevel(lowest, where, node_wide=True)
    if highest <= low:
        where = f"at most, on every one of the node's {count} unattributed GPUs (all <= {low:g})"
        return GpuLevel(highest, where, node_wide=True)
    withheld = f"they read {lowest:.2f}-{highest:.2f}, across the {low:g}-{high:g} band: withheld"
    return GpuLevel(None, withheld=withheld, bounds=bounds)


def clamp(score: float, lowest: float, highest: float, result: StageResult) -> float:
    """A score reached without a withheld GPU reading, kept within what the reading would give at
    the node's two ends (the engine's own lies between), with an evidence line when it bites."""
    bounded = min(highest, max(lowest, score))
    if bounded != score:
        result.evidence.append(
            f"bounded to {lowest:.2f}-{highest:.2f} by the node's lowest and highest GPU readings (was {score:.2f})"
        )
    return bounded


def _host_busy(h: History, t: Thresholds) -> float:
    """0-1: the engine's process keeps about a core busy (its own CPU counter, not the node's)."""
    return ramp(
        h.rate("process_cpu_seconds_total", t.level_seconds), t.engine_cpu_cores_busy - 0.3, t.engine_cpu_cores_busy
    )


def _prefill_stalls(h: History, t: Thresholds) -> float:
    """0-1: prompt tokens dominate and the first token is slow beyond queueing (decode waits behind prefills)."""
    prompt_rate = h.rate("prompt_tokens_total", t.level_seconds)
    gen_rate = h.rate("generation_tokens_total", t.level_seconds)
    ttft = h.mean("ttft_p95", t.level_seconds)
    if prompt_rate is None or gen_rate is None or prompt_rate + gen_rate <= 0 or ttft is None:
        return 0.0
    own_ttft = max(0.0, ttft - (h.mean("queue_p95", t.level_seconds) or 0.0))
    share = prompt_rate / (prompt_rate + gen_rate)
    return ramp(share, 0.6, 0.9) * ramp(own_ttft, t.ttft_p95_seconds * 0.5, t.ttft_p95_seconds)


def kv_cache_capacity(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    kv = h.maximum("kv_usage", t.level_seconds)
    waiting = h.mean("waiting", t.level_seconds) or 0.0
    preempt = h.rate("preemptions_total", t.level_seconds)
    if kv is None:
        result.evidence.append("no KV-cache usage from this engine: KV capacity not assessed")
        return result
    pressure = ramp(kv, t.kv_usage_warning, t.kv_usage_critical)
    starving = ramp(waiting, 0.0, 1.0)
    preempting = ramp(preempt, 0.0, t.preemptions_per_second)
    score = max(pressure * (0.5 + 0.5 * starving), preempting * ramp(kv, t.kv_usage_warning - 0.2, t.kv_usage_warning))
    # With HBM saturated and tokens slowing, long contexts fill the cache *because* decode is slow
    # (the seed case): KV stays active but decode-bandwidth ranks first.
    _, slowdown = _itl_slowdown(h, t)
    dram = gpu_level(h, "dram_active", t, t.dram_active_busy, t.dram_active_saturated).value
    bandwidth_bound = ramp(dram, t.dram_active_busy, t.dram_active_saturated)
    result.score = score * (1.0 - 0.25 * bandwidth_bound * ramp(slowdown, 1.0, t.itl_slowdown_ratio))
    result.evidence.append(
        f"KV-cache usage up to {kv:.2f} (warning {t.kv_usage_warning:g}) with {waiting:.1f} requests waiting"
    )
    if preempt is not None:
        result.evidence.append(f"preemptions {preempt:.2f}/s over {t.level_seconds:g}s")
    return result


def queueing(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    waiting = h.mean("waiting", t.level_seconds)
    if waiting is None:
        result.evidence.append("no waiting-queue gauge from this engine: queueing not assessed")
        return result
    growth = h.trend("waiting", t.level_seconds * 2)
    queue_p95 = h.mean("queue_p95", t.level_seconds)
    kv = h.maximum("kv_usage", t.level_seconds)
    score = ramp(waiting, 0.5, t.waiting_requests)
    if growth is not None and growth > 0:
        score = max(score, ramp(waiting, 0.0, 1.0) * ramp(growth, 0.0, t.waiting_requests))
    # Waiting caused by a full KV cache is the KV stage's; plain queueing has KV headroom and
    # tokens flowing at their usual pace.
    score *= 1.0 - 0.6 * ramp(kv, t.kv_usage_warning, t.kv_usage_critical)
    _, slowdown = _itl_slowdown(h, t)
    score *= 1.0 - 0.5 * _slowing(slowdown, t)
    result.score = score
    line = f"{waiting:.1f} requests waiting on average (threshold {t.waiting_requests:g})"
    if growth is not None:
        # A trend is signed; rounding a tiny fall would print "-0.0", which reads as a defect.
        line += f", trend {round(growth, 1) + 0.0:+.1f} over {2 * t.level_seconds:g}s"
    result.evidence.append(line)
    if queue_p95 is not None:
        result.evidence.append(f"queue time p95 {queue_p95:.2f}s")
    return result


def decode_memory_bandwidth(h: History, t: Thresholds) -> StageResult:
    """HBM-bound decode: DRAM near its practical peak *and* tokens slowing down.

    A decoding GPU streams HBM whenever it steps, so busy DRAM alone is a healthy engine at work;
    the bottleneck shows when inter-token latency rises over its own recent best (the batch and
    its context grew) while the tensor pipes stay light.
    """
    result = StageResult()
    in_engine = _requests_in_engine(h, t)
    vendors = h.latest().gpu_vendors
    signal = bandwidth_signal(vendors)
    busy, saturated = signal.band(t)
    dram_level = gpu_level(h, "dram_active", t, busy, saturated)
    dram = dram_level.value
    sm = h.mean("sm_active", t.level_seconds)
    sm_range = h.node_range("sm_active", t.level_seconds) if sm is None else None
    tensor_level = gpu_level(h, "tensor_active", t, t.tensor_active_high, t.tensor_active_high + 0.3)
    tensor = tensor_level.value
    itl, slowdown = _itl_slowdown(h, t)
    decoding = ramp(in_engine, 0.0, 1.0)
    slowing = _slowing(slowdown, t)
    if dram is not None:
        compute_light = 1.0 - ramp(tensor, t.tensor_active_high, t.tensor_active_high + 0.3)
        result.score = decoding * ramp(dram, busy, saturated) * compute_light * slowing
        line = f"{signal.name} {dram:.2f} {dram_level.where}"
        if sm is not None:
            line += f" while SM active {sm:.2f}"
        elif sm_range is not None:
            line += f" while SM active {sm_range[0]:.2f}-{sm_range[1]:.2f} across the node"
        if tensor is not None:
            line += f", tensor active {tensor:.2f}" + (f" {tensor_level.where}" if tensor_level.node_wide else "")
        elif tensor_level.withheld:
            line += f", tensor active not known ({tensor_level.withheld})"
        result.evidence.append(line + f" (practical peak ~{saturated:g})")
    else:
        # A vendor without any bandwidth signal says so; otherwise the signal is merely missing here.
        lacking = missing_bandwidth_reason(vendors) or _no_gpu_line(
            h, t, "no GPU DRAM activity for this engine", dram_level.withheld
        )
        result.evidence.append(lacking + ": scored from inter-token latency alone")
        # Slow tokens alone fit a host-bound engine and prefill stalls as well as HBM: what the
        # engine's own process CPU and prompt share explain is taken off.
        explained = max(_host_busy(h, t), 0.5 * _prefill_stalls(h, t))
        result.score = (
            decoding * max(slowing, ramp(itl, t.itl_p95_seconds * 0.5, t.itl_p95_seconds)) * 0.8 * (1.0 - explained)
        )
        if dram_level.bounds is not None:
            # Tensor at its node-wide highest (or as known) is the lightest compute any engine can have.
            heaviest = tensor if tensor is not None else (tensor_level.bounds or (None, None))[1]
            light = 1.0 - ramp(heaviest, t.tensor_active_high, t.tensor_active_high + 0.3)
            lowest, highest = (decoding * ramp(v, busy, saturated) * slowing for v in dram_level.bounds)
            result.score = clamp(result.score, lowest * light, highest, result)
    if itl is not None:
        line = f"ITL p95 {itl * 1000:.1f} ms"
        if slowdown is not None and slowdown > 1.05:
            line += f", {slowdown:.1f}x its best over {t.baseline_seconds / 60:g} min"
        result.evidence.append(line)
    waiting_trend = h.trend("waiting", t.level_seconds * 2)
    if waiting_trend is not None and waiting_trend > 0:
        result.evidence.append(f"waiting requests rising ({waiting_trend:+.0f} over {2 * t.level_seconds:g}s)")
    return result


def prefill_compute(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    tensor_level = gpu_level(h, "tensor_active", t, t.tensor_active_high - 0.2, t.tensor_active_high)
    tensor = tensor_level.value
    ttft = h.mean("ttft_p95", t.level_seconds)
    queue = h.mean("queue_p95", t.level_seconds) or 0.0
    prompt_rate = h.rate("prompt_tokens_total", t.level_seconds)
    gen_rate = h.rate("generation_tokens_total", t.level_seconds)
    share = None
    if prompt_rate is not None and gen_rate is not None and prompt_rate + gen_rate > 0:
        share = prompt_rate / (prompt_rate + gen_rate)
    prefill_heavy = ramp(share, 0.6, 0.9)
    own_ttft = None if ttft is None else max(0.0, ttft - queue)
    # Prefill recomputed after preemptions is the KV stage's doing, not long prompts.
    kv_churn = ramp(h.rate("preemptions_total", t.level_seconds), 0.0, t.preemptions_per_second)
    if tensor is not None:
        result.score = (
            ramp(tensor, t.tensor_active_high - 0.2, t.tensor_active_high) * prefill_heavy * (1.0 - 0.5 * kv_churn)
        )
        result.evidence.append(f"tensor active {tensor:.2f} {tensor_level.where}")
    else:
        result.evidence.append(
            _no_gpu_line(h, t, "no GPU tensor activity for this engine", tensor_level.withheld)
            + ": scored from TTFT beyond queueing"
        )
        result.score = ramp(own_ttft, t.ttft_p95_seconds * 0.5, t.ttft_p95_seconds) * prefill_heavy
        if tensor_level.bounds is not None:
            band = (t.tensor_active_high - 0.2, t.tensor_active_high)
            lowest, highest = (ramp(v, *band) * prefill_heavy * (1.0 - 0.5 * kv_churn) for v in tensor_level.bounds)
            result.score = clamp(result.score, lowest, highest, result)
    if share is not None:
        result.evidence.append(f"prompt tokens are {share:.0%} of tokens processed ({prompt_rate:.0f}/s)")
    if own_ttft is not None:
        result.evidence.append(f"TTFT p95 {ttft:.2f}s of which queue p95 {queue:.2f}s")
    return result


def cross_node_communication(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    util = h.mean("rdma_utilization", t.level_seconds)
    cnp = h.rate("rdma_cnp_total", t.level_seconds)
    retrans = h.rate("rdma_retransmissions_total", t.level_seconds)
    if util is None and cnp is None and retrans is None:
        result.evidence.append("no RDMA ports on this node: cross-node communication not assessed")
        return result
    congestion = max(ramp(cnp, 0.0, t.cnp_per_second), ramp(retrans, 0.0, t.retransmissions_per_second))
    saturation = ramp(util, t.rdma_utilization_high - 0.2, t.rdma_utilization_high + 0.1)
    _, slowdown = _itl_slowdown(h, t)
    # Congestion alone on a node whose engine is not slowed is the network's problem, not this
    # engine's bottleneck: weight by the step slowdown where it is known.
    symptom = 1.0 if slowdown is None else max(0.5, ramp(slowdown, 1.0, t.itl_slowdown_ratio))
    result.score = max(saturation, congestion) * symptom * ramp(_requests_in_engine(h, t), 0.0, 1.0)
    parts = []
    if util is not None:
        parts.append(f"RDMA link utilization {util:.2f}")
    if cnp is not None:
        parts.append(f"CNP {cnp:.0f}/s")
    if retrans is not None:
        parts.append(f"retransmissions {retrans:.1f}/s")
    result.evidence.append(", ".join(parts))
    return result


def host_overhead(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    in_engine = _requests_in_engine(h, t)
    cpu = h.rate("process_cpu_seconds_total", t.level_seconds)
    band = (t.sm_active_ineffective - 0.2, t.sm_active_ineffective)
    gpu = gpu_level(h, "sm_active", t, *band)
    if gpu.value is None:
        utilization = gpu_level(h, "gpu_utilization", t, *band)
        gpu = utilization if utilization.value is not None or not gpu.withheld else gpu
    busy_gpu = gpu.value
    if cpu is None and busy_gpu is None:
        result.evidence.append("no engine process CPU or GPU activity: host overhead not assessed")
        return result
    # Without GPU data a busy engine core is only half the evidence: it cannot reach `enter_score`
    # alone (a CPU engine, or a fast GPU engine, legitimately keeps its scheduler core busy).
    # Without GPU data, tokens slowing while the core is busy stand in for the starved GPU.
    _, slowdown = _itl_slowdown(h, t)
    starved = (
        1.0 - ramp(busy_gpu, t.sm_active_ineffective - 0.2, t.sm_active_ineffective)
        if busy_gpu is not None
        else 0.5 + 0.5 * _slowing(slowdown, t)
    )
    cpu_bound = ramp(cpu, t.engine_cpu_cores_busy - 0.3, t.engine_cpu_cores_busy) if cpu is not None else 0.5
    dram = gpu_level(h, "dram_active", t, t.dram_active_busy - 0.2, t.dram_active_busy).value
    not_memory_bound = 1.0 - ramp(dram, t.dram_active_busy - 0.2, t.dram_active_busy)
    result.score = ramp(in_engine, 0.0, 1.0) * starved * cpu_bound * not_memory_bound
    parts = []
    if busy_gpu is not None:
        where = f" {gpu.where}," if gpu.node_wide else ""
        parts.append(f"GPU busy {busy_gpu:.2f}{where} while {in_engine:.1f} requests are in the engine")
    if cpu is not None:
        parts.append(f"engine process at {cpu:.2f} CPU cores")
    if busy_gpu is None:
        parts.append(_no_gpu_line(h, t, "no GPU activity for this engine", gpu.withheld))
    result.evidence.append("; ".join(parts))
    return result


STAGES: dict[str, Callable[[History, Thresholds], StageResult]] = {
    "queueing": queueing,
    "prefill_compute": prefill_compute,
    "decode_memory_bandwidth": decode_memory_bandwidth,
    "kv_cache_capacity": kv_cache_capacity,
    "cross_node_communication": cross_node_communication,
    "host_overhead": host_overhead,
}
