"""The node's own families: RDMA ports (exporter/sources/rdma.py), host CPU and memory, and the
engines' serving processes (exporter/sources/host.py)."""

from __future__ import annotations

from exporter.catalogue.spec import ENGINE_LABELS, HOST_CPU_LABELS, RDMA_LABELS, MetricSpec, counter, families, gauge

RDMA_FAMILIES: tuple[MetricSpec, ...] = families(
    RDMA_LABELS,
    gauge("llm_rdma_port_up", "1 if the port state is ACTIVE, else 0."),
    gauge("llm_rdma_port_link_rate_bytes_per_second", "Negotiated link rate."),
    counter("llm_rdma_port_transmit_bytes_total", "Bytes sent (sysfs 4-octet words x 4)."),
    counter("llm_rdma_port_receive_bytes_total", "Bytes received (sysfs 4-octet words x 4)."),
    gauge(
        "llm_rdma_port_transmit_utilization_ratio",
        "Transmit throughput over the window as a fraction of the link rate.",
    ),
    gauge(
        "llm_rdma_port_receive_utilization_ratio", "Receive throughput over the window as a fraction of the link rate."
    ),
    counter(
        "llm_rdma_port_transmit_wait_total",
        "Ticks the port had data to send but no flow-control credits (port_xmit_wait).",
    ),
    counter(
        "llm_rdma_port_cnp_handled_total",
        "Congestion notification packets handled by the reaction point (rp_cnp_handled).",
    ),
    counter(
        "llm_rdma_port_cnp_sent_total", "Congestion notification packets sent by the notification point (np_cnp_sent)."
    ),
    counter("llm_rdma_port_ecn_marked_packets_total", "ECN-marked RoCE packets received (np_ecn_marked_roce_packets)."),
    counter("llm_rdma_port_retransmissions_total", "Retransmission events (timeouts, sequence errors, RNR retries)."),
    counter("llm_rdma_port_errors_total", "Port error counters by kind, read every 6th collection.", "kind"),
    gauge(
        "llm_rdma_port_info",
        "Always 1; labels carry the port's link layer (InfiniBand, Ethernet for RoCE) and its network interface "
        "where the kernel names one.",
        "link_layer",
        "netdev",
    ),
    counter("llm_rdma_port_transmit_packets_total", "Packets sent (port_xmit_packets; rxe sent_pkts)."),
    counter("llm_rdma_port_receive_packets_total", "Packets received (port_rcv_packets; rxe rcvd_pkts)."),
    gauge(
        "llm_rdma_port_counter_saturated",
        "1 while a PMA counter is stuck at its maximum (PMA counters clamp, they do not wrap): its rate reads 0 "
        "and must not be trusted. Present only for saturated counters.",
        "counter",
    ),
)
HOST_FAMILIES: tuple[MetricSpec, ...] = (
    families(
        HOST_CPU_LABELS,
        gauge(
            "llm_host_cpu_utilization_ratio",
            "Busy fraction of one logical CPU over the exporter's window (everything but idle and iowait).",
        ),
    )
    + families(
        (),
        gauge(
            "llm_host_cpu_overall_utilization_ratio",
            "Busy fraction of all logical CPUs together over the exporter's window.",
        ),
        gauge(
            "llm_host_memory_used_bytes",
            "Memory in use: total minus available (what cannot be reclaimed without swapping).",
        ),
        gauge("llm_host_memory_total_bytes", "Physical memory."),
    )
    + families(
        ENGINE_LABELS,
        counter(
            "llm_engine_process_cpu_seconds_total",
            "CPU seconds (user + system) of the engine's serving process: its own process_cpu_seconds_total where it "
            "exports one, else its process tree found from the port it listens on (exited children keep counting).",
        ),
        gauge("llm_engine_process_threads", "Threads in the engine's process tree."),
    )
)
