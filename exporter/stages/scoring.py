"""Scoring helpers the engine stages share: soft ramps between documented lines, the GPU
readings a stage may use (an engine's own, or a node-wide bound), and signals several stages read
(tokens slowing, requests in the engine, a busy engine core, prefill stalls).

Scores are soft ramps between documented thresholds, so a stage's score rises with the strength
of the evidence instead of flipping at one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.settings import Thresholds
from exporter.stages.record import StageResult
from exporter.stages.signals import History


def ramp(value: float | None, low: float, high: float) -> float:
    """0 at or below `low`, 1 at or above `high`, linear between; 0 for a missing value."""
    if value is None:
        return 0.0
    if high <= low:
        return 1.0 if value >= high else 0.0
    return min(1.0, max(0.0, (value - low) / (high - low)))


def gpus_text(h: History) -> str:
    gpus = h.latest().gpus
    if not gpus:
        return "GPUs"
    return "GPU " + gpus[0] if len(gpus) == 1 else f"GPUs {', '.join(gpus)}"


def itl_slowdown(h: History, t: Thresholds) -> tuple[float | None, float | None]:
    """(ITL p95 now, ratio to the engine's best level over the baseline window)."""
    now = h.level("itl_p95", t.level_seconds)
    best = h.best_level("itl_p95", t.baseline_seconds, t.level_seconds)
    if now is None or not best:
        return now, None
    return now, now / best


def slowing(slowdown: float | None, t: Thresholds) -> float:
    """How clearly tokens slowed: 0 up to 30 % of the way to `itl_slowdown_ratio`, 1 at it.

    The decode-bandwidth stage needs it and the queue stage is damped by it, so both read the same line.
    """
    return ramp(slowdown, 1.0 + (t.itl_slowdown_ratio - 1.0) * 0.3, t.itl_slowdown_ratio)


def requests_in_engine(h: History, t: Thresholds) -> float:
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


def no_gpu_line(h: History, t: Thresholds, what: str, withheld: str = "") -> str:
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
        return GpuLevel(own, f"on {gpus_text(h)}")
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


def host_busy(h: History, t: Thresholds) -> float:
    """0-1: the engine's process keeps about a core busy (its own CPU counter, not the node's)."""
    return ramp(
        h.rate("process_cpu_seconds_total", t.level_seconds), t.engine_cpu_cores_busy - 0.3, t.engine_cpu_cores_busy
    )


#: the share of time a runnable task waited for a CPU (PSI "some") over which the node's CPUs are
#: taken to be contended, from not at all to wholly: a healthy node stays under a few percent
CPU_CONTENDED = (0.1, 0.4)


def cpu_contention(h: History, t: Thresholds) -> tuple[float | None, float]:
    """The share of the window in which the node's runnable tasks waited for a CPU, and 0-1 how far
    that explains slow tokens: an engine's steps are launched (or, on a CPU engine, run) by host
    threads, so other processes' load slows them while the engine's own CPU counter stays low."""
    share = h.rate("host_cpu_waiting_seconds_total", t.level_seconds)
    return share, ramp(share, *CPU_CONTENDED)


def prefill_stalls(h: History, t: Thresholds) -> float:
    """0-1: prompt tokens dominate and the first token is slow beyond its queue time (decode waits behind
    prefills)."""
    prompt_rate = h.rate("prompt_tokens_total", t.level_seconds)
    gen_rate = h.rate("generation_tokens_total", t.level_seconds)
    ttft = h.level("ttft_p95", t.level_seconds)
    if prompt_rate is None or gen_rate is None or prompt_rate + gen_rate <= 0 or ttft is None:
        return 0.0
    own_ttft = max(0.0, ttft - (h.level("queue_p95", t.level_seconds) or 0.0))
    share = prompt_rate / (prompt_rate + gen_rate)
    return ramp(share, 0.6, 0.9) * ramp(own_ttft, t.ttft_p95_seconds * 0.5, t.ttft_p95_seconds)
