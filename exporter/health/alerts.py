"""The findings' alerts, declared once: several kinds share one page (a NIC and a GPU trained down
are one runbook). Severities sit below the stages': a link below its capability pages as a warning
even while no stage fires, the slot that limits a device by design is information."""

from __future__ import annotations

from exporter.health.record import FindingAlert

_WHAT = "{{ $labels.kind }} on {{ $labels.device }} ({{ $labels.source }})"

PCIE_DEGRADED = FindingAlert(
    "LLMPCIeLinkDegraded",
    "warning",
    "5m",
    "A busy GPU's or an RDMA NIC's PCIe link trained below its capability.",
    f"{_WHAT}: trained to {{{{ $value }}}} lanes or generation below what device and slot allow; "
    "its bandwidth is cut with no counter moving.",
)
PCIE_SLOT_LIMITED = FindingAlert(
    "LLMPCIeSlotLimited",
    "info",
    "30m",
    "A device sits in a PCIe slot below its own capability.",
    f"{_WHAT}: the slot allows {{{{ $value }}}} (generation or lanes), below the device's own maximum.",
)
PORT_DEGRADED = FindingAlert(
    "LLMRDMAPortDegraded",
    "warning",
    "5m",
    "An RDMA port runs below the expected rate or is not linked up.",
    f"{_WHAT}: {{{{ $value }}}} of the expected rate (or its physical state is not LinkUp).",
)
LINK_FLAPPING = FindingAlert(
    "LLMRDMALinkFlapping",
    "warning",
    "0s",
    "An RDMA link goes down, retrains or counts symbol errors past the published lines.",
    f"{_WHAT}: {{{{ $value }}}} events in the window the line is stated over.",
)
NVLINK_DEGRADED = FindingAlert(
    "LLMNVLinkDegraded",
    "warning",
    "5m",
    "A GPU's NVLink links are down, count errors, or its fabric reports degraded bandwidth.",
    f"{_WHAT}: {{{{ $value }}}}.",
)
ROCE_DRIFT = FindingAlert(
    "LLMRoCEConfigDrift",
    "warning",
    "10m",
    "RoCE congestion control is not configured as the fabric expects.",
    f"{_WHAT}: {{{{ $value }}}}. Congestion will not be controlled on this port.",
)
PAUSE_STORM = FindingAlert(
    "LLMRoCEPauseStorm",
    "warning",
    "5m",
    "A RoCE port is held by PFC pause frames.",
    f"{_WHAT}: paused {{{{ $value | humanizePercentage }}}} of the time, or the NIC reported a pause storm.",
)
STUCK_LOADING = FindingAlert(
    "LLMEngineStuckLoading",
    "warning",
    "15m",
    "An engine's process runs but it has not started serving.",
    "Engine {{ $labels.device }}: its process has run for {{ $value | humanizeDuration }} without serving "
    "its metrics or a request ({{ $labels.source }}).",
)
HOST_PAUSES = FindingAlert(
    "LLMEngineHostPauses",
    "info",
    "15m",
    "An engine's host stalls it: garbage collection, CPU throttling, stolen CPU or jittery tokens.",
    f"{_WHAT}: {{{{ $value }}}}.",
)
