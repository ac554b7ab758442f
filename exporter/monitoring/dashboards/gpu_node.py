"""GPU and node: every GPU's counters, its errors and clocks; the host's CPU and memory; the
engines' processes; and the exporter's own sources.

GPU series are filtered by namespace (of the pod holding the GPU) and by engine (attributed
GPUs; "All" also keeps the unattributed ones). XID errors, clock-throttle reasons and source
errors are usually empty: each panel says what fills it.
"""

from __future__ import annotations

from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.stages.panels import (
    BYTES,
    BYTES_PER_SECOND,
    CELSIUS,
    COUNT,
    CPU_CORES,
    HERTZ,
    PER_SECOND,
    RATIO,
    SECONDS,
    WATTS,
    Line,
    PanelDef,
    Query,
    state_timeline,
    timeseries,
    value_mappings,
)

UID = "llm-gpu-node"
TITLE = "LLM serving / GPU and node"
VARIABLES = ("datasource", "cluster", "namespace", "node", "engine")
UP_STATES = value_mappings({0: ("down", "red"), 1: ("up", "green")})


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    d, t, win = config.diagnosis, config.thresholds, config.windows
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    node = f"{{{{{s.node}}}}}"
    gpu = f"{node} GPU {{{{gpu}}}}"
    per_gpu = s.by_node("gpu")

    def gpu_gauge(title: str, family: str, unit: str, **options: Any) -> PanelDef:
        return timeseries(title, Query(s(family), gpu), unit=unit, **options)

    def gpu_rate(family: str, counter: str, legend: str) -> Query:
        # dcgm-exporter and NVML GPM give rates; NVML's byte counters (pre-Hopper) give totals.
        return Query(f"sum {per_gpu} ({s(family)})\nor\nsum {per_gpu} ({s.rate(counter)})", f"{gpu} {legend}")

    xid = s("llm_gpu_xid_errors_total")
    b.row(
        "GPUs",
        state_timeline(
            "GPU up",
            Query(s("llm_gpu_up"), gpu),
            mappings=UP_STATES,
            width=12,
            description="1 while the GPU answers the exporter's queries; 0 is LLMGPUDown.",
        ),
        timeseries(
            "XID errors",
            Query(
                f"increase({xid}[{win.xid_errors}]) > 0\nor\n"
                f"(max_over_time({xid}[{win.xid_errors}]) unless {xid} offset {win.xid_errors}) > 0",
                f"{gpu} XID {{{{xid}}}}",
            ),
            unit=COUNT,
            width=12,
            lines=(Line(1, "red"),),
            rare=f"a GPU reports an XID error (the LLMGPUXidErrors expression: errors in the last {win.xid_errors})",
        ),
        gpu_gauge("GPU busy (NVML utilization)", "llm_gpu_utilization_ratio", RATIO, min=0, max=1, width=6),
        gpu_gauge(
            "SM active",
            "llm_gpu_sm_active_ratio",
            RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.sm_active_ineffective, "orange", "diagnosis.sm_active_ineffective"),),
        ),
        gpu_gauge("SM occupancy", "llm_gpu_sm_occupancy_ratio", RATIO, min=0, max=1, width=6),
        gpu_gauge(
            "Tensor active",
            "llm_gpu_tensor_active_ratio",
            RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.tensor_active_high, "red", "diagnosis.tensor_active_high"),),
        ),
        gpu_gauge(
            "DRAM active",
            "llm_gpu_dram_active_ratio",
            RATIO,
            min=0,
            max=1,
            width=6,
            lines=(
                Line(d.dram_active_busy, "orange", "diagnosis.dram_active_busy"),
                Line(d.dram_active_saturated, "red", "diagnosis.dram_active_saturated"),
            ),
        ),
        timeseries(
            "HBM used / total",
            Query(f"{s('llm_gpu_memory_used_bytes')}\n/\n({s('llm_gpu_memory_total_bytes')} > 0)", gpu),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(t.gpu_memory_used_ratio, "red", "thresholds.gpu_memory_used_ratio"),),
            description="vLLM reserves gpu_memory_utilization (0.9) of HBM by design; the line pages.",
        ),
        timeseries(
            "HBM used",
            Query(s("llm_gpu_memory_used_bytes"), f"{gpu} used"),
            Query(s("llm_gpu_memory_total_bytes"), f"{gpu} total"),
            unit=BYTES,
            width=6,
        ),
        gpu_gauge("Power", "llm_gpu_power_watts", WATTS, width=6),
        gpu_gauge("Temperature", "llm_gpu_temperature_celsius", CELSIUS, width=6),
        gpu_gauge("SM clock", "llm_gpu_sm_clock_hertz", HERTZ, width=6),
        timeseries(
            "Clock throttle reasons",
            Query(f"{s('llm_gpu_throttle_reason_active')} == 1", f"{gpu} {{{{reason}}}}"),
            unit=COUNT,
            width=6,
            min=0,
            max=1,
            rare="the driver reports a clock-event reason (NVML or DCGM sources; dcgm-exporter's default "
            "counters leave the field out)",
        ),
        timeseries(
            "PCIe throughput",
            gpu_rate("llm_gpu_pcie_transmit_bytes_per_second", "llm_gpu_pcie_transmit_bytes_total", "transmit"),
            gpu_rate("llm_gpu_pcie_receive_bytes_per_second", "llm_gpu_pcie_receive_bytes_total", "receive"),
            unit=BYTES_PER_SECOND,
            width=12,
        ),
        timeseries(
            "NVLink throughput",
            gpu_rate("llm_gpu_nvlink_transmit_bytes_per_second", "llm_gpu_nvlink_transmit_bytes_total", "transmit"),
            gpu_rate("llm_gpu_nvlink_receive_bytes_per_second", "llm_gpu_nvlink_receive_bytes_total", "receive"),
            unit=BYTES_PER_SECOND,
            width=12,
        ),
    )
    per_node = s.by_node()
    per_engine = s.by_node("engine")
    b.row(
        "Host",
        timeseries(
            "Host CPU",
            Query(f"max {per_node} ({s('llm_host_cpu_overall_utilization_ratio')})", f"{node} all CPUs"),
            Query(f"max {per_node} ({s('llm_host_cpu_utilization_ratio')})", f"{node} busiest CPU"),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
        ),
        timeseries(
            "Host memory",
            Query(s("llm_host_memory_used_bytes"), f"{node} used"),
            Query(s("llm_host_memory_total_bytes"), f"{node} total"),
            unit=BYTES,
            width=6,
        ),
        timeseries(
            "Engine process CPU",
            Query(f"sum {per_engine} ({s.rate('llm_engine_process_cpu_seconds_total')})", "{{engine}}"),
            unit=CPU_CORES,
            width=12,
            lines=(Line(d.engine_cpu_cores_busy, "red", "diagnosis.engine_cpu_cores_busy"),),
            description="CPU of each engine's process tree (the engine's own process_cpu_seconds_total when "
            "it exports one); one Python scheduler thread saturates one core.",
        ),
    )
    source = f"{node} {{{{source}}}} {{{{target}}}}"
    b.row(
        "Exporter",
        state_timeline(
            "Engine scrapes",
            Query(s("llm_engine_up"), "{{engine}}"),
            mappings=UP_STATES,
            width=12,
            description="llm_engine_up: 0 is LLMEngineDown.",
        ),
        state_timeline(
            "Sources",
            Query(s("llm_exporter_source_up"), source),
            mappings=UP_STATES,
            width=12,
            description="llm_exporter_source_up per source and target: 0 is LLMExporterSourceDown.",
        ),
        timeseries(
            "Collection duration", Query(s("llm_exporter_collect_duration_seconds"), source), unit=SECONDS, width=12
        ),
        timeseries(
            "Source errors",
            Query(
                f"sum {s.by_node('source', 'target', 'reason')} ({s.rate('llm_exporter_source_errors_total')})",
                f"{source} {{{{reason}}}}",
            ),
            unit=PER_SECOND,
            width=12,
            rare="a source fails a collection (timeout, connection, parse, ...)",
        ),
    )
    return b
