"""Ingest AMD's ROCm device-metrics-exporter (`--gpu amd-exporter=URL`, port 5000 by default).

Names and units from ROCm/device-metrics-exporter `docs/configuration/metricslist.md` (wire names are
its upper-case field names lowercased): activities in percent (0-100), VRAM in MB (MiB), power in W,
XGMI link data accumulated in KB per `link_index`. In partitioned modes (CPX/DPX/QPX) each partition is
its own `gpu_id` with a `gpu_partition_id`; activity, power and temperature are reported on the
primary partition only, so the others simply lack them. Pod labels are empty strings until the
exporter's Kubernetes integration assigns the GPU to a pod. `MetricsFieldPrefix` (configmap.md) may
put a prefix such as `amd_` before every name; the `amd_` one is read too.
"""

from __future__ import annotations

from exporter.sources.device_exporter import DeviceExporterSource, DeviceExporterSpec, LabelledFamily
from exporter.sources.gpu_common import MIB, PERCENT
from exporter.sources.gpu_modes import GPU_MODES, exporter_mode

KIB = 1024.0

AMD_EXPORTER = DeviceExporterSpec(
    vendor="amd",
    metrics={
        # Graphics-engine busy percent: the counterpart of NVML's "a kernel was running" utilization.
        "gpu_gfx_activity": ("llm_gpu_utilization_ratio", PERCENT),
        # Memory-controller (UMC) busy percent: AMD's counterpart of DRAM active (docs/diagnosis.md).
        "gpu_umc_activity": ("llm_gpu_dram_active_ratio", PERCENT),
        "gpu_prof_tensor_active_percent": ("llm_gpu_tensor_active_ratio", PERCENT),
        "gpu_prof_occupancy_percent": ("llm_gpu_sm_occupancy_ratio", PERCENT),
        "gpu_used_vram": ("llm_gpu_memory_used_bytes", MIB),
        "gpu_total_vram": ("llm_gpu_memory_total_bytes", MIB),
        # MI3xx report socket power, MI2xx and Radeon average power; GPU_POWER_USAGE on both.
        "gpu_package_power": ("llm_gpu_power_watts", 1.0),
        "gpu_power_usage": ("llm_gpu_power_watts", 1.0),
        "gpu_average_package_power": ("llm_gpu_power_watts", 1.0),
        # Junction (hotspot) on MI3xx, edge on MI2xx.
        "gpu_junction_temperature": ("llm_gpu_temperature_celsius", 1.0),
        "gpu_edge_temperature": ("llm_gpu_temperature_celsius", 1.0),
    },
    index_labels=("gpu_id",),
    uuid_labels=("gpu_uuid", "serial_number"),
    model_labels=("card_model", "card_series"),
    id_labels={
        "gpu_partition_id": "gpu_partition_id",
        "gpu_compute_partition_type": "compute_partition",
        "gpu_memory_partition_type": "memory_partition",
    },
    pod_labels=(("namespace",), ("pod",), ("container",)),
    labelled={
        "gpu_ecc_correct_total": LabelledFamily("llm_gpu_ecc_errors_total", 1.0, (("severity", "correctable"),)),
        "gpu_ecc_uncorrect_total": LabelledFamily("llm_gpu_ecc_errors_total", 1.0, (("severity", "uncorrectable"),)),
        "gpu_xgmi_link_tx": LabelledFamily("llm_gpu_interconnect_transmit_bytes_total", KIB, (("link", "xgmi"),)),
        "gpu_xgmi_link_rx": LabelledFamily("llm_gpu_interconnect_receive_bytes_total", KIB, (("link", "xgmi"),)),
    },
    health=("gpu_health",),
    presence=("gpu_free_vram", "gpu_clock"),
    optional_prefixes=("amd_",),
)


class AmdExporterSource(DeviceExporterSource):
    name = "amd-exporter"
    spec = AMD_EXPORTER


GPU_MODES.register(exporter_mode(AmdExporterSource, "AMD device-metrics-exporter", port=5000))
