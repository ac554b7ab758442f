"""GPU families, one schema for every vendor (NVML, DCGM, dcgm-exporter, AMD, Ascend, Gaudi)."""

from __future__ import annotations

from exporter.catalogue.spec import GPU_LABELS, MetricSpec, counter, families, gauge

GPU_FAMILIES: tuple[MetricSpec, ...] = families(
    GPU_LABELS,
    gauge("llm_gpu_up", "1 if the GPU answered its last query, else 0."),
    gauge(
        "llm_gpu_utilization_ratio",
        "Fraction of time any kernel ran (NVML utilization; AMD gfx activity, Ascend AI Core, Gaudi "
        "utilization), not how busy the SMs were.",
    ),
    gauge(
        "llm_gpu_sm_active_ratio",
        "Fraction of time at least one warp was resident on an SM, averaged over SMs (DCGM 1002 / GPM).",
    ),
    gauge(
        "llm_gpu_sm_occupancy_ratio",
        "Resident warps as a fraction of the maximum, averaged over SMs (DCGM 1003 / GPM).",
    ),
    gauge("llm_gpu_tensor_active_ratio", "Fraction of cycles the tensor pipes were active (DCGM 1004 / GPM)."),
    gauge(
        "llm_gpu_dram_active_ratio",
        "Fraction of cycles device memory was sending or receiving data (DCGM 1005 / GPM); practical peak about "
        "0.8. AMD: memory-controller (UMC) activity; Ascend: HBM bandwidth utilization (docs/metrics.md).",
    ),
    gauge("llm_gpu_memory_used_bytes", "HBM in use."),
    gauge("llm_gpu_memory_total_bytes", "HBM capacity."),
    gauge("llm_gpu_power_watts", "Board power draw."),
    gauge("llm_gpu_temperature_celsius", "GPU core temperature."),
    gauge("llm_gpu_sm_clock_hertz", "SM clock."),
    counter("llm_gpu_pcie_transmit_bytes_total", "Bytes sent over PCIe."),
    counter("llm_gpu_pcie_receive_bytes_total", "Bytes received over PCIe."),
    counter("llm_gpu_nvlink_transmit_bytes_total", "Bytes sent over NVLink."),
    counter("llm_gpu_nvlink_receive_bytes_total", "Bytes received over NVLink."),
    counter("llm_gpu_xid_errors_total", "XID errors reported by the driver, by XID code.", "xid"),
    gauge(
        "llm_gpu_pcie_transmit_bytes_per_second",
        "PCIe transmit rate averaged over the sample window, headers included (DCGM 1009 / GPM).",
    ),
    gauge(
        "llm_gpu_pcie_receive_bytes_per_second",
        "PCIe receive rate averaged over the sample window, headers included (DCGM 1010 / GPM).",
    ),
    gauge(
        "llm_gpu_nvlink_transmit_bytes_per_second",
        "NVLink transmit rate over all links, averaged over the sample window (DCGM 1011 / GPM).",
    ),
    gauge(
        "llm_gpu_nvlink_receive_bytes_per_second",
        "NVLink receive rate over all links, averaged over the sample window (DCGM 1012 / GPM).",
    ),
    gauge(
        "llm_gpu_throttle_reason_active",
        "1 while the driver reports this clock-event (throttle) reason, else 0 (NVML clocks-event reasons / DCGM 112).",
        "reason",
    ),
    gauge(
        "llm_gpu_healthy", "1 while the device reports itself healthy, else 0 (AMD gpu_health, Ascend health_status)."
    ),
    counter(
        "llm_gpu_ecc_errors_total",
        "Device-memory ECC errors since the driver loaded, by severity (correctable, uncorrectable).",
        "severity",
    ),
    counter(
        "llm_gpu_interconnect_transmit_bytes_total",
        "Bytes sent over the vendor's scale-up links (AMD XGMI), all links summed, by link.",
        "link",
    ),
    counter(
        "llm_gpu_interconnect_receive_bytes_total",
        "Bytes received over the vendor's scale-up links (AMD XGMI), all links summed, by link.",
        "link",
    ),
)
