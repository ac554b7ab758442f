"""The node's GPUs as dcgm-exporter serves them on :9400/metrics.

Families, HELP texts and types are dcgm-exporter's default counters as in the real capture
shared/fixtures/dcgm-exporter/dcgm-exporter-t4-pods-runai-1-workload.prom (with FB_RESERVED, which
the current default CSV adds, so FB_TOTAL = USED + FREE + RESERVED can be derived), plus SM_ACTIVE and
SM_OCCUPANCY (commented out in the default CSV, enabled here as the DaemonSet must do for the
diagnosis; gpu-telemetry.md §1.1), the NVLink byte rates (fields 1011/1012) and the PCIe link's
generation and width against their maximum (deploy/dcgm-exporter/counters.csv turns them on). Labels follow the
4.x template `gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION` (§1.3);
pod labels are added for GPUs that carry an engine. Integer fields print as integers, doubles with
six decimals as dcgm-exporter's `%f` does (§1.6). Ratios are averaged over `window_seconds`, the
collect interval (dcgm-exporter's default is 30 s; shorter here so a demo reacts quickly).
"""

from __future__ import annotations

from exporter.simulate.faults import PCIE_WIDTH
from exporter.simulate.gpu import GpuActivity, GpuDevice
from exporter.simulate.node import SimulatedNode

MIB = 1024 * 1024
POD_NAMESPACE = "inference"
RESERVED_BYTES = 512 * MIB  # driver reservation: FB_TOTAL = USED + FREE + RESERVED

# (field, type, help, kind): kind picks the value below and its format.
FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "memory_temp"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "gpu_temp"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", "energy"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "zero"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpu_util"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_copy_util"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", "zero"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", "zero"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "zero"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", "fb_reserved"),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        "nvlink_total",
    ),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", "gr_engine"),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", "sm_active"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.", "sm_occupancy"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", "tensor"),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        "dram",
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads"
        " - in bytes per second.",
        "pcie_tx",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads"
        " - in bytes per second.",
        "pcie_rx",
    ),
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink in bytes per second.",
        "nvlink_rate",
    ),
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink in bytes per second.",
        "nvlink_rate",
    ),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "PCIe Max Link Generation.", "pcie_max_gen"),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "PCIe Max Link Width.", "pcie_max_width"),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe Current Link Generation.", "pcie_gen"),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe Current Link Width.", "pcie_width"),
)


def _value(kind: str, gpu: GpuDevice, activity: GpuActivity, pcie_width: int) -> str:
    spec = gpu.spec
    ratios = {
        "gr_engine": activity.utilization,
        "sm_active": activity.sm_active,
        "sm_occupancy": activity.sm_occupancy,
        "tensor": activity.tensor_active,
        "dram": activity.dram_active,
    }
    if kind in ratios:
        return f"{ratios[kind]:f}"
    if kind == "power":
        return f"{gpu.power_watts:f}"
    integers = {
        "sm_clock": spec.sm_clock_mhz if activity.utilization > 0.01 else 210,
        "mem_clock": spec.mem_clock_mhz,
        "memory_temp": round(gpu.temperature_celsius + 4),
        "gpu_temp": round(gpu.temperature_celsius),
        "energy": round(gpu.counters.energy_joules * 1000),
        "zero": 0,
        "gpu_util": round(100 * activity.utilization),
        # NVML's memory utilization: percent of time memory was read or written.
        "mem_copy_util": round(100 * activity.dram_active),
        "fb_used": gpu.memory_used_bytes // MIB,
        "fb_reserved": RESERVED_BYTES // MIB,
        "fb_free": (spec.hbm_bytes - gpu.memory_used_bytes - RESERVED_BYTES) // MIB,
        # Cumulative NVLink traffic in KiB, as NVML's NVLink utilization counters count (unit unverified).
        "nvlink_total": round(gpu.counters.nvlink_bytes / 1024),
        "pcie_tx": round(activity.pcie_tx_bytes_per_second),
        "pcie_rx": round(activity.pcie_rx_bytes_per_second),
        "nvlink_rate": round(activity.nvlink_bytes_per_second),
        "pcie_gen": spec.pcie_generation,
        "pcie_max_gen": spec.pcie_generation,
        "pcie_width": pcie_width,
        "pcie_max_width": PCIE_WIDTH,
    }
    return str(integers[kind])


def render_dcgm(node: SimulatedNode, window_seconds: float = 5.0) -> str:
    lines: list[str] = []
    activities = [gpu.activity(node.now, window_seconds) for gpu in node.gpus]
    labels = [_labels(node, gpu) for gpu in node.gpus]
    widths = {fault.gpu: fault.pcie_width for fault in node.scenario.node.gpu_faults}
    for field, type_, help_, kind in FIELDS:
        lines.append(f"# HELP {field} {help_}")
        lines.append(f"# TYPE {field} {type_}")
        for gpu, activity, label in zip(node.gpus, activities, labels):
            value = _value(kind, gpu, activity, widths.get(gpu.index, PCIE_WIDTH))
            lines.append(f"{field}{{{label}}} {value}")
    return "\n".join(lines) + "\n"


def _labels(node: SimulatedNode, gpu: GpuDevice) -> str:
    pairs = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("pci_bus_id", gpu.pci_bus_id),
        ("device", f"nvidia{gpu.index}"),
        ("modelName", gpu.spec.model_name),
        ("Hostname", node.scenario.node.hostname),
        ("DCGM_FI_DRIVER_VERSION", node.scenario.node.driver_version),
    ]
    if gpu.engine is not None:
        container = node.replicas[gpu.engine].engine_type
        pairs += [("container", container), ("namespace", POD_NAMESPACE), ("pod", pod_name(node, gpu.engine))]
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def pod_name(node: SimulatedNode, replica: int) -> str:
    """The pod an engine replica runs in (the same name in the JSON index), named after its engine."""
    engine = node.replicas[replica]
    model = engine.model.key.replace(".", "-")
    if node.scenario.disaggregation is not None:  # a prefill or decode pool's pod, as its deployment names it
        return f"{engine.engine_type}-{model}-{engine.role}-{replica}"
    return f"{engine.engine_type}-{model}-{replica}"
