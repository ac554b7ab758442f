"""The links source: what the node's RDMA NICs trained to and how their fabric is configured.

The RDMA source (rdma.py) reads traffic and congestion; this one reads the facts that say whether a
link runs below its capability or its configuration drifted (shared/research/field-2026.md §5.3,
§5.4), as raw material for the node's health findings (exporter/health/):

- each NIC's PCIe link against its own and its slot's maximum (exporter/sysfs/links.py);
- each port's physical state and its flap and signal-integrity counters (`link_downed`,
  `link_error_recovery`, `symbol_error`, `local_link_integrity_errors`,
  `excessive_buffer_overrun_errors`), apart, where the RDMA source sums them into one error kind;
- on RoCE ports, the ECN switches of the RoCE priority (`health.roce_priority`: the one the
  fabric runs RDMA on and the only one judged; the other seven would be 14 series a port of no
  use), the QoS trust mode, and the per-priority PFC pause counters and pause-storm events of the
  driver's ethtool statistics.

These change rarely, so the files are read every `refresh_seconds` (30 s by default) and the samples
of the last read served in between. The ethtool statistics are read through the kernel's ethtool
interface by pyroute2 (`IoctlEthtool.get_statistics`, the `ethtool -S` strings and values): the
per-priority driver counters are not in the ethtool netlink statistics groups, only there.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping

from exporter.model import Metric, Sample
from exporter.sources.base import Source
from exporter.sources.node.registry import NODE_SOURCES, NodeContext, NodeSource
from exporter.sysfs.infiniband import class_path, read_port
from exporter.sysfs.links import PciLink, read_ecn, read_pci_link, read_trust

log = logging.getLogger(__name__)

#: IBA PMA counters that count a link going down, retraining, or bit errors on the wire
LINK_COUNTERS = frozenset(
    {
        "link_downed",
        "link_error_recovery",
        "symbol_error",
        "local_link_integrity_errors",
        "excessive_buffer_overrun_errors",
    }
)
_PAUSE = re.compile(r"^(rx|tx)_prio(\d)_pause(_duration)?$")
_STORM = re.compile(r"^tx_pause_storm_(warning|error)_events$")
_MICROSECONDS = 1e-6
EthtoolStats = Callable[[str], Mapping[str, int]]


def pyroute2_statistics(netdev: str) -> Mapping[str, int]:
    """`ethtool -S <netdev>` as a mapping, through pyroute2's ethtool ioctl (ETHTOOL_GSTATS)."""
    from pyroute2.ethtool.ioctl import IoctlEthtool

    reader = IoctlEthtool(netdev)
    try:
        return dict(reader.get_statistics())
    finally:
        reader.close()


class LinkHealthSource(Source):
    name = "links"
    timeout_seconds = 5.0

    def __init__(
        self,
        sysfs: str,
        refresh_seconds: float = 30.0,
        ethtool_stats: EthtoolStats = pyroute2_statistics,
        roce_priority: int = 3,
    ) -> None:
        self._sysfs = sysfs
        self._roce_priority = roce_priority
        self._refresh_seconds = refresh_seconds
        self._ethtool_stats = ethtool_stats
        self._read_at: float | None = None
        self._samples: list[Metric] = []
        self._reported: set[str] = set()

    def collect(self, now: float) -> list[Metric]:
        if self._read_at is None or now - self._read_at >= self._refresh_seconds:
            self._samples = list(self._read())
            self._read_at = now
        return self._samples

    def _read(self) -> Iterator[Sample]:
        root = class_path(self._sysfs)
        for device in _listdir(root):
            device_dir = os.path.join(root, device)
            link = read_pci_link(os.path.join(device_dir, "device"))
            if link is not None:
                yield from pci_samples("llm_rdma_device_pcie_link", {"device": device, "address": link.address}, link)
            for entry in _listdir(os.path.join(device_dir, "ports")):
                if entry.isdigit():
                    yield from self._port(os.path.join(device_dir, "ports", entry), device, int(entry))

    def _port(self, path: str, device: str, number: int) -> Iterator[Sample]:
        port = read_port(
            path, device, number, {"counters": LINK_COUNTERS, "counters_ext": frozenset(), "hw_counters": frozenset()}
        )
        if port is None:
            return
        labels = {"device": device, "port": str(number)}
        if port.phys_state is not None:
            yield Sample("llm_rdma_port_physical_state", labels, float(port.phys_state.id))
        for counter, value in sorted(port.counters.items()):
            yield Sample("llm_rdma_port_link_errors_total", {**labels, "counter": counter}, float(value))
        if port.netdev is None:
            return
        with_netdev = {**labels, "netdev": port.netdev}
        for (point, priority), enabled in sorted(read_ecn(self._sysfs, port.netdev).items()):
            if priority != self._roce_priority:
                continue
            ecn = {**with_netdev, "point": point.removeprefix("roce_"), "priority": str(priority)}
            yield Sample("llm_rdma_port_ecn_enabled", ecn, 1.0 if enabled else 0.0)
        trust = read_trust(self._sysfs, port.netdev)
        if trust is not None:
            yield Sample("llm_rdma_port_qos_info", {**with_netdev, "trust": trust}, 1.0)
        yield from self._pause(port.netdev, with_netdev)

    def _pause(self, netdev: str, labels: dict[str, str]) -> Iterator[Sample]:
        try:
            stats = self._ethtool_stats(netdev)
        except Exception as exc:  # no such device, not supported, no permission: this netdev's stats only
            if netdev not in self._reported:
                self._reported.add(netdev)
                log.info("links: no ethtool statistics for %s (%s); its PFC pause counters are absent", netdev, exc)
            return
        for name, value in sorted(stats.items()):
            pause = _PAUSE.match(name)
            if pause is not None:
                direction, priority, duration = pause.groups()
                own = {**labels, "direction": direction, "priority": priority}
                if duration:
                    yield Sample("llm_rdma_port_pause_seconds_total", own, value * _MICROSECONDS)
                else:
                    yield Sample("llm_rdma_port_pause_frames_total", own, float(value))
                continue
            storm = _STORM.match(name)
            if storm is not None:
                yield Sample(
                    "llm_rdma_port_pause_storm_events_total", {**labels, "level": storm.group(1)}, float(value)
                )


def pci_samples(prefix: str, labels: Mapping[str, str], link: PciLink) -> Iterator[Sample]:
    """`<prefix>_generation` and `<prefix>_width` by `bound`: current (trained), max (what device
    and slot allow together) and device_max (the device's own capability)."""
    for suffix, bounds in (
        ("generation", (("current", link.generation), ("max", link.max_generation))),
        ("width", (("current", link.width), ("max", link.max_width))),
    ):
        own_max = link.device_max_generation if suffix == "generation" else link.device_max_width
        for bound, value in (*bounds, ("device_max", own_max)):
            if value is not None:
                yield Sample(f"{prefix}_{suffix}", {**labels, "bound": bound}, float(value))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _build(node: NodeContext) -> Source | None:
    """Only on a node with RDMA devices: the RDMA source's condition, its families absent otherwise."""
    if not os.path.isdir(class_path(node.sysfs)):
        return None
    return LinkHealthSource(node.sysfs, node.health.refresh_seconds, roce_priority=node.health.roce_priority)


NODE_SOURCES.register(NodeSource(LinkHealthSource.name, _build))
