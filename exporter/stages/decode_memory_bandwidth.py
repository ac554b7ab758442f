"""Decode memory bandwidth: HBM near its practical peak *and* tokens slowing down.

A decoding GPU streams HBM whenever it steps, so busy DRAM alone is a healthy engine at work; the
bottleneck shows when inter-token latency rises over its own recent best (the batch and its
context grew) while the tensor pipes stay light. The band of the signal is the vendor's
(exporter/stages/vendors.py).
"""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages.advice import CAP_CONTEXT, IF_NOT_ALREADY, enable_prefix_caching
from exporter.stages.engine_estimates import BANDWIDTH_BAND, decode_work_lines, engine_estimate
from exporter.stages.evidence import ITL, drawn, engine_gauge, itl_with_lines, per_engine
from exporter.stages.panels import PanelDef, Query, Unit, ratio
from exporter.stages.readings import average_hides_p99
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, PanelScope, Readings, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import (
    GpuLevel,
    clamp,
    cpu_contention,
    gpu_level,
    host_busy,
    itl_slowdown,
    no_gpu_line,
    prefill_stalls,
    ramp,
    requests_in_engine,
    slowing,
)
from exporter.stages.signals import History
from exporter.stages.vendors import BandwidthSignal, bandwidth_signal, missing_bandwidth_reason


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    in_engine = requests_in_engine(h, t)
    vendors = h.latest().gpu_vendors
    signal = bandwidth_signal(vendors)
    busy, saturated = signal.band(t)
    dram_level = gpu_level(h, "dram_active", t, busy, saturated)
    dram = dram_level.value
    estimate = engine_estimate(h, t, "bandwidth")
    if dram is None and dram_level.bounds is None and estimate is not None and estimate.share is not None:
        # No memory-activity counter for this engine's GPUs: the engine's own bytes stand in for it,
        # on the band of a share of peak bandwidth.
        dram, (busy, saturated) = estimate.share, BANDWIDTH_BAND
        signal = BandwidthSignal(f"{estimate.line}, in place of DRAM activity (none from this engine's GPU source);")
        dram_level = GpuLevel(dram, "share of peak")
    elif estimate is not None:
        result.evidence.append(estimate.line)
    sm = h.mean("sm_active", t.level_seconds)
    sm_range = h.node_range("sm_active", t.level_seconds) if sm is None else None
    tensor_level = gpu_level(h, "tensor_active", t, t.tensor_active_high, t.tensor_active_high + 0.3)
    tensor = tensor_level.value
    itl, slowdown = itl_slowdown(h, t)
    decoding = ramp(in_engine, 0.0, 1.0)
    slowed = slowing(slowdown, t)
    if dram is not None:
        compute_light = 1.0 - ramp(tensor, t.tensor_active_high, t.tensor_active_high + 0.3)
        result.score = decoding * ramp(dram, busy, saturated) * compute_light * slowed
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
        lacking = missing_bandwidth_reason(vendors) or no_gpu_line(
            h, t, "no GPU DRAM activity for this engine", dram_level.withheld
        )
        result.evidence.append(lacking + ": scored from inter-token latency alone")
        # Slow tokens alone fit a host-bound engine, a contended host and prefill stalls as well as
        # HBM: what the engine's own process CPU, the node's CPU wait and the prompt share explain is
        # taken off.
        waited, contended = cpu_contention(h, t)
        explained = max(host_busy(h, t), contended, 0.5 * prefill_stalls(h, t))
        if contended > 0 and waited is not None:
            result.evidence.append(
                f"the node's CPUs contended: a runnable task waited for one {waited:.0%} of the last "
                f"{t.level_seconds:g}s (PSI), which slows tokens as HBM would"
            )
        result.score = (
            decoding * max(slowed, ramp(itl, t.itl_p95_seconds * 0.5, t.itl_p95_seconds)) * 0.8 * (1.0 - explained)
        )
        if dram_level.bounds is not None:
            # Tensor at its node-wide highest (or as known) is the lightest compute any engine can have.
            heaviest = tensor if tensor is not None else (tensor_level.bounds or (None, None))[1]
            light = 1.0 - ramp(heaviest, t.tensor_active_high, t.tensor_active_high + 0.3)
            lowest, highest = (decoding * ramp(v, busy, saturated) * slowed for v in dram_level.bounds)
            result.score = clamp(result.score, lowest * light, highest, result)
    if itl is not None:
        line = f"ITL p95 {itl * 1000:.1f} ms over {t.level_seconds:g}s"
        if slowdown is not None and slowdown > 1.05:
            line += f", {slowdown:.1f}x its best over {t.baseline_seconds / 60:g} min"
        result.evidence.append(line)
    result.evidence += decode_work_lines(h, t, slowdown)
    waiting_trend = h.trend("waiting", t.level_seconds * 2)
    if waiting_trend is not None and waiting_trend > 0:
        result.evidence.append(f"waiting requests rising ({waiting_trend:+.0f} over {2 * t.level_seconds:g}s)")
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: decode is memory-bandwidth-bound (score {a.value(Fmt.SCORE)}). "
        f"DRAM active {a.figure('dram')} (saturation line {a.percent(a.diagnosis.dram_active_saturated)}), "
        f"SM active {a.figure('sm')}, inter-token latency p95 {a.figure('itl_p95')}, "
        f"running {a.figure('running')}, waiting {a.figure('waiting')}. "
        "Adding concurrency makes it worse: cut the bytes each token reads "
        "(prefix caching, a max-model-len cap, shortest-job-first)."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    dram, sm = "llm_gpu_dram_active_ratio", "llm_gpu_sm_active_ratio"
    return (
        ratio(
            "DRAM vs SM active of the engine's GPUs",
            per_engine(s, "max", dram, "{{engine}} DRAM"),
            per_engine(s, "avg", sm, "{{engine}} SM"),
            width=6,
            lines=drawn(s, dram),
            description="Memory-bandwidth-bound decode: DRAM near its practical peak while SM activity is "
            "moderate. Low SM activity here is not idle capacity.",
        ),
        itl_with_lines("Inter-token latency p95", Query(s.engine_p95(ITL), "{{engine}}"), s=s, width=6),
        engine_gauge(
            s, "Generated tokens/s", "llm_engine_generation_tokens_total", "sum", Unit.TOKENS_PER_SECOND, True, width=6
        ),
    )


def _misreadings(readings: Readings, moved: bool) -> list[str]:
    if not moved:
        return []
    out = []
    sm = readings.value("sm_active")
    if sm is not None and sm < 0.8:
        out.append(
            f"SM active {sm:.0%} is not idle capacity: a decode step bound by memory bandwidth waits on "
            "HBM reads of the KV cache, and more concurrency would make each step read more"
        )
    return out + average_hides_p99(readings)


STAGE = register(
    Stage(
        id="decode_memory_bandwidth",
        order=50,
        roles=("decode",),  # in a disaggregated deployment: a prefill worker decodes one token
        scope=ENGINE,
        title="decode memory bandwidth",
        colour="red",
        score=score,
        question="is token generation HBM-bound?",
        signature="DRAM active ≥ 0.8 with SM active ~0.45, ITL p95 up",
        reads="DRAM active between `dram_active_busy` and `dram_active_saturated` while requests run **and** "
        "ITL p95 slowed against its own best (`itl_slowdown_ratio`)",
        guards="a decoding GPU always streams HBM, so busy DRAM with steady tokens is healthy; damped by a busy "
        "tensor pipe (compute-bound); low SM activity does not lower it; without a DRAM signal, slow tokens that "
        "the engine's own CPU, the node's CPU wait (PSI) or prefill stalls explain are taken off",
        lines=(
            "dram_active_busy",
            "dram_active_saturated",
            "tensor_active_high",
            "itl_slowdown_ratio",
            "itl_p95_seconds",
            "engine_cpu_cores_busy",
        ),
        actions=(
            enable_prefix_caching("to cut KV reads and recomputation"),
            CAP_CONTEXT,
            # No engine exports its scheduling policy (and vLLM has no shortest-job-first yet):
            # the line cannot be dropped where it is taken, so it says so.
            f"schedule shortest-job-first, {IF_NOT_ALREADY}, so short requests are not stuck behind long decodes",
            "do not add concurrency: low SM activity here is not idle capacity; add GPUs or quantize KV/weights "
            "instead",
        ),
        alerts=(
            Alert(
                "LLMDecodeMemoryBandwidthSaturated",
                "critical",
                "5m",
                "LLM decode is bound by GPU memory bandwidth: tokens are generated as fast as HBM can feed them.",
                _description,
            ),
        ),
        row=Row("Decode", _row),
        figures=("itl_p50", "dram_active", "sm_active", "generation_tokens_rate"),
        driven_by=("mean_prompt_tokens", "mean_output_tokens", "request_rate", "prefix_cache_hit_ratio"),
        misreadings=_misreadings,
    )
)
