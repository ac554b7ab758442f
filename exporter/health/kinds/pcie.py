"""PCIe links below their capability: a GPU (judged only while busy: an idle GPU trains its link
down to save power, hwloc #653, NVSentinel #890) or an RDMA NIC (judged always: a NIC keeps its
trained link while idle) whose link trained below what it and its slot allow, and apart from that,
a slot that limits the device by design."""

from __future__ import annotations

from exporter.health import alerts
from exporter.health.finding import GPU_LINK, NETWORK, Finding
from exporter.health.record import FindingKind, register
from exporter.health.view import Bounds, NodeView
from exporter.settings import HealthSettings

GPU_SOURCE = "llm_gpu_pcie_link_* (NVML Curr/MaxPcieLinkGeneration, Width; DCGM fields 235-238)"


def link_text(generation: float | None, width: float | None) -> str:
    gen = f"Gen{generation:.0f}" if generation is not None else "Gen?"
    return f"{gen} x{width:.0f}" if width is not None else gen


def _below(bounds: Bounds) -> tuple[bool, float] | None:
    """(trained down, the figure: current width, else current generation), None if unknown."""
    gen, width = bounds.generation, bounds.width
    narrow = "current" in width and "max" in width and width["current"] < width["max"]
    slow = "current" in gen and "max" in gen and gen["current"] < gen["max"]
    if not ("current" in gen or "current" in width):
        return None
    return narrow or slow, width.get("current", gen.get("current", 0.0))


def downtrained(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for gpu in view.gpus.values():
        below = _below(gpu.pcie)
        if below is None or not below[0] or gpu.busy is None or gpu.busy < s.gpu_busy_ratio:
            continue
        now = link_text(gpu.pcie.generation.get("current"), gpu.pcie.width.get("current"))
        able = link_text(gpu.pcie.generation.get("max"), gpu.pcie.width.get("max"))
        text = f"PCIe {now} while busy ({gpu.busy:.2f}), trained below the {able} it and its slot allow"
        found.append(Finding("pcie_downtrained", GPU_LINK, gpu.name, text, GPU_SOURCE, below[1]))
    for device, bounds in sorted(view.nics.items()):
        below = _below(bounds)
        if below is None or not below[0]:
            continue
        now = link_text(bounds.generation.get("current"), bounds.width.get("current"))
        able = link_text(bounds.generation.get("max"), bounds.width.get("max"))
        text = f"NIC PCIe {now}, trained below the {able} it and its slot allow: its RDMA bandwidth is capped"
        source = "sysfs current_link_speed/current_link_width against max_link_*"
        found.append(Finding("pcie_downtrained", NETWORK, device, text, source, below[1]))
    return found


def slot_limited(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    subjects = [(gpu.name, gpu.pcie, GPU_LINK, "GPU", GPU_SOURCE) for gpu in view.gpus.values()]
    subjects += [
        (device, bounds, NETWORK, "NIC", "sysfs max_link_* of the device against its upstream port's")
        for device, bounds in sorted(view.nics.items())
    ]
    for name, bounds, topic, what, source in subjects:
        for part, values in (("generation", bounds.generation), ("width", bounds.width)):
            slot, own = values.get("max"), values.get("device_max")
            if slot is not None and own is not None and slot < own:
                shown = (f"Gen{slot:.0f}", f"Gen{own:.0f}") if part == "generation" else (f"x{slot:.0f}", f"x{own:.0f}")
                text = f"the slot allows PCIe {shown[0]}, the {what} itself {shown[1]}: limited by where it sits"
                found.append(Finding("pcie_slot_limited", topic, name, text, source, slot))
    return found


register(
    FindingKind(
        "pcie_downtrained",
        GPU_LINK,
        "PCIe link trained down",
        downtrained,
        alerts.PCIE_DEGRADED,
        "current generation or width below the maximum device and slot allow; GPUs only while busy "
        "(`gpu_busy_ratio`, 0.1: NVSentinel #890 excludes idle GPUs)",
    )
)
register(
    FindingKind(
        "pcie_slot_limited",
        GPU_LINK,
        "PCIe slot below the device",
        slot_limited,
        alerts.PCIE_SLOT_LIMITED,
        "the slot's maximum below the device's own (NVML MaxPcieLinkGeneration below GpuMaxPcieLinkGeneration; "
        "a NIC's upstream port below its max_link_*)",
    )
)
