"""Ingest Huawei's Ascend npu-exporter (`--gpu ascend-exporter=URL`, port 8082 by default).

Names from Ascend/mind-cluster `component/npu-exporter/collector/metrics/` (`collector_for_hbm.go`,
`collector_for_utilization.go`, `collector_for_npu.go`, `collector_for_hccs.go`): utilizations in
percent, HBM (and the 310 series' DDR) in MB (MiB), power in W, temperature in °C,
`health_status` 1 for healthy. Devices are `id` (the logical chip), `vdie_id` their stable die id,
`model_name` the chip; `namespace`/`pod_name`/`container_name` name the pod holding the chip (empty
until one does). Samples carry timestamps, which are ignored. A reading the exporter failed to
take is written as -1 (`doUpdateMetric` in `collector/metrics/common_utils.go` turns its failure
value into `FailedMetricValue`, -1), health "Unknown" included: such a sample is dropped. RoCE
counters count packets, not bytes, and stay unmapped.
"""

from __future__ import annotations

from exporter.sources.device_exporter import DeviceExporterSource, DeviceExporterSpec, LabelledFamily
from exporter.sources.gpu_common import MIB, PERCENT
from exporter.sources.gpu_modes import GPU_MODES, exporter_mode

ASCEND_EXPORTER = DeviceExporterSpec(
    vendor="ascend",
    metrics={
        # AI Core utilization: the cube (matrix) and vector units' busy share; overall where reported.
        "npu_chip_info_utilization": ("llm_gpu_utilization_ratio", PERCENT),
        "npu_chip_info_cube_utilization": ("llm_gpu_tensor_active_ratio", PERCENT),
        # HBM bandwidth utilization: Ascend's counterpart of DRAM active (docs/diagnosis.md).
        "npu_chip_info_hbm_bandwidth_utilization": ("llm_gpu_dram_active_ratio", PERCENT),
        "npu_chip_info_hbm_used_memory": ("llm_gpu_memory_used_bytes", MIB),
        "npu_chip_info_hbm_total_memory": ("llm_gpu_memory_total_bytes", MIB),
        # Atlas 300/310 series have DDR, not HBM: the same families, read only where HBM is absent.
        "npu_chip_info_used_memory": ("llm_gpu_memory_used_bytes", MIB),
        "npu_chip_info_total_memory": ("llm_gpu_memory_total_bytes", MIB),
        "npu_chip_info_power": ("llm_gpu_power_watts", 1.0),
        "npu_chip_info_temperature": ("llm_gpu_temperature_celsius", 1.0),
        "npu_chip_info_aicore_current_freq": ("llm_gpu_sm_clock_hertz", 1e6),
    },
    index_labels=("id",),
    uuid_labels=("vdie_id",),
    model_labels=("model_name",),
    id_labels={"pcie_bus_info": "pci_bus_id"},
    pod_labels=(("namespace",), ("pod_name",), ("container_name",)),
    labelled={
        "npu_chip_info_hbm_ecc_total_single_bit_error_cnt": LabelledFamily(
            "llm_gpu_ecc_errors_total", 1.0, (("severity", "correctable"),)
        ),
        "npu_chip_info_hbm_ecc_total_double_bit_error_cnt": LabelledFamily(
            "llm_gpu_ecc_errors_total", 1.0, (("severity", "uncorrectable"),)
        ),
    },
    health=("npu_chip_info_health_status",),
    presence=("npu_chip_info_error_code",),
    failed_values=frozenset({-1.0}),
)


class AscendExporterSource(DeviceExporterSource):
    name = "ascend-exporter"
    spec = ASCEND_EXPORTER


GPU_MODES.register(exporter_mode(AscendExporterSource, "Huawei Ascend npu-exporter", port=8082))
