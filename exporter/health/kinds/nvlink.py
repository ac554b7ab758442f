"""NVLink below its capability: links a GPU supports that are not active, link error counters
rising (CRC, replay, recovery: GPUd's NVLink checks), and the NVSwitch fabric's own
degraded-bandwidth bit where NVML reports it (`nvmlDeviceGetGpuFabricInfoV`,
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW on NVLink-switch systems)."""

from __future__ import annotations

from exporter.health import alerts
from exporter.health.finding import GPU_LINK, Finding
from exporter.health.record import FindingKind, register
from exporter.health.view import NodeView
from exporter.settings import HealthSettings

WINDOW = 300.0


def inactive(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for gpu in view.gpus.values():
        down = gpu.nvlink_links.get("inactive", 0.0)
        if down > 0:
            total = down + gpu.nvlink_links.get("active", 0.0)
            text = f"{down:.0f} of its {total:.0f} NVLink links inactive: peer traffic takes the rest (or PCIe)"
            found.append(Finding("nvlink_inactive", GPU_LINK, gpu.name, text, "nvmlDeviceGetNvLinkState", down))
        if gpu.fabric_degraded == 1.0:
            text = "the NVLink fabric reports degraded bandwidth"
            source = "nvmlDeviceGetGpuFabricInfoV health mask DEGRADED_BW"
            found.append(Finding("nvlink_inactive", GPU_LINK, gpu.name, text, source, 1.0))
    return found


def errors(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for _, labels in view.counter_keys.get("llm_gpu_nvlink_errors_total", []):
        rising = view.increase("llm_gpu_nvlink_errors_total", labels, WINDOW) or 0.0
        if rising > 0:
            kind = labels.get("kind", "")
            text = f"{rising:.0f} NVLink {kind} errors in {WINDOW / 60:.0f} minutes, all links"
            name = f"GPU {labels.get('gpu', '?')}"
            found.append(Finding("nvlink_errors", GPU_LINK, name, text, "nvmlDeviceGetNvLinkErrorCounter", rising))
    return found


register(
    FindingKind(
        "nvlink_inactive",
        GPU_LINK,
        "NVLink links down",
        inactive,
        alerts.NVLINK_DEGRADED,
        "any supported link inactive, or the fabric's DEGRADED_BW bit set (GPUd)",
    )
)
register(
    FindingKind(
        "nvlink_errors",
        GPU_LINK,
        "NVLink errors",
        errors,
        alerts.NVLINK_DEGRADED,
        "CRC flit/data, replay or recovery errors rose in 5 minutes (alerted when sustained 5 minutes)",
        reads=(("llm_gpu_nvlink_errors_total", WINDOW),),
    )
)
