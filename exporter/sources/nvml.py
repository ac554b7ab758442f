"""The NVML source (nvidia-ml-py): per-GPU inventory, memory, power, clocks, traffic, throttle
reasons, XID events, running PIDs, and on Hopper and newer the GPM profiling ratios.

Failure is kept as small as it can be: `NOT_SUPPORTED` (or no permission) leaves that one metric out
and is not asked again; `GPU_IS_LOST` or any other failure of one GPU exports `llm_gpu_up 0` for it
while the others carry on; a missing library or driver makes the whole source unavailable
(`llm_exporter_source_up{source="nvml"} 0`) and is retried every collection.

GPM ratios come from two samples: each collection takes one and computes the window since the
previous collection's (no sleeping in steady state); the very first collection — all of `once` —
takes a priming sample and waits `first_window_seconds` once for all GPUs.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from exporter.attribution import Attributor, GpuRef
from exporter.model import Metric
from exporter.sources.base import Source, SourceError
from exporter.sources.gpu_common import MIB, PERCENT, GpuReading, Scale, render_readings, scaled

log = logging.getLogger(__name__)

# NVML return codes (nvml.h); kept here so the classification below does not need pynvml loaded.
NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, TIMEOUT = 3, 4, 6, 10
LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND, GPU_IS_LOST, RESET_REQUIRED = 12, 13, 15, 16
NO_DATA, ARGUMENT_VERSION_MISMATCH, NOT_READY = 21, 25, 27
# Permanent for this device and call: leave the metric out and stop asking.
_UNSUPPORTED = frozenset({NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH})
# Transient: leave the metric out this time.
_SKIP = frozenset({NO_DATA, NOT_READY})

# Field values (nvml.h NVML_FI_*): PCIe byte counters, and NVLink data counters in KiB, where a
# scope of UINT_MAX sums all links.
FI_PCIE_TX, FI_PCIE_RX, FI_NVLINK_TX, FI_NVLINK_RX = 197, 198, 138, 139
ALL_LINKS = 0xFFFFFFFF
_FIELDS = (
    ((FI_PCIE_TX, 0), "llm_gpu_pcie_transmit_bytes_total", 1),
    ((FI_PCIE_RX, 0), "llm_gpu_pcie_receive_bytes_total", 1),
    ((FI_NVLINK_TX, ALL_LINKS), "llm_gpu_nvlink_transmit_bytes_total", 1024),
    ((FI_NVLINK_RX, ALL_LINKS), "llm_gpu_nvlink_receive_bytes_total", 1024),
)

# GPM metric ID → (family, scale): percentages become ratios, MiB/s becomes bytes/s, exactly as
# DCGM 4.6 derives DCGM_FI_PROF_* from GPM on Hopper (DcgmGpmManager.cpp, DcgmCacheManager.cpp).
GPM_METRICS: dict[int, tuple[str, Scale]] = {
    2: ("llm_gpu_sm_active_ratio", PERCENT),  # NVML_GPM_METRIC_SM_UTIL
    3: ("llm_gpu_sm_occupancy_ratio", PERCENT),  # NVML_GPM_METRIC_SM_OCCUPANCY
    5: ("llm_gpu_tensor_active_ratio", PERCENT),  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    10: ("llm_gpu_dram_active_ratio", PERCENT),  # NVML_GPM_METRIC_DRAM_BW_UTIL
    20: ("llm_gpu_pcie_transmit_bytes_per_second", MIB),  # NVML_GPM_METRIC_PCIE_TX_PER_SEC
    21: ("llm_gpu_pcie_receive_bytes_per_second", MIB),  # NVML_GPM_METRIC_PCIE_RX_PER_SEC
    60: ("llm_gpu_nvlink_receive_bytes_per_second", MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC
    61: ("llm_gpu_nvlink_transmit_bytes_per_second", MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
}
# NVML's own floor between two GPM samples ("should be greater than 100ms").
GPM_MIN_WINDOW_SECONDS = 0.1
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
MAX_EVENTS_PER_COLLECTION = 10_000


def load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise SourceError("unavailable", "nvidia-ml-py (pynvml) is not installed") from exc
    return pynvml


class _GpuFailure(Exception):
    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(f"{what}: {error}")
        self.code = getattr(error, "value", None)


@dataclass
class _Gpu:
    index: int
    handle: Any = None
    uuid: str = ""
    model: str = ""
    gpm: bool | None = None
    gpm_sample: Any = None
    gpm_sample_time: float = 0.0
    gpm_values: dict[str, float] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)
    fields: tuple = _FIELDS
    events_registered: bool = False
    failure: str = ""


class NvmlSource(Source):
    name = "nvml"
    timeout_seconds = 5.0

    def __init__(
        self,
        attributor: Attributor | None = None,
        first_window_seconds: float = 0.5,
        nvml: ModuleType | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._attributor = attributor
        self.first_window_seconds = first_window_seconds
        self._nvml = nvml
        self._clock = clock
        self._sleep = sleep
        self._initialized = False
        self._gpus: list[_Gpu] = []
        self._event_set: Any = None
        self._xids: dict[int, dict[int, float]] = {}
        # Every handle ever seen → GPU index: an XID can arrive after its GPU's handle was dropped.
        self._index_of_handle: dict[int | None, int] = {}

    # -- the Source interface --------------------------------------------------------------------

    def collect(self, now: float) -> list[Metric]:
        nvml = self._ensure_initialized()
        self._drain_xid_events(nvml)
        self._prime_gpm(nvml)
        readings = [self._read(nvml, gpu) for gpu in self._gpus]
        refs = [GpuRef(r.index, r.uuid, r.pids) for r in readings]
        attribution = self._attributor.attribute(refs) if self._attributor else [{} for _ in readings]
        return render_readings(readings, attribution)

    def close(self) -> None:
        nvml = self._nvml
        if not self._initialized or nvml is None:
            return
        for gpu in self._gpus:
            if gpu.gpm_sample is not None:
                quietly(nvml.nvmlGpmSampleFree, gpu.gpm_sample)
                gpu.gpm_sample = None
        if self._event_set is not None:
            quietly(nvml.nvmlEventSetFree, self._event_set)
            self._event_set = None
        quietly(nvml.nvmlShutdown)
        self._initialized = False

    # -- initialization and enumeration ----------------------------------------------------------

    def _ensure_initialized(self) -> ModuleType:
        if self._nvml is None:
            self._nvml = load_pynvml()
        nvml = self._nvml
        if self._initialized:
            return nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            raise SourceError("unavailable", f"NVML: {exc}") from exc
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except (nvml.NVMLError, AttributeError) as exc:
            log.info("nvml: no event set, so no XID counters (%s)", exc)
            self._event_set = None
        self._gpus = [_Gpu(index) for index in range(count)]
        for gpu in self._gpus:  # handles now, so XID events are registered before the first drain
            try:
                self._handle(nvml, gpu)
            except _GpuFailure:
                pass  # reported by the GPU's own read
        self._initialized = True
        log.info("nvml: %d GPU(s)", count)
        return nvml

    def _handle(self, nvml: ModuleType, gpu: _Gpu) -> Any:
        if gpu.handle is None:
            try:
                gpu.handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
            except nvml.NVMLError as exc:
                raise _GpuFailure("handle", exc) from exc
            self._index_of_handle[_address(gpu.handle)] = gpu.index
        if self._event_set is not None and not gpu.events_registered:
            try:
                nvml.nvmlDeviceRegisterEvents(gpu.handle, XID_EVENT, self._event_set)
            except nvml.NVMLError as exc:
                log.info("nvml: GPU %d: no XID events (%s)", gpu.index, exc)
            gpu.events_registered = True
        return gpu.handle

    # -- one GPU ---------------------------------------------------------------------------------

    def _query(self, nvml: ModuleType, gpu: _Gpu, key: str, call: Callable[[], Any]) -> Any:
        """`call()`, or None when this GPU cannot answer it; raises _GpuFailure for the rest."""
        if key in gpu.unsupported:
            return None
        try:
            return call()
        except nvml.NVMLError as exc:
            if exc.value in _UNSUPPORTED:
                log.debug("nvml: GPU %d: %s unavailable (%s)", gpu.index, key, exc)
                gpu.unsupported.add(key)
                return None
            if exc.value in _SKIP:
                return None
            raise _GpuFailure(key, exc) from exc
        except (nvml.NVMLLibraryMismatchError, AttributeError):
            # The driver's NVML (or this nvidia-ml-py) predates the call.
            gpu.unsupported.add(key)
            return None

    def _read(self, nvml: ModuleType, gpu: _Gpu) -> GpuReading:
        reading = GpuReading(str(gpu.index), gpu.uuid, gpu.model)
        reading.xid_counts = dict(self._xids.get(gpu.index, {}))
        try:
            self._read_into(nvml, gpu, reading)
        except _GpuFailure as failure:
            reading.up = False
            if str(failure) != gpu.failure:
                log.warning("nvml: GPU %d down: %s", gpu.index, failure)
            gpu.failure = str(failure)
            if failure.code in (GPU_IS_LOST, RESET_REQUIRED, NOT_FOUND):
                gpu.handle = None  # a reset GPU may come back under a new handle
                gpu.events_registered = False
                if gpu.gpm_sample is not None:
                    quietly(nvml.nvmlGpmSampleFree, gpu.gpm_sample)
                    gpu.gpm_sample = None
            return reading
        if gpu.failure:
            log.info("nvml: GPU %d answers again", gpu.index)
            gpu.failure = ""
        return reading

    def _read_into(self, nvml: ModuleType, gpu: _Gpu, reading: GpuReading) -> None:
        handle = self._handle(nvml, gpu)
        if not gpu.uuid:
            gpu.uuid = self._query(nvml, gpu, "uuid", lambda: nvml.nvmlDeviceGetUUID(handle)) or ""
        if not gpu.model:
            gpu.model = self._query(nvml, gpu, "name", lambda: nvml.nvmlDeviceGetName(handle)) or ""
        reading.uuid, reading.model = gpu.uuid, gpu.model

        used, total = self._memory(nvml, gpu, handle)
        reading.set("llm_gpu_memory_used_bytes", used)
        reading.set("llm_gpu_memory_total_bytes", total)
        rates = self._query(nvml, gpu, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        if rates is not None:
            reading.set("llm_gpu_utilization_ratio", scaled(rates.gpu, PERCENT))
        power_mw = self._query(nvml, gpu, "power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        if power_mw is not None:
            reading.set("llm_gpu_power_watts", power_mw / 1000.0)
        reading.set("llm_gpu_temperature_celsius", self._temperature(nvml, gpu, handle))
        sm_mhz = self._query(nvml, gpu, "sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        if sm_mhz is not None:
            reading.set("llm_gpu_sm_clock_hertz", sm_mhz * 1e6)
        self._field_counters(nvml, gpu, handle, reading)
        reading.throttle_reasons = self._throttle_reasons(nvml, gpu, handle)
        reading.pids = self._pids(nvml, gpu, handle)
        reading.values.update(self._gpm(nvml, gpu, handle))

    def _memory(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> tuple[float | None, float | None]:
        # v2 reports reserved memory apart from `used`, which then matches nvidia-smi; v1's
        # `used` includes what the driver reserves (research §4.1).
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            info = self._query(nvml, gpu, "memory_v2", lambda: nvml.nvmlDeviceGetMemoryInfo(handle, version=version))
            if info is not None:
                return info.used, info.total
        info = self._query(nvml, gpu, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        return (info.used, info.total) if info is not None else (None, None)

    def _temperature(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> float | None:
        sensor = nvml.NVML_TEMPERATURE_GPU
        value = self._query(nvml, gpu, "temperature_v", lambda: nvml.nvmlDeviceGetTemperatureV(handle, sensor))
        if value is None:  # drivers before TemperatureV; the old call goes with CUDA 14
            value = self._query(nvml, gpu, "temperature", lambda: nvml.nvmlDeviceGetTemperature(handle, sensor))
        return value

    def _field_counters(self, nvml: ModuleType, gpu: _Gpu, handle: Any, reading: GpuReading) -> None:
        if not gpu.fields:
            return
        ids = [field_id for field_id, _, _ in gpu.fields]
        values = self._query(nvml, gpu, "fields", lambda: nvml.nvmlDeviceGetFieldValues(handle, ids))
        if values is None:
            return
        kept = []
        for (field_id, family, scale), value in zip(gpu.fields, values):
            if value.nvmlReturn in _UNSUPPORTED:
                continue  # this counter is not on this GPU (no NVLink on PCIe cards): stop asking
            kept.append((field_id, family, scale))
            if value.nvmlReturn == 0:
                reading.set(family, _field_value(value) * scale)
        gpu.fields = tuple(kept)

    def _throttle_reasons(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> int | None:
        value = self._query(nvml, gpu, "clocks_event", lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        if value is None:  # the name before R535
            value = self._query(nvml, gpu, "throttle", lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        return value

    def _pids(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> frozenset[int]:
        pids: set[int] = set()
        for key, call in (
            ("compute_processes", nvml.nvmlDeviceGetComputeRunningProcesses),
            ("graphics_processes", nvml.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            processes = self._query(nvml, gpu, key, lambda call=call: call(handle))
            pids.update(p.pid for p in processes or ())
        return frozenset(pids)

    # -- GPM -------------------------------------------------------------------------------------

    def _gpm_supported(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> bool:
        if gpu.gpm is None:
            support = self._query(nvml, gpu, "gpm_support", lambda: nvml.nvmlGpmQueryDeviceSupport(handle))
            gpu.gpm = bool(support is not None and support.isSupportedDevice)
            log.info("nvml: GPU %d: GPM %s", gpu.index, "supported" if gpu.gpm else "not supported")
        return gpu.gpm

    def _take_gpm_sample(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> Any:
        sample = nvml.nvmlGpmSampleAlloc()
        try:
            nvml.nvmlGpmSampleGet(handle, sample)
        except nvml.NVMLError:
            nvml.nvmlGpmSampleFree(sample)
            raise
        return sample

    def _prime_gpm(self, nvml: ModuleType) -> None:
        """Give every GPM GPU without a previous sample one now, then wait one window for all."""
        primed = 0
        for gpu in self._gpus:
            if gpu.gpm is False or gpu.gpm_sample is not None:
                continue
            try:
                handle = self._handle(nvml, gpu)
                if not self._gpm_supported(nvml, gpu, handle):
                    continue
                gpu.gpm_sample = self._take_gpm_sample(nvml, gpu, handle)
                gpu.gpm_sample_time = self._clock()
                primed += 1
            except (_GpuFailure, nvml.NVMLError):
                continue  # the GPU's own read reports what is wrong with it
        if primed:
            self._sleep(max(self.first_window_seconds, GPM_MIN_WINDOW_SECONDS))

    def _gpm(self, nvml: ModuleType, gpu: _Gpu, handle: Any) -> dict[str, float]:
        if not self._gpm_supported(nvml, gpu, handle) or "gpm" in gpu.unsupported:
            return {}
        current = self._query(nvml, gpu, "gpm", lambda: self._take_gpm_sample(nvml, gpu, handle))
        if current is None:
            return {}
        taken = self._clock()
        previous = gpu.gpm_sample
        if previous is None or taken - gpu.gpm_sample_time < GPM_MIN_WINDOW_SECONDS:
            if previous is None:
                gpu.gpm_sample, gpu.gpm_sample_time = current, taken
            else:  # too soon for a new window: keep serving the last one
                nvml.nvmlGpmSampleFree(current)
            return dict(gpu.gpm_values)
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.sample1, request.sample2 = previous, current
        ids = list(GPM_METRICS)
        request.numMetrics = len(ids)
        for position, metric_id in enumerate(ids):
            request.metrics[position].metricId = metric_id
        try:
            result = self._query(nvml, gpu, "gpm", lambda: nvml.nvmlGpmMetricsGet(request))
        finally:
            nvml.nvmlGpmSampleFree(previous)
            gpu.gpm_sample, gpu.gpm_sample_time = current, taken
        values: dict[str, float] = {}
        if result is not None:
            for position, metric_id in enumerate(ids):
                metric = request.metrics[position]
                if metric.nvmlReturn == 0 and metric.value == metric.value:  # per-metric status; NaN = no data
                    family, scale = GPM_METRICS[metric_id]
                    values[family] = scaled(metric.value, scale)
        gpu.gpm_values = values
        return dict(values)

    # -- XID events ------------------------------------------------------------------------------

    def _drain_xid_events(self, nvml: ModuleType) -> None:
        """Count the XID events queued since the last collection, by GPU and XID code."""
        if self._event_set is None:
            return
        for _ in range(MAX_EVENTS_PER_COLLECTION):
            try:
                event = nvml.nvmlEventSetWait(self._event_set, 0)
            except nvml.NVMLError as exc:
                if exc.value != TIMEOUT:
                    log.debug("nvml: event wait: %s", exc)
                return
            if not event.eventType & XID_EVENT:
                continue
            index = self._index_of_handle.get(_address(event.device))
            if index is None:
                continue
            counts = self._xids.setdefault(index, {})
            counts[int(event.eventData)] = counts.get(int(event.eventData), 0.0) + 1.0
            log.warning("nvml: GPU %d: XID %d", index, event.eventData)


def _field_value(value: Any) -> float:
    # nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        value.valueType, "ullVal"
    )
    return float(getattr(value.value, member))


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value


def quietly(call: Callable[..., Any], *args: Any) -> None:
    try:
        call(*args)
    except Exception as exc:  # closing must not fail the shutdown of the others
        log.debug("nvml: %s: %s", getattr(call, "__name__", call), exc)
