"""The sysfs reader on real trees: the upstream captures rebuilt file by file, plus hand-made ports.

Expected values are the fixture's numbers (tests/fixtures/sysfs/infiniband-fixture.txt); data
counters are those numbers x 4, since the kernel prints 4-octet words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.sysfs.infiniband import (
    InfiniBandPort,
    PortState,
    parse_rate,
    parse_state,
    read_device,
    read_infiniband_class,
    read_port,
)
from tests.sysfs_trees import FIXTURE_DEVICES, LiveTree, build_fixture_tree, roce_mlx5_tree, write_port


def _port(tree: Path, device: str, port: int = 1) -> InfiniBandPort:
    devices = {d.name: d for d in read_infiniband_class(str(tree))}
    return {p.port: p for p in devices[device].ports}[port]


@pytest.fixture
def procfs_tree(tmp_path: Path) -> Path:
    return build_fixture_tree(tmp_path, "procfs")


@pytest.fixture
def node_exporter_tree(tmp_path: Path) -> Path:
    return build_fixture_tree(tmp_path, "node_exporter")


@pytest.mark.parametrize("source", sorted(FIXTURE_DEVICES))
def test_every_fixture_device_and_port_is_read(tmp_path: Path, source: str) -> None:
    devices = read_infiniband_class(str(build_fixture_tree(tmp_path, source)))
    assert tuple(d.name for d in devices) == FIXTURE_DEVICES[source]
    expected_ports = {"hfi1_0": (1,), "mlx4_0": (1, 2), "mlx5_0": (1,), "i40iw0": (1,)}
    assert {d.name: tuple(p.port for p in d.ports) for d in devices} == {
        name: expected_ports[name] for name in FIXTURE_DEVICES[source]
    }


def test_hfi1_link_attributes_and_pma_counters(procfs_tree: Path) -> None:
    port = _port(procfs_tree, "hfi1_0")
    assert port.state == PortState(4, "ACTIVE")
    assert port.phys_state == PortState(5, "LinkUp")
    assert port.rate_bytes_per_second == 12_500_000_000  # 100 Gb/sec (4X EDR)
    assert port.link_layer == "InfiniBand"
    assert port.counters["port_xmit_data"] == 273558326543 * 4
    assert port.counters["port_rcv_data"] == 345091702026 * 4
    assert port.counters["port_xmit_packets"] == 568318856
    assert port.counters["port_rcv_packets"] == 638036947
    assert port.counters["port_xmit_wait"] == 0
    assert port.hw_counters == {}
    assert port.unreadable == ()


def test_device_attributes_are_optional(procfs_tree: Path) -> None:
    devices = {d.name: d for d in read_infiniband_class(str(procfs_tree))}
    assert devices["mlx5_0"].fw_ver == "14.28.2006"
    assert devices["mlx5_0"].hca_type == "MT4118"
    assert devices["hfi1_0"].board_id.startswith("HPE 100Gb 1-port OP101")
    assert devices["hfi1_0"].hca_type is None  # the capture has no hca_type for hfi1_0


def test_trailing_blank_line_in_link_layer_is_tolerated(procfs_tree: Path) -> None:
    # mlx4_0 port 2 link_layer reads "InfiniBand\n\n" in the capture.
    port = _port(procfs_tree, "mlx4_0", 2)
    assert port.link_layer == "InfiniBand"
    assert port.counters["port_xmit_wait"] == 3846


def test_mlx5_hw_counters_are_read_and_lifespan_kept_apart(procfs_tree: Path) -> None:
    port = _port(procfs_tree, "mlx5_0")
    assert port.rate_bytes_per_second == 3_125_000_000  # 25 Gb/sec (1X EDR)
    assert port.phys_state == PortState(4, "ACTIVE")  # the capture's odd value, read as printed
    assert port.hw_counters["local_ack_timeout_err"] == 131
    assert port.hw_counters["duplicate_request"] == 41
    assert port.hw_counters["rx_read_requests"] == 175528982
    assert "lifespan" not in port.hw_counters
    assert port.hw_counters_lifespan_ms == 10
    assert len(port.hw_counters) == 24
    assert port.counters["port_xmit_data"] == 2880761508848 * 4


def test_no_pma_counters_are_left_out_and_recorded(node_exporter_tree: Path) -> None:
    port = _port(node_exporter_tree, "i40iw0")
    assert port.counters == {}
    assert len(port.unreadable) == 17
    assert "counters/port_xmit_data" in port.unreadable
    # the link attributes of that port are still there
    assert port.state == PortState(4, "ACTIVE")
    assert port.rate_bytes_per_second == 1_250_000_000  # "10 Gb/sec (4X)": old kernel, no speed name


def test_legacy_counters_ext_are_read_with_data_in_bytes(node_exporter_tree: Path) -> None:
    port = _port(node_exporter_tree, "mlx4_0", 1)
    assert port.counters_ext["port_xmit_data_64"] == 3733440 * 4
    assert port.counters_ext["port_rcv_data_64"] == 4631917 * 4
    assert port.counters_ext["port_unicast_xmit_packets"] == 61239
    assert port.counters["port_rcv_packets"] == 6825908347  # wider than 32 bits: 64-bit PMA
    assert port.counters["port_xmit_wait"] == 4294967295


def test_roce_port_has_link_layer_ethernet_netdev_and_congestion_counters(tmp_path: Path) -> None:
    port = _port(roce_mlx5_tree(tmp_path), "mlx5_0")
    assert port.link_layer == "Ethernet"
    assert port.netdev == "ens1f0np0"
    assert port.rate_bytes_per_second == 25_000_000_000  # 200 Gb/sec
    assert port.hw_counters["np_cnp_sent"] == 1200
    assert port.hw_counters["rp_cnp_handled"] == 3400
    assert port.hw_counters["np_ecn_marked_roce_packets"] == 5000


def test_soft_roce_netdev_comes_from_the_parent_file(tmp_path: Path) -> None:
    write_port(tmp_path, "rxe0", rate="2.5 Gb/sec (1X SDR)", hw_counters={"sent_pkts": 10, "rcvd_pkts": 12})
    (tmp_path / "class/infiniband/rxe0/parent").write_text("eth0\n")
    port = _port(tmp_path, "rxe0")
    assert port.netdev == "eth0"
    assert port.counters == {}
    assert port.hw_counters == {"sent_pkts": 10, "rcvd_pkts": 12}
    assert port.rate_bytes_per_second == 312_500_000


def test_infiniband_ports_have_no_netdev(procfs_tree: Path) -> None:
    assert _port(procfs_tree, "mlx5_0").netdev is None


def test_an_unreadable_file_is_left_out_and_the_rest_read(tmp_path: Path) -> None:
    tree = LiveTree(roce_mlx5_tree(tmp_path))
    tree.make_unreadable("mlx5_0", "counters/port_xmit_data")
    tree.make_unreadable("mlx5_0", "rate")
    port = _port(tmp_path, "mlx5_0")
    assert "port_xmit_data" not in port.counters
    assert port.counters["port_rcv_data"] == 125_000_000 * 4
    assert port.rate_bytes_per_second is None
    assert set(port.unreadable) == {"counters/port_xmit_data", "rate"}
    assert port.state == PortState(4, "ACTIVE")


def test_an_unparseable_rate_or_state_is_left_out(tmp_path: Path) -> None:
    tree = LiveTree(roce_mlx5_tree(tmp_path))
    (tree.port_dir("mlx5_0") / "rate").write_text("fast\n")
    (tree.port_dir("mlx5_0") / "state").write_text("ACTIVE\n")
    port = _port(tmp_path, "mlx5_0")
    assert port.rate_bytes_per_second is None
    assert port.state is None
    assert set(port.unreadable) == {"rate", "state"}
    assert port.phys_state == PortState(5, "LinkUp")


def test_a_vanished_device_or_port_reads_as_none(tmp_path: Path) -> None:
    roce_mlx5_tree(tmp_path)
    device_dir = tmp_path / "class/infiniband/mlx5_0"
    assert read_port(str(device_dir / "ports/2"), "mlx5_0", 2) is None
    LiveTree(tmp_path).remove_device("mlx5_0")
    assert read_device(str(device_dir), "mlx5_0") is None
    assert read_infiniband_class(str(tmp_path)) == []


def test_a_missing_class_directory_reads_as_no_devices(tmp_path: Path) -> None:
    assert read_infiniband_class(str(tmp_path)) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.5 Gb/sec (1X SDR)\n", 312_500_000),
        ("25 Gb/sec (1X EDR)\n", 3_125_000_000),
        ("40 Gb/sec (4X QDR)\n", 5_000_000_000),
        ("400 Gb/sec (4X NDR)\n", 50_000_000_000),
        ("10 Gb/sec (4X)\n", 1_250_000_000),
        ("N/A\n", None),
        ("", None),
    ],
)
def test_parse_rate(text: str, expected: float | None) -> None:
    assert parse_rate(text) == expected


@given(st.integers(min_value=1, max_value=200_000).map(lambda n: n * 5))
def test_parse_rate_reads_every_kernel_formatted_rate(deci_gbit: int) -> None:
    # The kernel prints rate/10 and appends ".5" for a half (drivers/infiniband/core/sysfs.c).
    text = f"{deci_gbit // 10}{'.5' if deci_gbit % 10 else ''} Gb/sec (4X HDR)\n"
    assert parse_rate(text) == deci_gbit * 12_500_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4: ACTIVE\n", PortState(4, "ACTIVE")),
        ("1: DOWN\n", PortState(1, "DOWN")),
        ("5: LinkUp\n", PortState(5, "LinkUp")),
        ("3: Disabled", PortState(3, "Disabled")),
        ("ACTIVE\n", None),
        ("", None),
    ],
)
def test_parse_state(text: str, expected: PortState | None) -> None:
    assert parse_state(text) == expected
