"""Host overhead: the GPUs wait on the host (CPU-side scheduling, Python work per step)."""

from __future__ import annotations

from exporter.health.finding import HOST, lines_for
from exporter.settings import Thresholds
from exporter.stages.evidence import drawn, engine_cpu, host_cpu, per_engine
from exporter.stages.panels import PanelDef, ratio
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, PanelScope, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import gpu_level, itl_slowdown, no_gpu_line, ramp, requests_in_engine, slowing
from exporter.stages.signals import History


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    in_engine = requests_in_engine(h, t)
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
    _, slowdown = itl_slowdown(h, t)
    starved = (
        1.0 - ramp(busy_gpu, t.sm_active_ineffective - 0.2, t.sm_active_ineffective)
        if busy_gpu is not None
        else 0.5 + 0.5 * slowing(slowdown, t)
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
        parts.append(no_gpu_line(h, t, "no GPU activity for this engine", gpu.withheld))
    result.evidence.append("; ".join(parts))
    result.evidence.extend(lines_for(h.findings, (HOST,)))  # pauses, throttling, steal, jitter: with figures
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: host overhead limits the GPUs (score {a.value(Fmt.SCORE)}): SM active {a.figure('sm')} "
        f"(line {a.percent(a.diagnosis.sm_active_ineffective)}), GPU utilization {a.figure('gpu_util')} "
        f"while {a.figure('running')} requests run, engine process {a.figure('engine_cpu')} CPU cores busy."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    return (
        ratio(
            "SM active and GPU busy of the engine's GPUs",
            per_engine(s, "avg", "llm_gpu_sm_active_ratio", "{{engine}} SM active"),
            per_engine(s, "avg", "llm_gpu_utilization_ratio", "{{engine}} GPU busy"),
            width=6,
            lines=drawn(s, "llm_gpu_sm_active_ratio"),
            description="Host overhead: the GPUs idle between steps while requests run. Busy DRAM rules it out "
            "(that is decode bandwidth).",
        ),
        engine_cpu(s, width=6, description="One Python scheduler thread saturates one core."),
        host_cpu(s),
    )


STAGE = register(
    Stage(
        id="host_overhead",
        order=80,
        scope=ENGINE,
        title="host overhead",
        colour="dark-red",
        score=score,
        question="do GPUs wait on the CPU?",
        signature="SM active low while requests run, engine CPU ≈ one core",
        reads="SM active (or NVML utilization) under `sm_active_ineffective` while requests run, engine process "
        "CPU near one core",
        guards="damped by busy DRAM (that is decode bandwidth, not idle)",
        lines=("sm_active_ineffective", "engine_cpu_cores_busy", "dram_active_busy", "itl_slowdown_ratio"),
        actions=(
            "enable CUDA graphs and async output processing; avoid --enforce-eager",
            "give the engine process dedicated CPU cores and check NUMA pinning",
            "reduce per-step Python work (logprobs, detokenization, guided decoding) or move it off the scheduler",
        ),
        alerts=(
            Alert(
                "LLMHostOverhead",
                "warning",
                "15m",
                "LLM GPUs wait on the host: CPU-side scheduling or Python overhead.",
                _description,
            ),
        ),
        row=Row("Host", _row),
        figures=("cpu",),
        driven_by=("request_rate",),
    )
)
