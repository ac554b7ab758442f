"""Read what a NIC's links were configured and trained to: its PCIe link and its RoCE ECN switches.

- PCIe (`/sys/bus/pci/devices/<bdf>/`, reached from `class/infiniband/<dev>/device`):
  `current_link_speed` ("16.0 GT/s PCIe"), `current_link_width` ("8"), `max_link_speed`,
  `max_link_width` are the device's LnkSta and LnkCap. The port above it (the parent directory:
  a root or switch downstream port) has its own `max_link_*`: what the slot can train to. So a
  link below min(device, slot) trained down, and a slot below the device limits it by design.
- ECN (DCQCN) per priority, mlx5 (MLNX_OFED / DOCA "ECN configuration"):
  `class/net/<netdev>/ecn/roce_np/enable/<prio>` (notification point: marks and sends CNPs) and
  `…/roce_rp/enable/<prio>` (reaction point: slows down on CNPs), "1" enabled.
- Trust mode: MLNX_OFED's `class/net/<netdev>/qos/trust` ("pcp" or "dscp") where the driver has
  it; upstream kernels set it through DCB netlink only, and then it is not read (None).

A file that is absent or unreadable leaves its value out, as every reader in this package does.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: PCIe transfer rate per lane (GT/s, as the kernel prints it) -> generation
PCIE_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
ECN_POINTS = ("roce_np", "roce_rp")


@dataclass(frozen=True, slots=True)
class PciLink:
    """A PCI device's link: generation and width, trained (current), its own maximum and its slot's.

    None where the kernel did not say (a virtual function has no link files; a root-complex
    integrated device has no port above it).
    """

    address: str
    generation: int | None = None
    width: int | None = None
    device_max_generation: int | None = None
    device_max_width: int | None = None
    slot_max_generation: int | None = None
    slot_max_width: int | None = None

    @property
    def max_generation(self) -> int | None:
        """What the device and its slot can train to together."""
        return _lowest(self.device_max_generation, self.slot_max_generation)

    @property
    def max_width(self) -> int | None:
        return _lowest(self.device_max_width, self.slot_max_width)


def _lowest(a: int | None, b: int | None) -> int | None:
    known = [x for x in (a, b) if x is not None]
    return min(known) if known else None


def parse_generation(text: str | None) -> int | None:
    """ "16.0 GT/s PCIe" (or older kernels' "16 GT/s") -> 4; "Unknown" and anything else -> None."""
    if text is None:
        return None
    match = _SPEED.match(text)
    return PCIE_GENERATIONS.get(float(match.group(1))) if match else None


def parse_width(text: str | None) -> int | None:
    try:
        width = int(text or "")
    except ValueError:
        return None
    return width if width > 0 else None  # 0 and 255 mean "unknown" / link down on some devices


def read_pci_link(device_link: str) -> PciLink | None:
    """The link of the PCI device `device_link` points at (`class/infiniband/<dev>/device`); None
    when it is not a PCI device with link files."""
    path = os.path.realpath(device_link)
    generation = parse_generation(_read(path, "current_link_speed"))
    width = parse_width(_read(path, "current_link_width"))
    device_max_generation = parse_generation(_read(path, "max_link_speed"))
    device_max_width = parse_width(_read(path, "max_link_width"))
    if generation is None and width is None and device_max_generation is None:
        return None
    parent = os.path.dirname(path)
    return PciLink(
        address=os.path.basename(path),
        generation=generation,
        width=width,
        device_max_generation=device_max_generation,
        device_max_width=device_max_width,
        slot_max_generation=parse_generation(_read(parent, "max_link_speed")),
        slot_max_width=parse_width(_read(parent, "max_link_width")),
    )


def read_ecn(sysfs: str, netdev: str) -> dict[tuple[str, int], bool]:
    """(point, priority) -> enabled, for every `ecn/<point>/enable/<prio>` file the netdev has."""
    found: dict[tuple[str, int], bool] = {}
    for point in ECN_POINTS:
        directory = os.path.join(sysfs, "class", "net", netdev, "ecn", point, "enable")
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            text = _read(directory, name)
            if name.isdigit() and text in ("0", "1"):
                found[(point, int(name))] = text == "1"
    return found


def read_trust(sysfs: str, netdev: str) -> str | None:
    """The netdev's QoS trust mode ("pcp", "dscp") where the driver exposes it in sysfs."""
    text = _read(os.path.join(sysfs, "class", "net", netdev, "qos"), "trust")
    return text.lower() if text else None


def _read(directory: str, name: str) -> str | None:
    try:
        with open(os.path.join(directory, name), encoding="ascii", errors="replace") as handle:
            return handle.read(4096).strip()
    except OSError:
        return None
