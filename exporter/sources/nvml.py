"""The NVML source: `NvmlReader`'s typed readings mapped to `llm_gpu_*`, with attribution.

The mapping is pure (a reading in, a `GpuReading` out) so it is tested without NVML; reading,
failure grading and GPM windows are `exporter.sources.nvml_reader`'s. A missing library or driver
makes the whole source unavailable (`llm_exporter_source_up{source="nvml"} 0`), retried every
collection; the first collection — all of `once` — waits `first_window_seconds` once for the first
GPM window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import fields
from types import ModuleType

from exporter.attribution import Attributor, GpuRef
from exporter.model import Metric
from exporter.sources.base import SourceError
from exporter.sources.gpu_common import (
    MIB,
    PERCENT,
    GpuReading,
    LibraryGpuSource,
    Scale,
    attributed_samples,
    quietly,
    scaled,
)
from exporter.sources.gpu_modes import GPU_MODES, GpuMode
from exporter.sources.nvml_gpm import GpmMetrics
from exporter.sources.nvml_links import NvLinks, PcieLink
from exporter.sources.nvml_reader import NvmlGpuReading, NvmlReader, TrafficCounters, load_pynvml

log = logging.getLogger(__name__)

# GpmMetrics attribute → (family, scale): percentages become ratios, MiB/s becomes bytes/s, exactly
# as DCGM 4.6 derives DCGM_FI_PROF_* from GPM on Hopper (DcgmGpmManager.cpp, DcgmCacheManager.cpp).
GPM_FAMILIES: dict[str, tuple[str, Scale]] = {
    "sm_util_percent": ("llm_gpu_sm_active_ratio", PERCENT),
    "sm_occupancy_percent": ("llm_gpu_sm_occupancy_ratio", PERCENT),
    "any_tensor_util_percent": ("llm_gpu_tensor_active_ratio", PERCENT),
    "dram_bw_util_percent": ("llm_gpu_dram_active_ratio", PERCENT),
    "pcie_tx_mib_per_second": ("llm_gpu_pcie_transmit_bytes_per_second", MIB),
    "pcie_rx_mib_per_second": ("llm_gpu_pcie_receive_bytes_per_second", MIB),
    "nvlink_total_rx_mib_per_second": ("llm_gpu_nvlink_receive_bytes_per_second", MIB),
    "nvlink_total_tx_mib_per_second": ("llm_gpu_nvlink_transmit_bytes_per_second", MIB),
}
# TrafficCounters attribute → (family, scale): NVLink data counters are in KiB.
TRAFFIC_FAMILIES: dict[str, tuple[str, Scale]] = {
    "pcie_tx_bytes": ("llm_gpu_pcie_transmit_bytes_total", 1),
    "pcie_rx_bytes": ("llm_gpu_pcie_receive_bytes_total", 1),
    "nvlink_tx_kib": ("llm_gpu_nvlink_transmit_bytes_total", 1024),
    "nvlink_rx_kib": ("llm_gpu_nvlink_receive_bytes_total", 1024),
}
assert set(GPM_FAMILIES) == {f.name for f in fields(GpmMetrics)}, "map every GpmMetrics attribute"
assert set(TRAFFIC_FAMILIES) == {f.name for f in fields(TrafficCounters)}, "map every TrafficCounters attribute"


def gpu_reading(nvml_reading: NvmlGpuReading) -> GpuReading:
    """One NVML reading in our units, keyed by family; NVML's own units are converted here."""
    r = nvml_reading
    reading = GpuReading(str(r.index), r.uuid, r.name, up=r.up, xid_counts=dict(r.xid_counts), pids=r.pids)
    if not r.up:
        return reading
    reading.set("llm_gpu_memory_used_bytes", r.memory_used_bytes)
    reading.set("llm_gpu_memory_total_bytes", r.memory_total_bytes)
    if r.gpu_utilization_percent is not None:
        reading.set("llm_gpu_utilization_ratio", scaled(r.gpu_utilization_percent, PERCENT))
    if r.power_milliwatts is not None:
        reading.set("llm_gpu_power_watts", r.power_milliwatts / 1000.0)
    reading.set("llm_gpu_temperature_celsius", r.temperature_celsius)
    if r.sm_clock_mhz is not None:
        reading.set("llm_gpu_sm_clock_hertz", r.sm_clock_mhz * 1e6)
    _set_scaled(reading, r.traffic, TRAFFIC_FAMILIES)
    reading.throttle_reasons = r.clocks_event_reasons
    if r.gpm is not None:
        _set_scaled(reading, r.gpm, GPM_FAMILIES)
    link_samples(reading, r.pcie, r.nvlinks)
    return reading


def link_samples(reading: GpuReading, pcie: PcieLink, nvlinks: NvLinks | None) -> None:
    """The GPU's PCIe link by bound and its NVLink states, errors and fabric health."""
    for family, bounds in (
        (
            "llm_gpu_pcie_link_generation",
            (("current", pcie.generation), ("max", pcie.max_generation), ("device_max", pcie.device_max_generation)),
        ),
        ("llm_gpu_pcie_link_width", (("current", pcie.width), ("max", pcie.max_width))),
    ):
        reading.labelled += [(family, {"bound": bound}, float(v)) for bound, v in bounds if v is not None]
    reading.set("llm_gpu_pcie_replay_errors_total", pcie.replay_errors)
    if nvlinks is None:
        return
    if nvlinks.active or nvlinks.inactive:
        for state, count in (("active", nvlinks.active), ("inactive", nvlinks.inactive)):
            reading.labelled.append(("llm_gpu_nvlink_links", {"state": state}, float(count)))
    reading.labelled += [("llm_gpu_nvlink_errors_total", {"kind": k}, float(v)) for k, v in nvlinks.errors.items()]
    if nvlinks.fabric_degraded is not None:
        reading.set("llm_gpu_fabric_degraded_bandwidth", 1.0 if nvlinks.fabric_degraded else 0.0)


def _set_scaled(reading: GpuReading, values: object, families: dict[str, tuple[str, Scale]]) -> None:
    for attribute, (family, scale) in families.items():
        value = getattr(values, attribute)
        if value is not None:
            reading.set(family, scaled(value, scale))


class NvmlSource(LibraryGpuSource[NvmlReader]):
    name = "nvml"

    def __init__(
        self,
        attributor: Attributor | None = None,
        first_window_seconds: float = 0.5,
        nvml: ModuleType | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._attributor = attributor
        self._reader = NvmlReader(first_window_seconds, nvml, clock, sleep)

    def collect(self, now: float) -> list[Metric]:
        readings = [gpu_reading(r) for r in self._reader.read()]
        refs = [GpuRef(r.index, r.uuid, r.pids) for r in readings]
        return attributed_samples(readings, refs, self._attributor)

    def close(self) -> None:
        self._reader.close()


def nvml_available() -> tuple[bool, str]:
    """For `--gpu auto`: can NVML be initialized and does it see a GPU? (and why not)."""
    try:
        nvml = load_pynvml()
    except SourceError as exc:
        return False, str(exc)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return False, f"NVML: {exc}"
    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        return False, f"NVML: {exc}"
    finally:
        quietly(nvml.nvmlShutdown)
    return (count > 0, f"NVML sees {count} GPU(s)")


class NvmlProcessLister:
    """GPU UUID → running PIDs, for sources without their own process list (DCGM)."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml
        self._ready: bool | None = None

    def pids_by_uuid(self) -> dict[str, frozenset[int]]:
        if self._ready is False:
            return {}
        try:
            nvml = self._nvml = self._nvml or load_pynvml()
            if not self._ready:
                nvml.nvmlInit()
                self._ready = True
            result = {}
            for index in range(nvml.nvmlDeviceGetCount()):
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    uuid = nvml.nvmlDeviceGetUUID(handle)
                    processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                except nvml.NVMLError:
                    continue
                result[uuid] = frozenset(p.pid for p in processes)
            return result
        except Exception as exc:  # any NVML trouble: attribution simply has no PIDs
            if self._ready is None:
                log.info("dcgm: no NVML for process attribution (%s)", exc)
            self._ready = False
            return {}

    def close(self) -> None:
        if self._ready and self._nvml is not None:
            quietly(self._nvml.nvmlShutdown)
            self._ready = None


GPU_MODES.register(
    GpuMode(NvmlSource.name, "NVML", lambda gpu, attributor, interval: NvmlSource(attributor), vendor="nvidia")
)
