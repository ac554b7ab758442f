"""Ingest Intel's Gaudi Prometheus metric exporter (`--gpu gaudi-exporter=URL`, port 41611 by default).

Names and units from docs.habana.ai "Prometheus Metric Exporter" and the exporter's metric table:
`habanalabs_utilization` in percent, memory in bytes, power in mW, temperatures in °C. The public
documentation shows no complete label schema, so the device is read from the first of several label
names (`device`, `index`, `minor`, `bus_id`; `UUID`/`serial` for its stable id). The PCIe counters'
units are not documented either (⚠ docs/metrics.md), so they stay unmapped, as does any
memory-bandwidth signal: the exporter has none, and the diagnosis says so (docs/diagnosis.md).
"""

from __future__ import annotations

from exporter.sources.device_exporter import DeviceExporterSource, DeviceExporterSpec
from exporter.sources.gpu_common import PERCENT

GAUDI_EXPORTER = DeviceExporterSpec(
    vendor="gaudi",
    metrics={
        "habanalabs_utilization": ("llm_gpu_utilization_ratio", PERCENT),
        "habanalabs_memory_used_bytes": ("llm_gpu_memory_used_bytes", 1.0),
        "habanalabs_memory_total_bytes": ("llm_gpu_memory_total_bytes", 1.0),
        "habanalabs_power_mW": ("llm_gpu_power_watts", 1e-3),
        "habanalabs_temperature_onchip": ("llm_gpu_temperature_celsius", 1.0),
        "habanalabs_clock_soc_mhz": ("llm_gpu_sm_clock_hertz", 1e6),
    },
    index_labels=("device", "index", "minor", "bus_id"),
    uuid_labels=("UUID", "uuid", "serial"),
    model_labels=("model_name", "model", "product_name"),
    id_labels={"bus_id": "pci_bus_id"},
    pod_labels=(("namespace",), ("pod",), ("container",)),
    presence=("habanalabs_memory_free_bytes", "habanalabs_temperature_onboard"),
)


class GaudiExporterSource(DeviceExporterSource):
    name = "gaudi-exporter"
    spec = GAUDI_EXPORTER
