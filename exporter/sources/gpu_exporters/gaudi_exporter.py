"""Ingest Intel's Gaudi Prometheus metric exporter (`--gpu gaudi-exporter=URL`, port 41611 by default).

Names, labels and units from the exporter's own source, HabanaAI/gaudi-metric-exporter @ 2d50e442
(release 1.24.0-1007): `exporter.go` sets every device series' labels to `Serial`, `UUID`, `device`
(which also holds the serial), `id` (the HLML device index), `fit`, `spi`, `driver`,
`pod_namespace` and `pod_name`; there is no PCI-address, model or container label. `rhlml` reads
`habanalabs_utilization` as HLML's AIP utilization in percent, memory in bytes, power in mW and the
SOC clock in MHz. The exporter finds a device's pod by matching the kubelet's pod-resources device
IDs against the serial (`kube.go`), so the serial is this device's ID for our own pod-resources
attribution too. Its `accelerator_power_usage_watts` carries the same milliwatt figure as
`habanalabs_power_mW` despite its name, so only the latter is read. The PCIe counters' units are
not documented (⚠ docs/metrics.md) and stay unmapped, as does any memory-bandwidth signal: the
exporter has none, and the diagnosis says so (docs/diagnosis.md).
"""

from __future__ import annotations

from exporter.sources.device_exporter import DeviceExporterSource, DeviceExporterSpec
from exporter.sources.gpu_common import PERCENT
from exporter.sources.gpu_modes import GPU_MODES, exporter_mode

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
    index_labels=("id",),
    # UUID reads "na" when HLML cannot give one; the serial is stable as well.
    uuid_labels=("UUID", "Serial"),
    pod_labels=(("pod_namespace",), ("pod_name",), ()),
    device_id_labels=("Serial",),
    presence=("habanalabs_memory_free_bytes", "habanalabs_temperature_onboard"),
)


class GaudiExporterSource(DeviceExporterSource):
    name = "gaudi-exporter"
    spec = GAUDI_EXPORTER


GPU_MODES.register(exporter_mode(GaudiExporterSource, "Intel Gaudi metric exporter", port=41611))
