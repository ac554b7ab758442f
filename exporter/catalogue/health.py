"""The node's own health (docs/health.md): links against their capability, the fabric's
configuration, engines starting, host pauses, and the findings the exporter makes of them."""

from __future__ import annotations

from exporter.catalogue.spec import ENGINE_LABELS, GPU_LABELS, RDMA_LABELS, MetricSpec, counter, families, gauge

_BOUND = "by bound: current (trained now), max (what device and slot allow together), device_max (the device's own)"

HEALTH_FAMILIES: tuple[MetricSpec, ...] = (
    families(
        GPU_LABELS,
        gauge("llm_gpu_pcie_link_generation", f"PCIe generation of the GPU's link, {_BOUND}.", "bound"),
        gauge("llm_gpu_pcie_link_width", "PCIe lanes of the GPU's link, by bound: current, max.", "bound"),
        counter("llm_gpu_pcie_replay_errors_total", "PCIe replays (link-level retransmissions) of the GPU."),
        gauge("llm_gpu_nvlink_links", "NVLink links the GPU supports, by state: active, inactive.", "state"),
        counter(
            "llm_gpu_nvlink_errors_total",
            "NVLink errors over all links, by kind: crc_flit, crc_data, replay, recovery.",
            "kind",
        ),
        gauge("llm_gpu_fabric_degraded_bandwidth", "1 while the NVLink fabric reports degraded bandwidth, else 0."),
    )
    + families(
        ("device", "address"),
        gauge("llm_rdma_device_pcie_link_generation", f"PCIe generation of the RDMA NIC's link, {_BOUND}.", "bound"),
        gauge("llm_rdma_device_pcie_link_width", f"PCIe lanes of the RDMA NIC's link, {_BOUND}.", "bound"),
    )
    + families(
        RDMA_LABELS,
        gauge(
            "llm_rdma_port_physical_state", "The port's phys_state number: 5 LinkUp, 6 LinkErrorRecovery, 3 Disabled."
        ),
        counter(
            "llm_rdma_port_link_errors_total",
            "Link flap and signal-integrity counters by name: link_downed, link_error_recovery, symbol_error, "
            "local_link_integrity_errors, excessive_buffer_overrun_errors (PMA counters clamp at their maximum).",
            "counter",
        ),
        gauge(
            "llm_rdma_port_ecn_enabled",
            "1 where ECN (DCQCN) is on for the RoCE priority (`health.roce_priority`, the only one read) at the "
            "notification (np) or reaction (rp) point.",
            "netdev",
            "point",
            "priority",
        ),
        gauge("llm_rdma_port_qos_info", "Always 1; trust carries the QoS trust mode (pcp, dscp).", "netdev", "trust"),
        counter(
            "llm_rdma_port_pause_frames_total",
            "PFC pause frames per priority and direction (ethtool rx/tx_prio<p>_pause).",
            "netdev",
            "direction",
            "priority",
        ),
        counter(
            "llm_rdma_port_pause_seconds_total",
            "Time paused by PFC per priority and direction (ethtool *_prio<p>_pause_duration).",
            "netdev",
            "direction",
            "priority",
        ),
        counter(
            "llm_rdma_port_pause_storm_events_total",
            "Pause storms the NIC detected, by level: warning, error (ethtool tx_pause_storm_*_events).",
            "netdev",
            "level",
        ),
    )
    + families(
        ENGINE_LABELS,
        gauge("llm_engine_process_start_time_seconds", "Start time of the engine's serving process (Unix seconds)."),
        gauge(
            "llm_engine_startup_seconds",
            "The engine's own start-up figures by phase: engine (SGLang start-up), load_weights (SGLang), "
            "model_load (Triton), load (Dynamo ModelExpress mean).",
            "phase",
        ),
        gauge(
            "llm_engine_startup_duration_seconds",
            "From the engine's process start to the first request it served after it.",
        ),
        counter(
            "llm_engine_gc_collections_total",
            "Garbage collections of the engine's Python process by generation (python_gc_collections_total).",
            "generation",
        ),
        counter(
            "llm_engine_cgroup_cpu_periods_total", "CPU quota periods of the engine's cgroup (cpu.stat nr_periods)."
        ),
        counter(
            "llm_engine_cgroup_cpu_throttled_periods_total",
            "Periods in which the engine's cgroup was throttled by its CPU quota (cpu.stat nr_throttled).",
        ),
        counter(
            "llm_engine_cgroup_cpu_throttled_seconds_total",
            "Time the engine's cgroup was held back by its CPU quota (cpu.stat throttled_usec).",
        ),
    )
    + families(
        (),
        gauge("llm_host_cpu_steal_ratio", "Share of the node's CPU time stolen by the hypervisor over the window."),
        counter(
            "llm_host_cpu_waiting_seconds_total",
            "Time in which at least one of the node's runnable tasks waited for a CPU (PSI /proc/pressure/cpu, "
            "some total).",
        ),
        gauge(
            "llm_health_finding",
            "A finding about the node's own health while it holds (docs/health.md): kind, the device or engine, "
            "the file or counter it came from; the value is its figure.",
            "kind",
            "device",
            "source",
        ),
    )
)
