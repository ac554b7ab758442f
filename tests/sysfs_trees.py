"""Real `/sys/class/infiniband` trees on disk for the RDMA tests and the benchmark.

Two kinds: the upstream captures in tests/fixtures/sysfs/infiniband-fixture.txt rebuilt file by
file (so our reader, `once` and the real node_exporter read identical bytes), and hand-made mlx5
trees for what no capture has (a RoCE port with congestion counters, a port that changes between
collections). Each builder returns the sysfs root to pass as `--sysfs` / `--path.sysfs`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_FILE = REPO / "tests" / "fixtures" / "sysfs" / "infiniband-fixture.txt"
#: fixture source -> the archive prefix that stands for the sysfs root
FIXTURE_SOURCES = {"procfs": "fixtures/sys/", "node_exporter": "sys/"}
#: the devices each source holds, as its header states
FIXTURE_DEVICES = {"procfs": ("hfi1_0", "mlx4_0", "mlx5_0"), "node_exporter": ("i40iw0", "mlx4_0")}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def fixture_files(source: str) -> dict[str, str]:
    """Path relative to the sysfs root -> exact file content, for one fixture source."""
    prefix = FIXTURE_SOURCES[source]
    files: dict[str, str] = {}
    for line in FIXTURE_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        path, _, content = line.partition("\t")
        if path.startswith(prefix):
            files[path[len(prefix) :]] = _unescape(content)
    return files


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return root


def build_fixture_tree(root: Path, source: str) -> Path:
    """Rebuild one upstream capture as a real tree under `root`; returns the sysfs root."""
    return write_files(root, fixture_files(source))


# Every counters/ file a modern mlx5 port has (PortCountersExtended group).
PMA_COUNTER_NAMES = (
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
)
# Every port hw_counters/ file of an mlx5 RoCE port with all capability groups (counters.c).
MLX5_HW_COUNTER_NAMES = (
    "duplicate_request",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "req_cqe_flush_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
    "req_rnr_retries_exceeded",
    "req_transport_retries_exceeded",
    "resp_cqe_error",
    "resp_cqe_flush_error",
    "resp_local_length_error",
    "resp_remote_access_errors",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "rx_atomic_requests",
    "rx_dct_connect",
    "rx_icrc_encapsulated",
    "rx_read_requests",
    "rx_write_requests",
)


def write_port(
    root: Path,
    device: str,
    port: int = 1,
    *,
    state: str = "4: ACTIVE",
    phys_state: str = "5: LinkUp",
    rate: str = "200 Gb/sec (4X HDR)",
    link_layer: str = "Ethernet",
    counters: Mapping[str, int | str] | None = None,
    hw_counters: Mapping[str, int | str] | None = None,
    netdev: str | None = None,
) -> Path:
    """Write one device/port the way the kernel lays it out; returns the port directory."""
    device_dir = f"class/infiniband/{device}"
    files: dict[str, str] = {
        f"{device_dir}/fw_ver": "28.39.1002\n",
        f"{device_dir}/hca_type": "MT4129\n",
        f"{device_dir}/board_id": "MT_0000000838\n",
    }
    port_dir = f"{device_dir}/ports/{port}"
    files.update(
        {
            f"{port_dir}/state": f"{state}\n",
            f"{port_dir}/phys_state": f"{phys_state}\n",
            f"{port_dir}/rate": f"{rate}\n",
            f"{port_dir}/link_layer": f"{link_layer}\n",
        }
    )
    for name, value in (counters or {}).items():
        files[f"{port_dir}/counters/{name}"] = f"{value}\n"
    if hw_counters is not None:
        files[f"{port_dir}/hw_counters/lifespan"] = "10\n"
        for name, value in hw_counters.items():
            files[f"{port_dir}/hw_counters/{name}"] = f"{value}\n"
    if netdev is not None:
        files[f"{port_dir}/gid_attrs/ndevs/0"] = f"{netdev}\n"
    write_files(root, files)
    return root / port_dir


# The hand-made RoCE port: values chosen so every sum in the tests is checkable by hand.
ROCE_COUNTERS = {name: 0 for name in PMA_COUNTER_NAMES} | {
    "port_xmit_data": 250_000_000,  # words: 1 GB
    "port_rcv_data": 125_000_000,  # words: 500 MB
    "port_xmit_packets": 1_000_000,
    "port_rcv_packets": 600_000,
    "unicast_xmit_packets": 1_000_000,
    "unicast_rcv_packets": 600_000,
    "port_xmit_wait": 7_000,
    "symbol_error": 2,
    "port_rcv_errors": 3,
    "port_xmit_discards": 5,
}
ROCE_HW_COUNTERS = {name: 0 for name in MLX5_HW_COUNTER_NAMES} | {
    "np_ecn_marked_roce_packets": 5_000,
    "np_cnp_sent": 1_200,
    "rp_cnp_handled": 3_400,
    "rp_cnp_ignored": 7,
    "local_ack_timeout_err": 11,
    "packet_seq_err": 13,
    "implied_nak_seq_err": 17,
    "rnr_nak_retry_err": 19,
    "roce_adp_retrans": 23,
    "out_of_sequence": 29,
    "duplicate_request": 31,
    "out_of_buffer": 37,
    "req_cqe_error": 41,
    "resp_cqe_flush_error": 43,
    "req_transport_retries_exceeded": 2,
    "rx_icrc_encapsulated": 47,
    "rx_write_requests": 900_000,
}


def roce_mlx5_tree(root: Path) -> Path:
    """mlx5_0 port 1: RoCE (Ethernet link layer, 200 GbE) with congestion counters, netdev ens1f0np0."""
    write_port(root, "mlx5_0", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev="ens1f0np0")
    return root


def bench_tree(root: Path, devices: int = 8) -> Path:
    """`devices` mlx5 RoCE devices x 1 port, each with every counters/ and hw_counters/ file."""
    for index in range(devices):
        write_port(
            root, f"mlx5_{index}", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev=f"ens{index + 1}f0np0"
        )
    return root


class LiveTree:
    """A tree the test changes between collections, as a running kernel would."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def port_dir(self, device: str, port: int = 1) -> Path:
        return self.root / "class" / "infiniband" / device / "ports" / str(port)

    def set(self, device: str, relative: str, value: int | str, port: int = 1) -> None:
        """Write `ports/<port>/<relative>` (e.g. "counters/port_xmit_data") with a newline."""
        path = self.port_dir(device, port) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n", encoding="utf-8")

    def add(self, device: str, relative: str, increment: int, port: int = 1) -> None:
        path = self.port_dir(device, port) / relative
        self.set(device, relative, int(path.read_text()) + increment, port)

    def remove_device(self, device: str) -> None:
        shutil.rmtree(self.root / "class" / "infiniband" / device)

    def make_unreadable(self, device: str, relative: str, port: int = 1) -> None:
        """Replace a file by a directory: reading it fails with an OSError (EISDIR), for root too,
        the way a driver's show() failing with EINVAL or EIO does."""
        path = self.port_dir(device, port) / relative
        path.unlink()
        path.mkdir()


PCIE_SPEEDS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}


def write_pci_link(
    root: Path,
    device: str,
    index: int,
    *,
    current: tuple[int, int] = (5, 16),
    device_max: tuple[int, int] = (5, 16),
    slot_max: tuple[int, int] = (5, 16),
) -> str:
    """The NIC's PCI device under `devices/`, below a root port, with `class/infiniband/<device>/device`
    pointing at it as the kernel links it; (generation, width) each. Returns the PCI address."""
    bridge = f"0000:{0x10 + index:02x}:01.0"
    address = f"0000:{0x3B + index:02x}:00.0"
    port_dir = f"devices/pci0000:{0x10 + index:02x}/{bridge}"
    files = {
        f"{port_dir}/max_link_speed": PCIE_SPEEDS[slot_max[0]],
        f"{port_dir}/max_link_width": str(slot_max[1]),
        f"{port_dir}/{address}/current_link_speed": PCIE_SPEEDS[current[0]],
        f"{port_dir}/{address}/current_link_width": str(current[1]),
        f"{port_dir}/{address}/max_link_speed": PCIE_SPEEDS[device_max[0]],
        f"{port_dir}/{address}/max_link_width": str(device_max[1]),
    }
    write_files(root, {path: text + "\n" for path, text in files.items()})
    link = root / "class" / "infiniband" / device / "device"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(Path("../../..") / port_dir / address)
    return address


def write_ecn(
    root: Path, netdev: str, *, np: Mapping[int, bool] | None = None, rp: Mapping[int, bool] | None = None
) -> None:
    """`class/net/<netdev>/ecn/roce_np|roce_rp/enable/<prio>`: every priority on unless given."""
    files = {}
    for point, given in (("roce_np", np or {}), ("roce_rp", rp or {})):
        for priority in range(8):
            files[f"class/net/{netdev}/ecn/{point}/enable/{priority}"] = "1\n" if given.get(priority, True) else "0\n"
    write_files(root, files)


def healthy_roce_node(root: Path, ports: int = 4, rate: str = "400 Gb/sec (4X NDR)") -> Path:
    """`ports` mlx5 RoCE devices at `rate`, each on PCIe Gen5 x16 in a Gen5 x16 slot, ECN on every
    priority: the tree on which no health finding may be made."""
    for index in range(ports):
        netdev = f"ens{index + 1}f0np0"
        write_port(
            root, f"mlx5_{index}", rate=rate, counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev=netdev
        )
        write_pci_link(root, f"mlx5_{index}", index)
        write_ecn(root, netdev)
    return root
