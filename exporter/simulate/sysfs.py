"""A live `class/infiniband` tree under a directory, laid out as the kernel exposes it.

Paths, file contents and units follow shared/research/rdma-counters.md §1: `state` "4: ACTIVE",
`phys_state` "5: LinkUp", `rate` "400 Gb/sec (4X NDR)", `link_layer`, PMA `counters/` (data in
4-octet words) and mlx5 `hw_counters/` (with `lifespan`; the RoCE congestion counters only on an
Ethernet link layer). Each device's `device` links to its PCI function under `devices/` with its
PCIe link (`current_link_speed`/`width` and `max_link_*`, its root port's `max_link_*` above it), and
a RoCE port's netdev has its ECN switches per priority (`class/net/<netdev>/ecn/roce_np|roce_rp/
enable/<prio>`), as exporter/sysfs/links.py reads them; a fault (faults.py) shows there. Point the
exporter's `--sysfs DIR` (like node_exporter's `--path.sysfs`) at the directory. Each file is
replaced atomically (write, then rename), so a reader never sees half a number.
"""

from __future__ import annotations

import os
from pathlib import Path

from exporter.simulate.faults import PCIE_GENERATION, PCIE_WIDTH
from exporter.simulate.network import HW_COUNTERS, PMA_COUNTERS, ROCE_CONGESTION_COUNTERS, RdmaPort

FIRMWARE = "28.39.1002"  # a ConnectX-7 firmware line
HCA_TYPE = "MT4129"  # ConnectX-7
BOARD_ID = "MT_0000000838"
PCIE_SPEED = {4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
PRIORITIES = range(8)


class SysfsWriter:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        # Temporary files live outside class/ so that a reader listing a counters directory never
        # sees one; the rename into place is atomic on the same file system.
        self._scratch = self.root / ".scratch"
        self._static_done: set[str] = set()

    def write(self, ports: list[RdmaPort]) -> None:
        self._scratch.mkdir(parents=True, exist_ok=True)
        for index, port in enumerate(ports):
            device = self.root / "class" / "infiniband" / port.device
            port_dir = device / "ports" / str(port.port)
            if port.device not in self._static_done:
                self._static(device, port_dir, port, index)
                self._static_done.add(port.device)
            for name in PMA_COUNTERS:
                self._put(port_dir / "counters" / name, str(port.counter(name)))
            names = HW_COUNTERS + (ROCE_CONGESTION_COUNTERS if port.spec.link_layer == "Ethernet" else ())
            for name in names:
                self._put(port_dir / "hw_counters" / name, str(port.counter(name)))

    def _static(self, device: Path, port_dir: Path, port: RdmaPort, index: int) -> None:
        (port_dir / "counters").mkdir(parents=True, exist_ok=True)
        (port_dir / "hw_counters").mkdir(parents=True, exist_ok=True)
        guid = f"b83f:d203:00{index:02x}:{0x1A00 + index:04x}"
        for name, text in (
            ("node_type", "1: CA"),
            ("fw_ver", FIRMWARE),
            ("hca_type", HCA_TYPE),
            ("board_id", BOARD_ID),
            ("node_guid", guid),
            ("sys_image_guid", guid),
            ("node_desc", f"{port.device} HCA-{index + 1}"),
        ):
            self._put(device / name, text)
        roce = port.spec.link_layer == "Ethernet"
        for name, text in (
            ("state", "4: ACTIVE"),
            ("phys_state", "5: LinkUp"),
            ("rate", port.spec.rate_text),
            ("link_layer", port.spec.link_layer),
            ("lid", "0x0" if roce else f"0x{index + 1:x}"),
            ("sm_lid", "0x0" if roce else "0x1"),
            ("lid_mask_count", "0"),
            ("sm_sl", "0"),
            ("cap_mask", "0x00010000" if roce else "0x2651e848"),
        ):
            self._put(port_dir / name, text)
        self._put(port_dir / "hw_counters" / "lifespan", "10")
        self._pci(device, port, index)
        if roce:
            ndevs = port_dir / "gid_attrs" / "ndevs"
            ndevs.mkdir(parents=True, exist_ok=True)
            self._put(ndevs / "0", f"rdma{index}")
            for point in ("roce_np", "roce_rp"):
                enable = self.root / "class" / "net" / f"rdma{index}" / "ecn" / point / "enable"
                enable.mkdir(parents=True, exist_ok=True)
                for priority in PRIORITIES:
                    self._put(enable / str(priority), "1" if port.ecn_enabled else "0")

    def _pci(self, device: Path, port: RdmaPort, index: int) -> None:
        """The NIC's PCI function below its root port, and `device` linking to it."""
        slot = self.root / "devices" / "pci0000:00" / f"0000:00:{index + 1:02x}.0"
        function = slot / f"0000:{0x10 + index:02x}:00.0"
        function.mkdir(parents=True, exist_ok=True)
        speed = PCIE_SPEED[PCIE_GENERATION]
        for directory, name, text in (
            (slot, "max_link_speed", speed),
            (slot, "max_link_width", str(PCIE_WIDTH)),
            (function, "max_link_speed", speed),
            (function, "max_link_width", str(PCIE_WIDTH)),
            (function, "current_link_speed", speed),
            (function, "current_link_width", str(port.pcie_width)),
        ):
            self._put(directory / name, text)
        link = device / "device"
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(function, device))

    def _put(self, path: Path, text: str) -> None:
        temporary = self._scratch / "value"
        temporary.write_text(text + "\n", encoding="ascii")
        os.replace(temporary, path)
