"""Network: RDMA ports per node — state, utilization, congestion (xmit_wait, CNP, ECN),
retransmissions and errors — and the per-node totals the diagnosis compares with its lines.

Counters are read from sysfs (`/sys/class/infiniband`); RoCE congestion and retransmission
counters exist on mlx5 ports only (docs/rdma-and-host.md).
"""

from __future__ import annotations

from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.health_rows import network_panels
from exporter.monitoring.dashboards.queries import Scope
from exporter.stages.evidence import drawn, rdma_node_evidence
from exporter.stages.panels import Line, PanelDef, Query, Unit, ratio, state_timeline, timeseries, value_mappings

UID = "llm-network"
TITLE = "LLM serving / Network"
VARIABLES = ("datasource", "cluster", "node")


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    t = config.thresholds
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    port = f"{{{{{s.node}}}}} {{{{device}}}}/{{{{port}}}}"
    per_port = s.by_node("device", "port")

    def port_rate(counter: str, legend: str = "") -> Query:
        return Query(f"sum {per_port} ({s.rate(counter)})", f"{port}{legend}")

    def both_ways(title: str, counted: str, unit: str, **options: Any) -> PanelDef:
        """What each port transmits and receives, per second."""
        queries = (port_rate(f"llm_rdma_port_{way}_{counted}_total", f" {way}") for way in ("transmit", "receive"))
        return timeseries(title, *queries, unit=unit, **options)

    b.row(
        "Ports",
        state_timeline(
            "Port state",
            Query(s("llm_rdma_port_up"), port),
            mappings=value_mappings({0: ("down", "red"), 1: ("active", "green")}),
            width=12,
            description="1 while the port is ACTIVE; a port that was active and went down is LLMRDMAPortDown.",
        ),
        timeseries(
            "Link rate",
            Query(s("llm_rdma_port_link_rate_bytes_per_second"), port),
            unit=Unit.BYTES_PER_SECOND,
            width=12,
        ),
        *(
            ratio(title, Query(s(family), port), lines=drawn(s, "llm_rdma_port_transmit_utilization_ratio"))
            for title, family in (
                ("Transmit utilization", "llm_rdma_port_transmit_utilization_ratio"),
                ("Receive utilization", "llm_rdma_port_receive_utilization_ratio"),
            )
        ),
        both_ways("Throughput", "bytes", Unit.BYTES_PER_SECOND),
        both_ways("Packets", "packets", Unit.PACKETS_PER_SECOND, width=24),
    )
    b.row(
        "Congestion and errors per port",
        timeseries(
            "Transmit wait (xmit_wait)",
            port_rate("llm_rdma_port_transmit_wait_total"),
            unit=Unit.PER_SECOND,
            description="Ticks per second the port had data to send but no flow-control credits.",
        ),
        timeseries(
            "CNP handled and sent",
            port_rate("llm_rdma_port_cnp_handled_total", " handled"),
            port_rate("llm_rdma_port_cnp_sent_total", " sent"),
            unit=Unit.PER_SECOND,
            description="DCQCN congestion notifications: handled by this port as reaction point, sent as "
            "notification point.",
        ),
        timeseries(
            "ECN-marked packets", port_rate("llm_rdma_port_ecn_marked_packets_total"), unit=Unit.PACKETS_PER_SECOND
        ),
        timeseries("Retransmissions", port_rate("llm_rdma_port_retransmissions_total"), unit=Unit.PER_SECOND, width=12),
        timeseries(
            "Errors by kind",
            Query(
                f"sum {s.by_node('device', 'port', 'kind')} ({s.rate('llm_rdma_port_errors_total')})",
                f"{port} {{{{kind}}}}",
            ),
            unit=Unit.PER_SECOND,
            width=12,
            lines=(Line(t.rdma_port_errors_per_second, "red", "thresholds.rdma_port_errors_per_second"),),
            description="The line is LLMRDMAPortErrors' (per port and kind).",
        ),
    )
    b.row("Link health", *network_panels(s))
    b.row("Per node, against the diagnosis lines", *rdma_node_evidence(s, width=6))
    return b
