"""A node's hardware and fabric faults, and the health findings a phase expects the exporter to name.

The faults are the ones users meet after a reboot, a reseat or a firmware update (issue #45,
docs/health.md): a NIC whose PCIe link trained to x8 in an x16 slot (its RDMA bandwidth capped, no
counter moving), an RDMA port that came up at half its rate, ECN (DCQCN) off on the RoCE priority.
They are static, as the faults are: the simulator's sysfs tree shows them from the start
(exporter/simulate/sysfs.py). Findings are evidence, not stages, so a phase states them apart from
its `expected_stage`: `expected_findings: [{kind: pcie_downtrained, device: mlx5_2}]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import exporter.health.kinds  # noqa: F401 - registers every kind the scenarios may expect
from exporter import validation as v
from exporter.health.record import kinds
from exporter.validation import ConfigError

NIC_FAULT_KEYS = ("nic", "pcie_width", "rate_gbps", "ecn")
GPU_FAULT_KEYS = ("gpu", "pcie_width")
FINDING_KEYS = ("kind", "device")
#: ConnectX-7: PCIe Gen5 x16, in a slot that allows as much
PCIE_GENERATION = 5
PCIE_WIDTH = 16


@dataclass(frozen=True)
class NicFault:
    nic: int
    #: the width its PCIe link trained to (device and slot allow PCIE_WIDTH)
    pcie_width: int = PCIE_WIDTH
    #: the rate its port came up at (None: the node's `nic.rate_gbps`)
    rate_gbps: int | None = None
    #: ECN on the RoCE priority (both the notification and the reaction point)
    ecn: bool = True


@dataclass(frozen=True)
class GpuFault:
    gpu: int
    #: the width its PCIe link trained to (the GPU and its slot allow PCIE_WIDTH)
    pcie_width: int = PCIE_WIDTH


@dataclass(frozen=True)
class ExpectedFinding:
    kind: str
    device: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "device": self.device}


def parse_nic_faults(value: Any, nics: int) -> tuple[NicFault, ...]:
    faults = []
    for i, item in enumerate(v.sequence(value, "node.nic_faults")):
        where = f"node.nic_faults[{i}]"
        data = v.section(item, where, NIC_FAULT_KEYS)
        rate = data.get("rate_gbps")
        faults.append(
            NicFault(
                _device(data, "nic", nics, where),
                _pcie_width(data, where),
                None if rate is None else v.positive_int(rate, f"{where}.rate_gbps"),
                v.boolean(data.get("ecn", True), f"{where}.ecn"),
            )
        )
    return tuple(faults)


def parse_gpu_faults(value: Any, gpus: int) -> tuple[GpuFault, ...]:
    faults = []
    for i, item in enumerate(v.sequence(value, "node.gpu_faults")):
        where = f"node.gpu_faults[{i}]"
        data = v.section(item, where, GPU_FAULT_KEYS)
        faults.append(GpuFault(_device(data, "gpu", gpus, where), _pcie_width(data, where)))
    return tuple(faults)


def _device(data: dict[str, Any], key: str, count: int, where: str) -> int:
    """The fault's device index (`nic`, `gpu`), required and one of the node's `count`."""
    index = v.integer(v.required(data.get(key), f"{where}.{key}"), f"{where}.{key}", minimum=0)
    if index >= count:
        raise ConfigError(f"{where}.{key}", f"the node has {count} {key.upper()}s (0-{count - 1})")
    return index


def _pcie_width(data: dict[str, Any], where: str) -> int:
    return v.integer(data.get("pcie_width", PCIE_WIDTH), f"{where}.pcie_width", minimum=1, maximum=PCIE_WIDTH)


def parse_expected_findings(value: Any, where: str) -> tuple[ExpectedFinding, ...]:
    known = tuple(kind.id for kind in kinds())
    found = []
    for i, item in enumerate(v.sequence(value, where)):
        at = f"{where}[{i}]"
        data = v.section(item, at, FINDING_KEYS)
        kind = v.choice(v.required(data.get("kind"), f"{at}.kind"), f"{at}.kind", known)
        found.append(ExpectedFinding(kind, v.string(v.required(data.get("device"), f"{at}.device"), f"{at}.device")))
    return tuple(found)
