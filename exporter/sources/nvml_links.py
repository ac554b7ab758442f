"""Read a GPU's links through NVML: its PCIe link against what it and its slot allow, and its
NVLink links' states, error counters and fabric health (shared/research/field-2026.md §5.1).

PCIe is read every collection (a few calls): whether a link is below its maximum only means
something while the GPU is busy, so both are taken together. NVLink (a call per link and per
error counter, up to 18 links on Hopper) is read every `NVLINK_REFRESH_SECONDS` and the last
reading served in between: links go down and errors accumulate over minutes, not seconds.
"""

from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from exporter.sources.nvml_gpm import Query

NVLINK_REFRESH_SECONDS = 30.0
#: nvmlNvLinkErrorCounter_t by the `kind` label (nvml.h NVML_NVLINK_ERROR_DL_*)
NVLINK_ERRORS = {
    "replay": "NVML_NVLINK_ERROR_DL_REPLAY",
    "recovery": "NVML_NVLINK_ERROR_DL_RECOVERY",
    "crc_flit": "NVML_NVLINK_ERROR_DL_CRC_FLIT",
    "crc_data": "NVML_NVLINK_ERROR_DL_CRC_DATA",
}


@dataclass(frozen=True)
class PcieLink:
    generation: int | None = None
    width: int | None = None
    #: what the GPU in its slot can reach (NVML: "for this device and system")
    max_generation: int | None = None
    max_width: int | None = None
    #: the GPU's own maximum, whatever slot it sits in
    device_max_generation: int | None = None
    replay_errors: int | None = None


@dataclass(frozen=True)
class NvLinks:
    active: int = 0
    inactive: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    #: NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW: True, False, None where not reported
    fabric_degraded: bool | None = None


def read_pcie(nvml: ModuleType, query: Query, handle: Any) -> PcieLink:
    def ask(name: str) -> int | None:
        value = query("pcie_link", lambda: getattr(nvml, name)(handle))
        return int(value) if value is not None else None

    return PcieLink(
        generation=ask("nvmlDeviceGetCurrPcieLinkGeneration"),
        width=ask("nvmlDeviceGetCurrPcieLinkWidth"),
        max_generation=ask("nvmlDeviceGetMaxPcieLinkGeneration"),
        max_width=ask("nvmlDeviceGetMaxPcieLinkWidth"),
        device_max_generation=query("pcie_device_max", lambda: nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(handle)),
        replay_errors=query("pcie_replay", lambda: nvml.nvmlDeviceGetPcieReplayCounter(handle)),
    )


class NvLinkReader:
    """One GPU's NVLink reading, refreshed every NVLINK_REFRESH_SECONDS."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._read_at: float | None = None
        self._last: NvLinks | None = None

    def read(self, nvml: ModuleType, query: Query, handle: Any) -> NvLinks | None:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= NVLINK_REFRESH_SECONDS:
            self._last = _read_nvlinks(nvml, query, handle)
            self._read_at = now
        return self._last


def _read_nvlinks(nvml: ModuleType, query: Query, handle: Any) -> NvLinks | None:
    first = query("nvlink", lambda: nvml.nvmlDeviceGetNvLinkState(handle, 0))
    fabric = _fabric_degraded(nvml, query, handle)
    if first is None:  # no NVLink on this GPU (a PCIe card): only the fabric may say something
        return NvLinks(fabric_degraded=fabric) if fabric is not None else None
    states = [int(first)]
    for link in range(1, getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states.append(int(nvml.nvmlDeviceGetNvLinkState(handle, link)))
        except nvml.NVMLError:  # past the GPU's last link (INVALID_ARGUMENT)
            break
    errors: dict[str, int] = {}
    for kind, name in NVLINK_ERRORS.items():
        counter = getattr(nvml, name, None)
        if counter is None:
            continue
        for link in range(len(states)):
            value = query(
                f"nvlink_{kind}", functools.partial(nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
            )
            if value is not None:
                errors[kind] = errors.get(kind, 0) + int(value)
    active = sum(1 for state in states if state)
    return NvLinks(active, len(states) - active, errors, fabric)


def _fabric_degraded(nvml: ModuleType, query: Query, handle: Any) -> bool | None:
    struct = getattr(nvml, "c_nvmlGpuFabricInfo_v3_t", None)
    if struct is None:
        return None
    info = struct()
    if query("fabric", lambda: nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))) is None:
        return None
    shift = getattr(nvml, "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW", 0)
    width = getattr(nvml, "NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW", 0x3)
    state = (int(info.healthMask) >> shift) & width
    if state == getattr(nvml, "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE", 1):
        return True
    return False if state == getattr(nvml, "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE", 2) else None
