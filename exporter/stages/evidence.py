"""Evidence panels that a stage's dashboard row and another dashboard both show, declared once,
and the diagnosis lines each family is drawn with wherever it is drawn."""

from __future__ import annotations

from typing import Any

from exporter.stages.panels import Line, PanelDef, Query, Unit, line_series_style, ratio, timeseries
from exporter.stages.record import PanelScope

#: (diagnosis setting, colour) of the lines drawn on a family's panels: the lines the stages
#: score that family against
LINES: dict[str, tuple[tuple[str, str], ...]] = {
    "llm_engine_requests_waiting": (("waiting_requests", "red"),),
    "llm_engine_kv_cache_usage_ratio": (("kv_usage_warning", "orange"), ("kv_usage_critical", "red")),
    "llm_engine_preemptions_total": (("preemptions_per_second", "red"),),
    "llm_engine_time_to_first_token_seconds": (("ttft_p95_seconds", "red"),),
    "llm_engine_process_cpu_seconds_total": (("engine_cpu_cores_busy", "red"),),
    "llm_gpu_sm_active_ratio": (("sm_active_ineffective", "orange"),),
    "llm_gpu_dram_active_ratio": (("dram_active_busy", "orange"), ("dram_active_saturated", "red")),
    "llm_gpu_tensor_active_ratio": (("tensor_active_high", "red"),),
    "llm_rdma_port_transmit_utilization_ratio": (("rdma_utilization_high", "red"),),
}


def drawn(s: PanelScope, family: str) -> tuple[Line, ...]:
    """The diagnosis lines drawn on a panel of `family`."""
    return tuple(s.line(key, colour) for key, colour in LINES.get(family, ()))


def per_engine(s: PanelScope, op: str, family: str, legend: str = "{{engine}}", rate: bool = False) -> Query:
    """`op` of a family per engine (a counter's rate where `rate`)."""
    selected = s.rate(family) if rate else s(family)
    return Query(f"{op} {s.by_node('engine')} ({selected})", legend)


def engine_gauge(
    s: PanelScope, title: str, family: str, op: str, unit: str, rate: bool = False, **options: Any
) -> PanelDef:
    """One family per engine (a counter's rate where `rate`), with its diagnosis lines."""
    return timeseries(title, per_engine(s, op, family, rate=rate), unit=unit, lines=drawn(s, family), **options)


def engine_ratio(s: PanelScope, title: str, family: str, op: str = "max", **options: Any) -> PanelDef:
    """One 0-1 family per engine, with its diagnosis lines."""
    return ratio(title, per_engine(s, op, family), lines=drawn(s, family), **options)


def engine_p95(s: PanelScope, title: str, family: str, **options: Any) -> PanelDef:
    """The worst replica's p95 of a latency summary per engine, with its diagnosis lines."""
    return timeseries(
        title, Query(s.engine_p95(family), "{{engine}}"), unit=Unit.SECONDS, lines=drawn(s, family), **options
    )


ITL = "llm_engine_inter_token_latency_seconds"
#: the colours of inter-token latency's lines (PanelScope.itl_lines), by their legends
ITL_LINE_COLOURS = {".* best p95 over .* line$": "orange", "^SLO .* line$": "red"}
ITL_LINES_NOTE = (
    "The dashed lines are what the latency is judged against: orange, the diagnosis' slowdown line "
    "(itl_slowdown_ratio times the model's best p95 over baseline_seconds: the model's own baseline, not a "
    "fixed figure); red, the threshold of an SLO that bounds inter-token latency, where one is set."
)


def itl_with_lines(title: str, *queries: Query, s: PanelScope, description: str = "", **options: Any) -> PanelDef:
    """Inter-token latency (`queries`) with the lines it is judged against, which are series (a
    model's own baseline, an SLO) rather than fixed thresholds."""
    return timeseries(
        title,
        *queries,
        *s.itl_lines(),
        unit=Unit.SECONDS,
        description=" ".join(part for part in (description, ITL_LINES_NOTE) if part),
        extra=line_series_style(ITL_LINE_COLOURS),
        **options,
    )


def gpu_ratio(s: PanelScope, title: str, family: str, legend: str, **options: Any) -> PanelDef:
    """One GPU ratio per GPU, with its diagnosis lines."""
    return ratio(title, Query(s(family), legend), width=6, lines=drawn(s, family), **options)


def used_and_total(s: PanelScope, title: str, prefix: str, legend: str, **options: Any) -> PanelDef:
    """`<prefix>_used_bytes` against `<prefix>_total_bytes` (HBM, host memory)."""
    return timeseries(
        title,
        Query(s(f"{prefix}_used_bytes"), f"{legend} used"),
        Query(s(f"{prefix}_total_bytes"), f"{legend} total"),
        unit=Unit.BYTES,
        width=6,
        **options,
    )


def waiting(s: PanelScope, title: str, **options: Any) -> PanelDef:
    return engine_gauge(s, title, "llm_engine_requests_waiting", "sum", Unit.COUNT, **options)


def kv_usage(s: PanelScope, title: str, **options: Any) -> PanelDef:
    return engine_ratio(s, title, "llm_engine_kv_cache_usage_ratio", **options)


def engine_cpu(s: PanelScope, width: int, description: str) -> PanelDef:
    family = "llm_engine_process_cpu_seconds_total"
    return engine_gauge(
        s, "Engine process CPU", family, "sum", Unit.CPU_CORES, rate=True, width=width, description=description
    )


def host_cpu(s: PanelScope) -> PanelDef:
    per_node, node = s.by_node(), f"{{{{{s.node}}}}}"
    return ratio(
        "Host CPU",
        Query(f"max {per_node} ({s('llm_host_cpu_overall_utilization_ratio')})", f"{node} all CPUs"),
        Query(f"max {per_node} ({s('llm_host_cpu_utilization_ratio')})", f"{node} busiest CPU"),
        width=6,
    )


def rdma_node_evidence(s: PanelScope, width: int) -> tuple[PanelDef, ...]:
    """Per node, the RDMA figures the cross-node stage compares with its lines (it sums over ports)."""
    per_node, node = s.by_node(), f"{{{{{s.node}}}}}"

    def node_rate(title: str, counters: tuple[str, ...], **options: Any) -> PanelDef:
        """Counters summed over the node's ports, per second."""
        expr = "\n+\n".join(f"sum {per_node} ({s.rate(counter)})" for counter in counters)
        return timeseries(title, Query(expr, node), unit=Unit.PER_SECOND, width=width, **options)

    return (
        ratio(
            "RDMA link utilization (busiest port)",
            Query(f"max {per_node} ({s('llm_rdma_port_transmit_utilization_ratio')})", f"{node} transmit"),
            Query(f"max {per_node} ({s('llm_rdma_port_receive_utilization_ratio')})", f"{node} receive"),
            width=width,
            lines=drawn(s, "llm_rdma_port_transmit_utilization_ratio"),
        ),
        node_rate(
            "Congestion notifications per node (CNP handled + sent)",
            ("llm_rdma_port_cnp_handled_total", "llm_rdma_port_cnp_sent_total"),
            key="cnp-per-node",
            lines=(s.line("cnp_per_second"),),
        ),
        node_rate(
            "Retransmissions per node",
            ("llm_rdma_port_retransmissions_total",),
            lines=(s.line("retransmissions_per_second"),),
        ),
        node_rate(
            "Transmit wait per node",
            ("llm_rdma_port_transmit_wait_total",),
            description="Ticks per second a port had data to send but no flow-control credits (port_xmit_wait).",
        ),
    )
