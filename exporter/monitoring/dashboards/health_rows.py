"""The node's health findings on the dashboards (docs/health.md): a row on the network dashboard
(the NICs' PCIe links, flaps, ECN, PFC pauses), one on the GPU dashboard (the GPUs' PCIe and
NVLink), one on the engine dashboard (start-up and host pauses). Each opens with the findings the
exporter holds for its part, so a degraded link shows even while no stage fires."""

from __future__ import annotations

from exporter.diagnosis.states import EngineState
from exporter.health.evaluate import NodeHealth  # noqa: F401 - registers every finding kind
from exporter.health.finding import GPU_LINK, HOST, NETWORK, STARTUP
from exporter.health.record import kinds
from exporter.monitoring.dashboards.queries import Scope
from exporter.stages.panels import PanelDef, Query, Unit, state_timeline, timeseries, value_mappings


def _findings(s: Scope, title: str, topics: tuple[str, ...], rare: str, width: int = 24) -> PanelDef:
    covered = "|".join(kind.id for kind in kinds() if kind.topic in topics)
    return timeseries(
        title,
        Query(
            s("llm_health_finding", f'kind=~"{covered}"', engine=False), f"{{{{{s.node}}}}} {{{{kind}}}} {{{{device}}}}"
        ),
        unit=Unit.COUNT,
        width=width,
        rare=rare,
        description="The exporter's findings (llm_health_finding): the value is each one's figure (lanes, "
        "rate ratio, events); /diagnosis gives the line with its numbers and the file or counter.",
    )


def network_panels(s: Scope) -> tuple[PanelDef, ...]:
    nic = f"{{{{{s.node}}}}} {{{{device}}}} {{{{bound}}}}"
    port = f"{{{{{s.node}}}}} {{{{device}}}}/{{{{port}}}}"
    return (
        _findings(
            s, "Link findings", (NETWORK,), "a NIC's link runs below its capability or its configuration drifted"
        ),
        timeseries(
            "NIC PCIe width",
            Query(s("llm_rdma_device_pcie_link_width"), nic),
            unit=Unit.COUNT,
            width=12,
            description="Lanes trained (current) against what device and slot allow (max) and the device's own.",
        ),
        timeseries(
            "Link flaps and symbol errors (10m)",
            Query(
                f"sum {s.by_node('device', 'port', 'counter')} (increase({s('llm_rdma_port_link_errors_total')}[10m]))",
                f"{port} {{{{counter}}}}",
            ),
            unit=Unit.COUNT,
            width=12,
            rare="a link goes down, retrains or counts symbol errors",
        ),
        timeseries(
            "ECN switched off (per priority)",
            Query(f"{s('llm_rdma_port_ecn_enabled')} == 0", f"{port} {{{{point}}}} prio {{{{priority}}}}"),
            unit=Unit.COUNT,
            width=12,
            rare="ECN is off on a priority",
            description="Priorities whose ECN (DCQCN) switch is off; the RoCE priority must not be among them.",
        ),
        timeseries(
            "PFC paused share",
            Query(
                f"sum {s.by_node('device', 'port', 'direction', 'priority')} "
                f"({s.rate('llm_rdma_port_pause_seconds_total')})",
                f"{port} {{{{direction}}}} prio {{{{priority}}}}",
            ),
            unit=Unit.RATIO,
            width=12,
            rare="the NIC's driver counts per-priority PFC pauses (mlx5's ethtool statistics)",
        ),
    )


def gpu_panels(s: Scope) -> tuple[PanelDef, ...]:
    gpu = f"{{{{{s.node}}}}} GPU {{{{gpu}}}} {{{{bound}}}}"
    return (
        _findings(
            s, "GPU link findings", (GPU_LINK,), "a GPU's PCIe link runs below its capability or NVLink fails", width=12
        ),
        timeseries(
            "PCIe width",
            Query(s("llm_gpu_pcie_link_width"), gpu),
            unit=Unit.COUNT,
            width=12,
            description="Trained (current) against the maximum; idle GPUs train down by design.",
        ),  # fmt: skip
        timeseries("PCIe generation", Query(s("llm_gpu_pcie_link_generation"), gpu), unit=Unit.COUNT, width=8),
        timeseries(
            "NVLink links inactive",
            Query(s("llm_gpu_nvlink_links", 'state="inactive"'), f"{{{{{s.node}}}}} GPU {{{{gpu}}}}"),
            unit=Unit.COUNT,
            width=8,
        ),
        timeseries(
            "NVLink errors",
            Query(
                f"sum {s.by_node('gpu', 'kind')} ({s.rate('llm_gpu_nvlink_errors_total')})",
                f"{{{{{s.node}}}}} GPU {{{{gpu}}}} {{{{kind}}}}",
            ),
            unit=Unit.PER_SECOND,
            width=8,
            rare="NVLink counts CRC, replay or recovery errors",
        ),
    )


#: each state of exporter/diagnosis/states.py on the state timeline
STATE_COLOURS = {
    EngineState.UP: "green",
    EngineState.DOWN: "red",
    EngineState.ASLEEP: "blue",
    EngineState.LOADING: "orange",
    EngineState.WARMING_UP: "yellow",
}


def engine_panels(s: Scope) -> tuple[PanelDef, ...]:
    states = {i: (state.value.replace("_", " "), STATE_COLOURS[state]) for i, state in enumerate(EngineState)}
    matchers = [f'state="{state.value}"' for state in EngineState]
    code = " or ".join(f"({s('llm_engine_state', m)} == 1) * {i}" for i, m in enumerate(matchers))
    full_gc = 'generation="2"'
    return (
        state_timeline(
            "State",
            Query(code, "{{engine}}"),
            mappings=value_mappings(states),
            width=6,
            description="Warming up is the cold regime: the diagnosis gives no verdict there.",
        ),  # fmt: skip
        timeseries(
            "Start-up",
            Query(s("llm_engine_startup_duration_seconds"), "{{engine}} start to first request"),
            Query(s("llm_engine_startup_seconds"), "{{engine}} {{phase}} (engine's own)"),
            unit=Unit.SECONDS,
            width=6,
            rare="an engine started while the exporter watched, or exports its own start-up figures",
        ),
        timeseries(
            "Full GC",
            Query(f"60 * {s.rate('llm_engine_gc_collections_total', full_gc)}", "{{engine}} full GC/min"),
            unit=Unit.COUNT,
            width=6,
            description="Generation-2 collections per minute of the engine's Python process.",
        ),
        timeseries(
            "CPU throttling",
            Query(
                f"{s.rate('llm_engine_cgroup_cpu_throttled_periods_total')} / "
                f"({s.rate('llm_engine_cgroup_cpu_periods_total')} > 0)",
                "{{engine}} throttled share",
            ),
            unit=Unit.RATIO,
            width=6,
            rare="the engine's cgroup has a CPU limit and its process is found (root and hostPID)",
            description="Share of the engine cgroup's CPU periods throttled (cgroup v2 cpu.stat).",
        ),
        _findings(
            s, "Start-up and host findings", (STARTUP, HOST), "an engine is loading, or its host pauses or throttles it"
        ),
    )
