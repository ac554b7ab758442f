"""RDMA NICs: the counters a ConnectX port keeps in sysfs, driven by all-reduce and background traffic.

Units and names follow shared/research/rdma-counters.md: `port_xmit_data`/`port_rcv_data` count
4-octet words (§1.4), packets are MTU-sized (RoCE MTU 4096), `port_xmit_wait` counts ticks in which
the port had data but could not send — 8 bytes of lost line time per tick as NVIDIA documents for
Quantum switches (§1.4; the HCA tick is not published, so treat it as relative). On RoCE
(link layer Ethernet) congestion shows as ECN-marked packets received (`np_ecn_marked_roce_packets`),
CNPs this port's notification point sends (`np_cnp_sent`, rate-limited, so fewer than the marks) and
CNPs its reaction point handles (`rp_cnp_handled`, i.e. our senders being throttled) (§2, §5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter import validation as v

WORD_BYTES = 4
XMIT_WAIT_TICK_BYTES = 8
CNP_PER_MARKED_PACKET = 0.5  # np_min_time_between_cnps coalesces CNPs
RETRANSMISSIONS_PER_MARKED_PACKET = 2e-4
HOUSEKEEPING_UTILIZATION = 0.002  # monitoring, storage and control traffic on an idle rail
RDMA_WRITE_BYTES = 512 * 1024  # NCCL's RDMA writes per chunk, for rx_write_requests

PMA_COUNTERS = (
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
HW_COUNTERS = (
    "duplicate_request",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "req_cqe_flush_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
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
    "rx_atomic_requests",
    "rx_dct_connect",
    "rx_read_requests",
    "rx_write_requests",
)
ROCE_CONGESTION_COUNTERS = (
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "rx_icrc_encapsulated",
)


@dataclass(frozen=True)
class NicSpec:
    rate_gbps: int = 400
    link_layer: str = "Ethernet"  # RoCE; "InfiniBand" has no np_*/rp_* counters
    mtu_bytes: int = 4096
    latency_seconds: float = 8e-6

    @property
    def rate_bytes_per_second(self) -> float:
        return self.rate_gbps * 1e9 / 8

    @property
    def rate_text(self) -> str:
        """The sysfs `rate` file: lane speed name from the kernel's table (research §1.2)."""
        name = {100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}.get(self.rate_gbps)
        return f"{self.rate_gbps} Gb/sec (4X {name})" if name else f"{self.rate_gbps} Gb/sec (4X)"


@dataclass(frozen=True)
class NetworkCondition:
    """The fabric during a phase: others' traffic on our rails and the switches' ECN marking."""

    background_utilization: float = 0.0
    ecn_mark_fraction: float = 0.0

    @property
    def available_fraction(self) -> float:
        return max(0.05, 1.0 - self.background_utilization)

    @classmethod
    def from_data(cls, data: Mapping[str, Any], where: str) -> NetworkCondition:
        """From a phase's `network` (the keys of the phases before it merged in)."""
        background = data.get("background_utilization", 0.0)
        return cls(
            v.non_negative(background, f"{where}.background_utilization", 0.95),
            v.non_negative(data.get("ecn_mark_fraction", 0.0), f"{where}.ecn_mark_fraction", 1.0),
        )


@dataclass
class RdmaPort:
    device: str
    spec: NicSpec
    port: int = 1
    values: dict[str, float] = field(default_factory=dict)
    # This port's own condition (one congested link in a cluster scenario), in place of the phase's.
    override: NetworkCondition | None = None
    #: the width its NIC's PCIe link trained to (of x16), and ECN on its RoCE priority (faults.py)
    pcie_width: int = 16
    ecn_enabled: bool = True

    def __post_init__(self) -> None:
        names: tuple[str, ...] = PMA_COUNTERS + HW_COUNTERS
        if self.spec.link_layer == "Ethernet":
            names += ROCE_CONGESTION_COUNTERS
        self.values = {name: 0.0 for name in names}

    def carry(self, sent: float, received: float, stall_seconds: float, condition: NetworkCondition) -> None:
        """Our own traffic (all-reduce of one or more steps) through this port."""
        condition = self.override or condition
        v = self.values
        xmit_packets = sent / self.spec.mtu_bytes
        rcv_packets = received / self.spec.mtu_bytes
        v["port_xmit_data"] += sent / WORD_BYTES
        v["port_rcv_data"] += received / WORD_BYTES
        for name, packets in (
            ("port_xmit_packets", xmit_packets),
            ("unicast_xmit_packets", xmit_packets),
            ("port_rcv_packets", rcv_packets),
            ("unicast_rcv_packets", rcv_packets),
        ):
            v[name] += packets
        v["rx_write_requests"] += received / RDMA_WRITE_BYTES
        v["port_xmit_wait"] += stall_seconds * self.spec.rate_bytes_per_second / XMIT_WAIT_TICK_BYTES
        self._congestion(xmit_packets, rcv_packets, condition)

    def background(self, seconds: float, condition: NetworkCondition) -> None:
        """Other traffic on the rail (other tenants, storage, housekeeping), both directions."""
        condition = self.override or condition
        utilization = max(HOUSEKEEPING_UTILIZATION, condition.background_utilization)
        moved = utilization * self.spec.rate_bytes_per_second * seconds
        packets = moved / self.spec.mtu_bytes
        v = self.values
        for name, amount in (
            ("port_xmit_data", moved / WORD_BYTES),
            ("port_rcv_data", moved / WORD_BYTES),
            ("port_xmit_packets", packets),
            ("port_rcv_packets", packets),
            ("unicast_xmit_packets", packets),
            ("unicast_rcv_packets", packets),
        ):
            v[name] += amount
        # Past about half the line rate, PFC/credit back-pressure starts to stall the port on its own.
        v["port_xmit_wait"] += (
            max(0.0, utilization - 0.5) * seconds * self.spec.rate_bytes_per_second / XMIT_WAIT_TICK_BYTES
        )
        self._congestion(packets, packets, condition)

    def _congestion(self, xmit_packets: float, rcv_packets: float, condition: NetworkCondition) -> None:
        marked_in = rcv_packets * condition.ecn_mark_fraction
        marked_out = xmit_packets * condition.ecn_mark_fraction
        v = self.values
        if "np_ecn_marked_roce_packets" in v:
            v["np_ecn_marked_roce_packets"] += marked_in
            v["np_cnp_sent"] += marked_in * CNP_PER_MARKED_PACKET
            v["rp_cnp_handled"] += marked_out * CNP_PER_MARKED_PACKET
        retransmissions = (marked_in + marked_out) * RETRANSMISSIONS_PER_MARKED_PACKET
        v["out_of_sequence"] += retransmissions / 2
        v["packet_seq_err"] += retransmissions / 4
        v["roce_adp_retrans"] += retransmissions / 4

    def counter(self, name: str) -> int:
        return int(self.values[name])
