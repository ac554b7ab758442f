"""Links below their capability and RoCE drift, found on real sysfs trees (tests/sysfs_trees.py)
through the RDMA and links sources and the node's health checks: each named with its device and
figure, and nothing on a healthy tree."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from exporter.health.evaluate import NodeHealth
from exporter.health.finding import Finding
from exporter.model import Metric, Sample
from exporter.settings import HealthSettings
from exporter.sources.node.links import LinkHealthSource
from exporter.sources.rdma import RdmaSource
from tests.sysfs_trees import LiveTree, healthy_roce_node, write_ecn, write_pci_link, write_port

INTERVAL = 5.0


class Node:
    """The exporter's two sysfs sources over one tree, and the health checks, round by round."""

    def __init__(self, root: Path, ethtool: Mapping[str, Mapping[str, int]] | None = None, **settings: object) -> None:
        self.root = root
        self.ethtool = dict(ethtool or {})
        self.rdma = RdmaSource(str(root), window_seconds=60.0, full_read_every=1)
        self.health = NodeHealth(HealthSettings(**settings))  # type: ignore[arg-type]
        priority = self.health.settings.roce_priority
        self.links = LinkHealthSource(str(root), refresh_seconds=0.0, ethtool_stats=self._stats, roce_priority=priority)
        self.now = 1000.0
        self.metrics: list[Metric] = []

    def _stats(self, netdev: str) -> Mapping[str, int]:
        if netdev not in self.ethtool:
            raise OSError(19, "No such device")
        return self.ethtool[netdev]

    def round(self) -> list[Finding]:
        self.now += INTERVAL
        self.metrics = [*self.rdma.collect(self.now), *self.links.collect(self.now)]
        return self.health.update(self.metrics, self.now, wall=self.now).findings


def kinds(findings: list[Finding]) -> dict[tuple[str, str], Finding]:
    return {(f.kind, f.device): f for f in findings}


def test_a_healthy_node_has_no_finding(tmp_path: Path) -> None:
    node = Node(healthy_roce_node(tmp_path))
    for _ in range(3):
        assert node.round() == []
    families = {m.name for m in node.metrics}
    assert {"llm_rdma_device_pcie_link_width", "llm_rdma_port_ecn_enabled", "llm_rdma_port_physical_state"} <= families
    # Only the RoCE priority's switches (the tree has all eight): np and rp, one of each per port.
    ecn = [m.labels for m in node.metrics if m.name == "llm_rdma_port_ecn_enabled"]
    assert {labels["priority"] for labels in ecn} == {"3"} and len(ecn) == 2 * len({lb["device"] for lb in ecn})


def test_a_nic_trained_to_x8_is_named_with_its_figure_and_the_slot_apart(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path)
    write_pci_link(tmp_path, "mlx5_1", 1, current=(5, 8))  # trained down
    write_pci_link(tmp_path, "mlx5_2", 2, current=(4, 16), slot_max=(4, 16))  # a Gen4 slot: limited, not trained down
    found = kinds(Node(tmp_path).round())
    assert set(found) == {("pcie_downtrained", "mlx5_1"), ("pcie_slot_limited", "mlx5_2")}
    down = found[("pcie_downtrained", "mlx5_1")]
    assert "Gen5 x8" in down.text and "Gen5 x16" in down.text and down.value == 8
    slot = found[("pcie_slot_limited", "mlx5_2")]
    assert "Gen4" in slot.text and "Gen5" in slot.text


def test_a_port_at_half_rate_is_named_against_the_nodes_most_common_rate(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path)
    write_port(tmp_path, "mlx5_3", rate="200 Gb/sec (4X HDR)", netdev="ens4f0np0")
    found = Node(tmp_path).round()
    assert [(f.kind, f.device) for f in found] == [("port_rate_low", "mlx5_3/1")]
    assert "200 Gb/s, 50% of the 400 Gb/s expected" in found[0].text and found[0].value == 0.5


def test_a_configured_rate_is_the_expectation(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path, rate="200 Gb/sec (4X HDR)")
    found = Node(tmp_path, expected_port_rate_gbps=400.0).round()
    assert {f.device for f in found if f.kind == "port_rate_low"} == {f"mlx5_{i}/1" for i in range(4)}


def test_ecn_off_on_the_roce_priority_is_named_with_its_file(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path)
    write_ecn(tmp_path, "ens3f0np0", rp={3: False})
    write_ecn(tmp_path, "ens2f0np0", np={5: False})  # another priority: not the RoCE one
    found = Node(tmp_path).round()
    assert [(f.kind, f.device) for f in found] == [("ecn_disabled", "mlx5_2/1")]
    assert found[0].source == "/sys/class/net/ens3f0np0/ecn/roce_rp/enable/3"
    assert "reaction point" in found[0].text
    assert [(f.kind, f.device) for f in Node(tmp_path, roce_priority=5).round()] == [("ecn_disabled", "mlx5_1/1")]


def test_a_flapping_port_and_ignored_cnps_are_named_after_their_counters_rise(tmp_path: Path) -> None:
    tree = LiveTree(healthy_roce_node(tmp_path))
    node = Node(tmp_path)
    assert node.round() == []
    tree.add("mlx5_0", "counters/link_downed", 2)
    tree.add("mlx5_1", "hw_counters/rp_cnp_ignored", 40)
    found = kinds(node.round())
    assert set(found) == {("link_flapping", "mlx5_0/1"), ("cnp_ignored", "mlx5_1/1")}
    assert found[("link_flapping", "mlx5_0/1")].source == "counters/link_downed"
    assert "2 time(s)" in found[("link_flapping", "mlx5_0/1")].text
    assert found[("cnp_ignored", "mlx5_1/1")].value == 40


def test_link_error_recoveries_and_symbol_errors_past_nvsentinels_lines(tmp_path: Path) -> None:
    tree = LiveTree(healthy_roce_node(tmp_path))
    node = Node(tmp_path)
    node.round()
    tree.add("mlx5_2", "counters/link_error_recovery", 4)  # 4 in a minute: under the line of 5
    assert node.round() == []
    tree.add("mlx5_2", "counters/link_error_recovery", 3)
    tree.add("mlx5_3", "counters/symbol_error", 150)
    found = kinds(node.round())
    assert set(found) == {("link_flapping", "mlx5_2/1"), ("symbol_errors", "mlx5_3/1")}
    assert "7 link error recoveries" in found[("link_flapping", "mlx5_2/1")].text


def test_a_port_retraining_is_not_linkup(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path, ports=2)
    write_port(tmp_path, "mlx5_1", rate="400 Gb/sec (4X NDR)", phys_state="6: LinkErrorRecovery", netdev="ens2f0np0")
    found = Node(tmp_path).round()
    assert [(f.kind, f.device) for f in found] == [("port_not_linkup", "mlx5_1/1")]


def test_pfc_pause_storms_from_the_drivers_ethtool_counters(tmp_path: Path) -> None:
    healthy_roce_node(tmp_path, ports=2)
    stats = {"rx_prio3_pause": 0, "rx_prio3_pause_duration": 0, "tx_pause_storm_warning_events": 0}
    ethtool = {"ens1f0np0": dict(stats), "ens2f0np0": dict(stats)}
    node = Node(tmp_path, ethtool=ethtool)
    assert node.round() == []
    ethtool["ens1f0np0"] |= {"rx_prio3_pause": 90_000, "rx_prio3_pause_duration": 2_500_000}  # 2.5 s of 5
    ethtool["ens2f0np0"] |= {"tx_pause_storm_warning_events": 1}
    found = kinds(node.round())
    assert set(found) == {("pfc_pause_storm", "mlx5_0/1"), ("pfc_pause_storm", "mlx5_1/1")}
    assert "priority 3 paused 50% of the time" in found[("pfc_pause_storm", "mlx5_0/1")].text
    pause = [m for m in node.metrics if m.name == "llm_rdma_port_pause_seconds_total"]
    assert isinstance(pause[0], Sample) and pause[0].value == pytest.approx(2.5)


def test_the_real_ethtool_interface_through_pyroute2() -> None:
    """The library reads a real interface's driver statistics (names and integers), the way the
    source asks for a RoCE netdev's; an interface without any answers an error the source logs."""
    from exporter.sources.node.links import pyroute2_statistics

    read = []
    for name in sorted(p.name for p in Path("/sys/class/net").iterdir()):
        try:
            read.append(pyroute2_statistics(name))
        except Exception:
            continue
    assert read, "no interface on this machine answers ETHTOOL_GSTATS"
    assert all(isinstance(k, str) and isinstance(v, int) for stats in read for k, v in stats.items())
