"""The path a KV cache takes from a prefill GPU to a decode GPU: NVLink within a node, RDMA across.

Each decode replica reads its requests' KV over its own ingress: its GPU's NVLink when the prefill
peers share the node, its GPU's RDMA NIC (rail-optimized: GPU i uses NIC i) when they sit on
another node. Reads queue in order on that ingress (a NIXL/UCX read of a whole request's blocks
streams at the link's pace, one after the other): the wait is the transfer's queue, the time on
the link its wire time. A NIC shared with other traffic (`background_utilization`) leaves its
free share to the reads, as it does to the all-reduce (roofline.py).

The counters follow the bytes: an RDMA read lands in the decode NIC's `port_rcv_data` and leaves
the prefill NIC's `port_xmit_data` (the remote node mirrors this one, so its prefill GPUs send to
our decode GPUs what ours send to its decode GPUs); an NVLink copy counts on both GPUs' NVLink
byte counters (DCGM fields 1011/1012).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.simulate.gpu import GpuDevice
from exporter.simulate.network import NetworkCondition, RdmaPort
from exporter.simulate.pd_spec import Disaggregation


@dataclass(frozen=True)
class Transfer:
    """One request's KV cache on its way: when it was asked for, started and done, and between whom."""

    requested: float
    started: float
    done: float
    bytes: float
    over_rdma: bool
    sender: GpuDevice
    sender_port: RdmaPort | None
    condition: NetworkCondition


class KvIngress:
    """A decode replica's ingress for KV reads: its GPU's NVLink and its RDMA NIC."""

    def __init__(self, gpu: GpuDevice, port: RdmaPort | None) -> None:
        self.gpu = gpu
        self.port = port
        self.busy_until = 0.0

    def read(
        self,
        now: float,
        nbytes: float,
        how: Disaggregation,
        condition: NetworkCondition,
        sender: GpuDevice,
        sender_port: RdmaPort | None,
    ) -> Transfer:
        """Queue one request's KV behind the reads already on this ingress."""
        cross = how.cross_node and self.port is not None
        if cross:
            assert self.port is not None
            available = (self.port.override or condition).available_fraction
            rate = self.port.spec.rate_bytes_per_second * how.rdma_efficiency * available
        else:
            rate = self.gpu.spec.nvlink_bytes_per_second / 2 * how.nvlink_efficiency
        started = max(now, self.busy_until)
        done = started + how.transfer_setup_seconds + nbytes / rate
        self.busy_until = done
        return Transfer(now, started, done, nbytes, cross, sender, sender_port, condition)

    def complete(self, transfer: Transfer) -> None:
        """Count a finished read's bytes on the links it crossed."""
        if transfer.over_rdma:
            assert self.port is not None
            self.port.carry(0.0, transfer.bytes, 0.0, transfer.condition)
            if transfer.sender_port is not None:
                transfer.sender_port.carry(transfer.bytes, 0.0, 0.0, transfer.condition)
        else:
            self.gpu.counters.nvlink_bytes += transfer.bytes
            transfer.sender.counters.nvlink_bytes += transfer.bytes
