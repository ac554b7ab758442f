"""The node's GPUs as AMD's device-metrics-exporter serves them on :5000/metrics (AMD nodes).

Names, units and label set are the exporter's (ROCm/device-metrics-exporter
docs/configuration/metricslist.md; the label set of the captures in tests/fixtures/amd-exporter):
activities in percent (0-100) as integers, VRAM in MB, power in W, XGMI data accumulated in KB per
link (the simulator's XGMI traffic spread evenly over 7 links), health 1. Every GPU is one SPX/NPS1
partition, `gpu_partition_id="0"`. Pod labels are set for GPUs that carry an engine, empty
otherwise, as the exporter prints them. UMC activity is the simulated HBM busy share, the same
number an NVIDIA node serves as DCGM_FI_PROF_DRAM_ACTIVE.
"""

from __future__ import annotations

from exporter.simulate.dcgm_text import POD_NAMESPACE, pod_name
from exporter.simulate.gpu import GpuActivity, GpuDevice
from exporter.simulate.node import SimulatedNode

MB = 1024 * 1024
XGMI_LINKS = 7

# (name, help, kind)
FIELDS = (
    ("gpu_gfx_activity", "Graphics engine usage in Percentage (0-100)", "gfx"),
    ("gpu_umc_activity", "Memory engine usage in Percentage (0-100)", "umc"),
    ("gpu_prof_tensor_active_percent", "MFMA Utilization Unit percent", "tensor"),
    ("gpu_prof_occupancy_percent", "GPU Occupancy as Percentage of maximum", "occupancy"),
    ("gpu_total_vram", "Total VRAM memory of the GPU (in MB)", "vram_total"),
    ("gpu_used_vram", "Used VRAM memory of the GPU (in MB)", "vram_used"),
    ("gpu_free_vram", "Free VRAM memory of the GPU (in MB)", "vram_free"),
    ("gpu_package_power", "Current socket power in Watts", "power"),
    ("gpu_junction_temperature", "Current junction/hotspot temperature in Celsius", "temperature"),
    ("gpu_ecc_correct_total", "Total Correctable ECC error count", "zero"),
    ("gpu_ecc_uncorrect_total", "Total Uncorrectable ECC error count", "zero"),
    ("gpu_health", "Health of the GPU (0 = Unhealthy | 1 = Healthy)", "health"),
)


def _value(kind: str, gpu: GpuDevice, activity: GpuActivity) -> str:
    percents = {
        "gfx": activity.utilization,
        "umc": activity.dram_active,
        "tensor": activity.tensor_active,
        "occupancy": activity.sm_occupancy,
    }
    if kind in percents:
        return str(round(100 * percents[kind]))
    if kind == "power":
        return str(round(gpu.power_watts))
    integers = {
        "vram_total": gpu.spec.hbm_bytes // MB,
        "vram_used": gpu.memory_used_bytes // MB,
        "vram_free": (gpu.spec.hbm_bytes - gpu.memory_used_bytes) // MB,
        "temperature": round(gpu.temperature_celsius),
        "zero": 0,
        "health": 1,
    }
    return str(integers[kind])


def render_amd(node: SimulatedNode, window_seconds: float = 5.0) -> str:
    lines: list[str] = []
    activities = [gpu.activity(node.now, window_seconds) for gpu in node.gpus]
    labels = [_labels(node, gpu) for gpu in node.gpus]
    for name, help_, kind in FIELDS:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for gpu, activity, label in zip(node.gpus, activities, labels):
            lines.append(f"{name}{{{label}}} {_value(kind, gpu, activity)}")
    for name, help_ in (
        ("gpu_xgmi_link_rx", "XGMI Link Data Read in KB"),
        ("gpu_xgmi_link_tx", "XGMI Link Data Write in KB"),
    ):
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for gpu, label in zip(node.gpus, labels):
            per_link_kb = gpu.counters.nvlink_bytes / 2 / XGMI_LINKS / 1024
            for link in range(XGMI_LINKS):
                lines.append(f'{name}{{{label},link_index="{link}"}} {per_link_kb:.0f}')
    return "\n".join(lines) + "\n"


def _labels(node: SimulatedNode, gpu: GpuDevice) -> str:
    held = gpu.engine is not None
    pairs = [
        ("card_model", ""),
        ("card_series", gpu.spec.model_name),
        ("card_vendor", "Advanced Micro Devices, Inc. [AMD/ATI]"),
        ("container", node.replicas[gpu.engine].engine_type if gpu.engine is not None else ""),
        ("driver_version", node.scenario.node.driver_version),
        ("gpu_compute_partition_type", "spx"),
        ("gpu_id", str(gpu.index)),
        ("gpu_memory_partition_type", "nps1"),
        ("gpu_partition_id", "0"),
        ("gpu_uuid", gpu.uuid.removeprefix("GPU-")),
        ("hostname", node.scenario.node.hostname),
        ("job_id", ""),
        ("namespace", POD_NAMESPACE if held else ""),
        ("pod", pod_name(node, gpu.engine) if gpu.engine is not None else ""),
        ("serial_number", ""),
    ]
    return ",".join(f'{k}="{v}"' for k, v in pairs)
