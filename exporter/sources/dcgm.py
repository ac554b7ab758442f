"""The DCGM source: `DcgmReader`'s typed readings mapped to `llm_gpu_*`, with attribution.

The mapping is pure (a reading in, a `GpuReading` out) so it is tested without pydcgm; the
connection, watches, blank filtering and XID counting are `exporter.sources.dcgm_reader`'s. DCGM
has no process list, so the PIDs for attribution come from NVML (`process_lister`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import fields
from typing import Any

from exporter.attribution import Attributor, GpuRef
from exporter.model import Metric
from exporter.settings import GpuSettings
from exporter.sources.dcgm_reader import DcgmGpuReading, DcgmModules, DcgmReader
from exporter.sources.gpu_common import MIB, PERCENT, GpuReading, LibraryGpuSource, Scale, attributed_samples, scaled
from exporter.sources.gpu_modes import GPU_MODES, GpuMode
from exporter.sources.nvml import NvmlProcessLister

# DcgmGpuReading attribute → (family, scale), from the units in dcgm_fields.h: FB in MiB, power W,
# clocks MHz, GPU_UTIL percent, the DCP (profiling) fields ratios and bytes per second.
FAMILIES: dict[str, tuple[str, Scale]] = {
    "sm_clock_mhz": ("llm_gpu_sm_clock_hertz", 1e6),
    "gpu_temp_celsius": ("llm_gpu_temperature_celsius", 1.0),
    "power_usage_watts": ("llm_gpu_power_watts", 1.0),
    "gpu_util_percent": ("llm_gpu_utilization_ratio", PERCENT),
    "fb_total_mib": ("llm_gpu_memory_total_bytes", MIB),
    "fb_used_mib": ("llm_gpu_memory_used_bytes", MIB),
    "prof_sm_active": ("llm_gpu_sm_active_ratio", 1.0),
    "prof_sm_occupancy": ("llm_gpu_sm_occupancy_ratio", 1.0),
    "prof_pipe_tensor_active": ("llm_gpu_tensor_active_ratio", 1.0),
    "prof_dram_active": ("llm_gpu_dram_active_ratio", 1.0),
    "prof_pcie_tx_bytes": ("llm_gpu_pcie_transmit_bytes_per_second", 1.0),
    "prof_pcie_rx_bytes": ("llm_gpu_pcie_receive_bytes_per_second", 1.0),
    "prof_nvlink_tx_bytes": ("llm_gpu_nvlink_transmit_bytes_per_second", 1.0),
    "prof_nvlink_rx_bytes": ("llm_gpu_nvlink_receive_bytes_per_second", 1.0),
}
# Read but not a family of their own: free memory derives the total, the reasons are a bitmask.
_DERIVED = {"fb_free_mib", "clocks_event_reasons"}
_IDENTITY = {"gpu_id", "uuid", "device_name", "xid_counts"}
assert set(FAMILIES) | _DERIVED | _IDENTITY == {f.name for f in fields(DcgmGpuReading)}, "map every DCGM value"


def gpu_reading(dcgm_reading: DcgmGpuReading) -> GpuReading:
    """One DCGM reading in our units; a GPU without any value is down."""
    r = dcgm_reading
    reading = GpuReading(str(r.gpu_id), r.uuid, r.device_name, up=r.has_values, xid_counts=dict(r.xid_counts))
    for attribute, (family, scale) in FAMILIES.items():
        value = getattr(r, attribute)
        if value is not None:
            reading.set(family, scaled(value, scale))
    if r.fb_total_mib is None and r.fb_used_mib is not None and r.fb_free_mib is not None:
        reading.set("llm_gpu_memory_total_bytes", (r.fb_used_mib + r.fb_free_mib) * MIB)
    reading.throttle_reasons = r.clocks_event_reasons
    return reading


class DcgmSource(LibraryGpuSource[DcgmReader]):
    name = "dcgm"

    def __init__(
        self,
        address: str = "localhost:5555",
        attributor: Attributor | None = None,
        interval_seconds: float = 5.0,
        modules: DcgmModules | None = None,
        process_lister: Any = None,
    ) -> None:
        self.address = address
        self.target = address
        self._attributor = attributor
        self._process_lister = process_lister
        self._reader = DcgmReader(address, interval_seconds, modules)

    def collect(self, now: float) -> list[Metric]:
        readings = [gpu_reading(r) for r in self._reader.read()]
        pids = self._process_lister.pids_by_uuid() if self._process_lister is not None else {}
        refs = [GpuRef(r.index, r.uuid, pids.get(r.uuid, frozenset())) for r in readings]
        return attributed_samples(readings, refs, self._attributor)

    def profiling_paused(self) -> AbstractContextManager[None]:
        """DCGM's profiling paused while an engine is profiled (DcgmReader.profiling_paused)."""
        return self._reader.profiling_paused()

    def close(self) -> None:
        self._reader.close()
        if self._process_lister is not None:
            self._process_lister.close()


def dcgm_source(gpu: GpuSettings, attributor: Attributor, interval_seconds: float) -> DcgmSource:
    """The DCGM source of `--gpu dcgm` (and of `auto` when a host engine answers): DCGM has no
    process list of its own, so NVML's tells attribution which PIDs hold each GPU."""
    return DcgmSource(gpu.dcgm_address, attributor, interval_seconds, process_lister=NvmlProcessLister())


GPU_MODES.register(GpuMode(DcgmSource.name, "a DCGM host engine", dcgm_source, vendor="nvidia"))
