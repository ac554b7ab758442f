"""Ingest an existing dcgm-exporter: scrape its /metrics and map it to `llm_gpu_*`.

For nodes that already run NVIDIA's dcgm-exporter (the GPU Operator default): it holds the node's
one DCGM profiling session, so we read its output rather than open a second one. Both the metric
names dcgm-exporter has always used and DCGM 4.6's renamed ones are read (same field IDs, same
units). Label quirks across versions: `UUID` (or `uuid` with --use-old-namespace), `Hostname`
(before PR #655) or `hostname` — dropped, as Prometheus' own target labels name the node — and
empty `pod=""` meaning unassigned. MIG instances keep their `GPU_I_ID`/`GPU_I_PROFILE` as
`gpu_i_id`/`gpu_i_profile`. DCGM's blank sentinels (values ≥ 2^47) are dropped, never exported.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.attribution import PodContainer
from exporter.promtext import LabelKey, ParsedSamples, parse_wanted
from exporter.sources.device_exporter import ExporterIngest
from exporter.sources.gpu_common import MIB, PERCENT, GpuReading, Scale, scaled
from exporter.sources.gpu_modes import GPU_MODES, exporter_mode

# (family, scale) by dcgm-exporter metric name; old name first, DCGM 4.6 name second.
_PERCENT, _RATIO = PERCENT, 1.0
METRICS: dict[str, tuple[str, Scale]] = {
    # DCGM_FI_DEV_GPU_UTIL (203) is NVML utilization.gpu in percent under either name.
    "DCGM_FI_DEV_GPU_UTIL": ("llm_gpu_utilization_ratio", _PERCENT),
    "DCGM_FI_DEV_GPU_UTIL_RATIO": ("llm_gpu_utilization_ratio", _PERCENT),
    "DCGM_FI_PROF_SM_ACTIVE": ("llm_gpu_sm_active_ratio", _RATIO),
    "DCGM_FI_PROF_SM_UTIL_RATIO": ("llm_gpu_sm_active_ratio", _RATIO),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("llm_gpu_sm_occupancy_ratio", _RATIO),
    "DCGM_FI_PROF_SM_OCCUPANCY_RATIO": ("llm_gpu_sm_occupancy_ratio", _RATIO),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("llm_gpu_tensor_active_ratio", _RATIO),
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO": ("llm_gpu_tensor_active_ratio", _RATIO),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("llm_gpu_dram_active_ratio", _RATIO),
    "DCGM_FI_PROF_DRAM_UTIL_RATIO": ("llm_gpu_dram_active_ratio", _RATIO),
    "DCGM_FI_DEV_FB_USED": ("llm_gpu_memory_used_bytes", MIB),
    "DCGM_FI_DEV_FB_TOTAL": ("llm_gpu_memory_total_bytes", MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("llm_gpu_power_watts", 1.0),
    "DCGM_FI_DEV_BOARD_POWER_WATTS": ("llm_gpu_power_watts", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("llm_gpu_temperature_celsius", 1.0),
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": ("llm_gpu_temperature_celsius", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("llm_gpu_sm_clock_hertz", 1e6),
    # Rates in B/s (gauges, not counters: dcgm-exporter #87).
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("llm_gpu_pcie_transmit_bytes_per_second", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("llm_gpu_pcie_receive_bytes_per_second", 1.0),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("llm_gpu_nvlink_transmit_bytes_per_second", 1.0),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("llm_gpu_nvlink_receive_bytes_per_second", 1.0),
}
# Read only to derive the total when DCGM_FI_DEV_FB_TOTAL is not exported (the default CSV).
FB_FREE, FB_RESERVED = "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"
THROTTLE = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
# Not mapped, but in every default scrape: they still show a GPU is there (llm_gpu_up). The XID
# gauge holds only the last code, so it cannot become our per-code counter.
PRESENCE = ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", "DCGM_FI_DEV_MEM_CLOCK")
WANTED = frozenset({*METRICS, FB_FREE, FB_RESERVED, *THROTTLE, *PRESENCE})

# DCGM_FP64_BLANK = 2^47; every INT64 blank (≥ 0x7ffffffffffffff0) and the FP64 blank times 100
# seen in the wild are above it, and no real reading of these fields comes near it.
BLANK_THRESHOLD = float(2**47)

_POD_LABELS = (
    ("namespace", ("namespace", "pod_namespace", "exported_namespace")),
    ("pod", ("pod", "pod_name", "exported_pod")),
    ("container", ("container", "container_name", "exported_container")),
)

GpuKey = tuple[str, str, str]


def is_blank(value: float) -> bool:
    return value != value or value >= BLANK_THRESHOLD


def _first(labels: dict[str, str], names: Iterable[str]) -> str:
    for name in names:
        if labels.get(name):
            return labels[name]
    return ""


def readings_from_text(
    text: str, max_series: int | None = None
) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
    """One reading per GPU (or MIG instance) in a dcgm-exporter payload, with its pods."""
    return readings_from_parsed(parse_wanted(text, WANTED, max_series))


def readings_from_parsed(parsed: ParsedSamples) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
    """`readings_from_text` of a payload already parsed for WANTED."""
    readings: dict[GpuKey, GpuReading] = {}
    owners: dict[GpuKey, set[PodContainer]] = {}
    extras: dict[GpuKey, dict[str, float]] = {}

    def reading_for(label_key: LabelKey) -> tuple[GpuKey, GpuReading] | None:
        labels = dict(label_key)
        index = labels.get("gpu", "")
        if not index:
            return None
        uuid = _first(labels, ("UUID", "uuid"))
        instance = labels.get("GPU_I_ID", "")
        key = (index, uuid, instance)
        if key not in readings:
            reading = GpuReading(index, uuid, _first(labels, ("modelName", "model_name")))
            if instance:
                reading.labels["gpu_i_id"] = instance
                reading.labels["gpu_i_profile"] = labels.get("GPU_I_PROFILE", "")
            readings[key], owners[key], extras[key] = reading, set(), {}
        pod = {label: _first(labels, names) for label, names in _POD_LABELS}
        if pod["pod"]:  # pod="" is dcgm-exporter's "no pod holds this GPU"
            owners[key].add(PodContainer(pod["namespace"], pod["pod"], pod["container"]))
        return key, readings[key]

    for name in sorted(parsed):
        for label_key, value in parsed[name].items():
            found = reading_for(label_key)
            if found is None or is_blank(value):
                continue
            key, reading = found
            if name in METRICS:
                family, scale = METRICS[name]
                reading.set(family, scaled(value, scale))
            elif name in THROTTLE:
                reading.throttle_reasons = int(value)
            else:
                extras[key][name] = value
    for key, reading in readings.items():
        used = reading.values.get("llm_gpu_memory_used_bytes")
        free = extras[key].get(FB_FREE)
        if "llm_gpu_memory_total_bytes" not in reading.values and used is not None and free is not None:
            # FB total = used + free + reserved (DCGM's FB fields, in MiB).
            reading.set("llm_gpu_memory_total_bytes", used + (free + extras[key].get(FB_RESERVED, 0.0)) * MIB)
    ordered = sorted(readings, key=lambda k: (_index_order(k[0]), k[1], _index_order(k[2])))
    return [readings[k] for k in ordered], [frozenset(owners[k]) for k in ordered]


def _index_order(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


class DcgmExporterSource(ExporterIngest):
    name = "dcgm-exporter"

    def wanted(self) -> frozenset[str]:
        return WANTED

    def readings(self, parsed: ParsedSamples) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
        readings, owners = readings_from_parsed(parsed)
        for reading, pods in zip(readings, owners):
            for label, values in (
                ("namespace", {p.namespace for p in pods}),
                ("pod", {p.pod for p in pods}),
                ("container", {p.container for p in pods}),
            ):
                values.discard("")
                if values:
                    reading.labels[label] = ",".join(sorted(values))
        return readings, owners


GPU_MODES.register(exporter_mode(DcgmExporterSource, "dcgm-exporter", port=9400, vendor="nvidia"))
