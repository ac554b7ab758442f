"""GPU and node: every GPU's counters, its errors and clocks; the host's CPU and memory; the
engines' processes; and the exporter's own sources.

GPU series are filtered by namespace (of the pod holding the GPU) and by engine (attributed
GPUs; "All" also keeps the unattributed ones). XID errors, clock-throttle reasons and source
errors are usually empty: each panel says what fills it.
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.health_rows import gpu_panels
from exporter.monitoring.dashboards.queries import Scope
from exporter.stages.evidence import engine_cpu, gpu_ratio, host_cpu, used_and_total
from exporter.stages.panels import Line, PanelDef, Query, Unit, ratio, state_timeline, timeseries, value_mappings

UID = "llm-gpu-node"
TITLE = "LLM serving / GPU and node"
VARIABLES = ("datasource", "cluster", "namespace", "node", "engine")
UP_STATES = value_mappings({0: ("down", "red"), 1: ("up", "green")})


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    t, win = config.thresholds, config.windows
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    node = f"{{{{{s.node}}}}}"
    gpu = f"{node} GPU {{{{gpu}}}}"
    per_gpu = s.by_node("gpu")

    def gpu_gauge(title: str, family: str, unit: str) -> PanelDef:
        return timeseries(title, Query(s(family), gpu), unit=unit, width=6)

    def gpu_rate(stem: str, legend: str) -> Query:
        """`<stem>_per_second`, or the rate of `<stem>_total`: dcgm-exporter and NVML GPM give
        rates, NVML's byte counters (pre-Hopper) give totals."""
        rate, total = s(f"{stem}_per_second"), s.rate(f"{stem}_total")
        return Query(f"sum {per_gpu} ({rate})\nor\nsum {per_gpu} ({total})", f"{gpu} {legend}")

    def up(title: str, family: str, legend: str, description: str) -> PanelDef:
        """1 while the thing answers, 0 when its alert fires."""
        return state_timeline(title, Query(s(family), legend), mappings=UP_STATES, width=12, description=description)

    xid = s("llm_gpu_xid_errors_total")
    b.row(
        "GPUs",
        up("GPU up", "llm_gpu_up", gpu, "1 while the GPU answers the exporter's queries; 0 is LLMGPUDown."),
        timeseries(
            "XID errors",
            Query(
                f"increase({xid}[{win.xid_errors}]) > 0\nor\n"
                f"(max_over_time({xid}[{win.xid_errors}]) unless {xid} offset {win.xid_errors}) > 0",
                f"{gpu} XID {{{{xid}}}}",
            ),
            unit=Unit.COUNT,
            width=12,
            lines=(Line(1, "red"),),
            rare=f"a GPU reports an XID error (the LLMGPUXidErrors expression: errors in the last {win.xid_errors})",
        ),
        *(
            gpu_ratio(s, title, family, gpu)
            for title, family in (
                ("GPU busy (NVML utilization)", "llm_gpu_utilization_ratio"),
                ("SM active", "llm_gpu_sm_active_ratio"),
                ("SM occupancy", "llm_gpu_sm_occupancy_ratio"),
                ("Tensor active", "llm_gpu_tensor_active_ratio"),
                ("DRAM active", "llm_gpu_dram_active_ratio"),
            )
        ),
        ratio(
            "HBM used / total",
            Query(f"{s('llm_gpu_memory_used_bytes')}\n/\n({s('llm_gpu_memory_total_bytes')} > 0)", gpu),
            width=6,
            lines=(Line(t.gpu_memory_used_ratio, "red", "thresholds.gpu_memory_used_ratio"),),
            description="vLLM reserves gpu_memory_utilization (0.9) of HBM by design; the line pages.",
        ),
        used_and_total(s, "HBM used", "llm_gpu_memory", gpu),
        gpu_gauge("Power", "llm_gpu_power_watts", Unit.WATTS),
        gpu_gauge("Temperature", "llm_gpu_temperature_celsius", Unit.CELSIUS),
        gpu_gauge("SM clock", "llm_gpu_sm_clock_hertz", Unit.HERTZ),
        timeseries(
            "Clock throttle reasons",
            Query(f"{s('llm_gpu_throttle_reason_active')} == 1", f"{gpu} {{{{reason}}}}"),
            unit=Unit.COUNT,
            width=6,
            min=0,
            max=1,
            rare="the driver reports a clock-event reason (NVML or DCGM sources; dcgm-exporter's default "
            "counters leave the field out)",
        ),
        *(
            timeseries(
                f"{title} throughput",
                *(gpu_rate(f"llm_gpu_{link}_{way}_bytes", way) for way in ("transmit", "receive")),
                unit=Unit.BYTES_PER_SECOND,
                width=12,
            )
            for title, link in (("PCIe", "pcie"), ("NVLink", "nvlink"))
        ),
    )
    b.row(
        "Host",
        host_cpu(s),
        used_and_total(s, "Host memory", "llm_host_memory", node),
        engine_cpu(
            s,
            width=12,
            description="CPU of each engine's process tree (the engine's own process_cpu_seconds_total when "
            "it exports one); one Python scheduler thread saturates one core.",
        ),
    )
    b.row("GPU links", *gpu_panels(s))
    source = f"{node} {{{{source}}}} {{{{target}}}}"
    b.row(
        "Exporter",
        up("Engine scrapes", "llm_engine_up", "{{engine}}", "llm_engine_up: 0 is LLMEngineDown."),
        up(
            "Sources",
            "llm_exporter_source_up",
            source,
            "llm_exporter_source_up per source and target: 0 is LLMExporterSourceDown.",
        ),
        timeseries(
            "Collection duration",
            Query(s("llm_exporter_collect_duration_seconds"), source),
            unit=Unit.SECONDS,
            width=12,
        ),
        timeseries(
            "Source errors",
            Query(
                f"sum {s.by_node('source', 'target', 'reason')} ({s.rate('llm_exporter_source_errors_total')})",
                f"{source} {{{{reason}}}}",
            ),
            unit=Unit.PER_SECOND,
            width=12,
            rare="a source fails a collection (timeout, connection, parse, ...)",
        ),
    )
    return b
