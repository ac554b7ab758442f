"""Read NVML (nvidia-ml-py) into typed per-GPU readings, in NVML's own units; no metric names here.

Per GPU: inventory, memory, utilization, power, temperature, SM clock, the PCIe/NVLink byte
counters, clock-event reasons, running PIDs, XID events and (Hopper and newer) a GPM window.
`exporter.sources.nvml` maps these readings to `llm_gpu_*`.

Failure is kept as small as it can be: `NOT_SUPPORTED` (or no permission) leaves that one value
out and is not asked again; `GPU_IS_LOST` or any other failure of one GPU makes its reading
`up=False` while the others carry on; a missing library or driver raises
`SourceError("unavailable")`, and the next read tries again.

NVML constants are used by their nvidia-ml-py names and looked up in the loaded module, so this
module imports without the library.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from exporter.sources.base import SourceError
from exporter.sources.gpu_common import quietly
from exporter.sources.nvml_gpm import GPM_MIN_WINDOW_SECONDS, GpmMetrics, GpmWindow, Query
from exporter.sources.nvml_links import NvLinkReader, NvLinks, PcieLink, read_pcie

log = logging.getLogger(__name__)
T = TypeVar("T")

# NVML return codes (nvml.h NVML_ERROR_*) by how each is taken. A name this nvidia-ml-py lacks is
# skipped: a binding that predates a code predates the calls that return it.
# Permanent for this device and call: leave the value out and stop asking.
UNSUPPORTED_ERRORS = (
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
)
# Transient: leave the value out this time.
TRANSIENT_ERRORS = ("NVML_ERROR_NO_DATA", "NVML_ERROR_NOT_READY")
# The GPU's handle is no longer good: a reset GPU may come back under a new one.
GPU_GONE_ERRORS = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED", "NVML_ERROR_NOT_FOUND")

# nvmlFieldValue_t.scopeId that sums every NVLink (nvml.h: "UINT_MAX"; nvidia-ml-py names no constant).
ALL_NVLINKS = 0xFFFFFFFF
# nvmlValue_t member by nvmlValueType_t name; an unknown type is read as unsigned long long.
VALUE_MEMBERS = (
    ("NVML_VALUE_TYPE_DOUBLE", "dVal"),
    ("NVML_VALUE_TYPE_UNSIGNED_INT", "uiVal"),
    ("NVML_VALUE_TYPE_UNSIGNED_LONG", "ulVal"),
    ("NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", "ullVal"),
    ("NVML_VALUE_TYPE_SIGNED_LONG_LONG", "sllVal"),
    ("NVML_VALUE_TYPE_SIGNED_INT", "siVal"),
    ("NVML_VALUE_TYPE_UNSIGNED_SHORT", "usVal"),
)
MAX_EVENTS_PER_COLLECTION = 10_000


@dataclass(frozen=True)
class TrafficCounters:
    """NVML's cumulative PCIe byte and NVLink data (KiB) counters; None where the GPU has none."""

    pcie_tx_bytes: float | None = None
    pcie_rx_bytes: float | None = None
    nvlink_tx_kib: float | None = None
    nvlink_rx_kib: float | None = None


# TrafficCounters attribute → (nvidia-ml-py field ID name, scope ID).
TRAFFIC_FIELDS: dict[str, tuple[str, int]] = {
    "pcie_tx_bytes": ("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 0),
    "pcie_rx_bytes": ("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 0),
    "nvlink_tx_kib": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", ALL_NVLINKS),
    "nvlink_rx_kib": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", ALL_NVLINKS),
}


@dataclass(frozen=True)
class NvmlGpuReading:
    """One GPU in one collection, as NVML reports it; None is "this GPU cannot say".

    A GPU that failed (`up=False`) carries only its identity from earlier reads and its XID counts:
    an XID (79, "fallen off the bus") is what explains why it is down.
    """

    index: int
    uuid: str = ""
    name: str = ""
    up: bool = True
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    gpu_utilization_percent: int | None = None
    power_milliwatts: int | None = None
    temperature_celsius: int | None = None
    sm_clock_mhz: int | None = None
    traffic: TrafficCounters = TrafficCounters()
    clocks_event_reasons: int | None = None  # nvmlClocksEventReason* bitmask
    pids: frozenset[int] = frozenset()
    gpm: GpmMetrics | None = None  # None: no GPM on this GPU
    xid_counts: Mapping[int, float] = field(default_factory=dict)  # XID code → events since start
    pcie: PcieLink = PcieLink()
    nvlinks: NvLinks | None = None


def load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise SourceError("unavailable", "nvidia-ml-py (pynvml) is not installed") from exc
    return pynvml


def codes(nvml: ModuleType, names: Iterable[str]) -> frozenset[int]:
    """The values of those NVML_ERROR_* names the loaded nvidia-ml-py defines."""
    return frozenset(getattr(nvml, name) for name in names if hasattr(nvml, name))


class _GpuFailure(Exception):
    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(f"{what}: {error}")
        self.code = getattr(error, "value", None)


@dataclass
class _Gpu:
    """What the reader keeps about one GPU between collections."""

    index: int
    gpm: GpmWindow
    handle: Any = None
    uuid: str = ""
    name: str = ""
    unsupported: set[str] = field(default_factory=set)
    # (TrafficCounters attribute, field ID, scope) still asked: one the GPU lacks is dropped.
    fields: tuple[tuple[str, int, int], ...] = ()
    events_registered: bool = False
    failure: str = ""
    nvlinks: NvLinkReader = field(default_factory=NvLinkReader)


class NvmlReader:
    """NVML calls for every GPU of the node; `read()` returns one `NvmlGpuReading` per GPU."""

    def __init__(
        self,
        first_window_seconds: float,
        nvml: ModuleType | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
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
        # Error classes and value types by code, resolved in the loaded module at initialization.
        self._unsupported = self._transient = self._gone = frozenset[int]()
        self._value_members: dict[int, str] = {}

    @property
    def started(self) -> bool:
        """NVML initialised and the GPUs found: what is left of a collection is reading them."""
        return self._initialized

    def read(self) -> list[NvmlGpuReading]:
        nvml = self._ensure_initialized()
        self._drain_xid_events(nvml)
        self._prime_gpm(nvml)
        return [self._read(nvml, gpu) for gpu in self._gpus]

    def close(self) -> None:
        nvml = self._nvml
        if not self._initialized or nvml is None:
            return
        for gpu in self._gpus:
            gpu.gpm.release()
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
        self._unsupported = codes(nvml, UNSUPPORTED_ERRORS)
        self._transient = codes(nvml, TRANSIENT_ERRORS)
        self._gone = codes(nvml, GPU_GONE_ERRORS)
        self._value_members = {getattr(nvml, name): member for name, member in VALUE_MEMBERS}
        fields = tuple((attr, getattr(nvml, name), scope) for attr, (name, scope) in TRAFFIC_FIELDS.items())
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except (nvml.NVMLError, AttributeError) as exc:
            log.info("nvml: no event set, so no XID counters (%s)", exc)
            self._event_set = None
        self._gpus = [_Gpu(index, GpmWindow(index, nvml, self._clock), fields=fields) for index in range(count)]
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
                nvml.nvmlDeviceRegisterEvents(gpu.handle, nvml.nvmlEventTypeXidCriticalError, self._event_set)
            except nvml.NVMLError as exc:
                log.info("nvml: GPU %d: no XID events (%s)", gpu.index, exc)
            gpu.events_registered = True
        return gpu.handle

    # -- one GPU ---------------------------------------------------------------------------------

    def _query(self, gpu: _Gpu, key: str, call: Callable[[], T]) -> T | None:
        """`call()`, or None when this GPU cannot answer it; raises _GpuFailure for the rest."""
        nvml = self._nvml
        assert nvml is not None
        if key in gpu.unsupported:
            return None
        try:
            return call()
        except nvml.NVMLError as exc:
            if exc.value in self._unsupported:
                log.debug("nvml: GPU %d: %s unavailable (%s)", gpu.index, key, exc)
                gpu.unsupported.add(key)
                return None
            if exc.value in self._transient:
                return None
            raise _GpuFailure(key, exc) from exc
        except (nvml.NVMLLibraryMismatchError, AttributeError):
            # The driver's NVML (or this nvidia-ml-py) predates the call.
            gpu.unsupported.add(key)
            return None

    def _query_for(self, gpu: _Gpu) -> Query:
        def query(key: str, call: Callable[[], T]) -> T | None:
            return self._query(gpu, key, call)

        return query

    def _read(self, nvml: ModuleType, gpu: _Gpu) -> NvmlGpuReading:
        xids = dict(self._xids.get(gpu.index, {}))
        try:
            reading = self._read_answering(nvml, gpu, xids)
        except _GpuFailure as failure:
            if str(failure) != gpu.failure:
                log.warning("nvml: GPU %d down: %s", gpu.index, failure)
            gpu.failure = str(failure)
            if failure.code in self._gone:
                gpu.handle = None  # a reset GPU may come back under a new handle
                gpu.events_registered = False
                gpu.gpm.release()
            return NvmlGpuReading(gpu.index, gpu.uuid, gpu.name, up=False, xid_counts=xids)
        if gpu.failure:
            log.info("nvml: GPU %d answers again", gpu.index)
            gpu.failure = ""
        return reading

    def _read_answering(self, nvml: ModuleType, gpu: _Gpu, xids: Mapping[int, float]) -> NvmlGpuReading:
        handle = self._handle(nvml, gpu)
        query = self._query_for(gpu)
        if not gpu.uuid:
            gpu.uuid = query("uuid", lambda: nvml.nvmlDeviceGetUUID(handle)) or ""
        if not gpu.name:
            gpu.name = query("name", lambda: nvml.nvmlDeviceGetName(handle)) or ""
        used, total = self._memory(nvml, query, handle)
        rates = query("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        return NvmlGpuReading(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.name,
            memory_used_bytes=used,
            memory_total_bytes=total,
            gpu_utilization_percent=rates.gpu if rates is not None else None,
            power_milliwatts=query("power", lambda: nvml.nvmlDeviceGetPowerUsage(handle)),
            temperature_celsius=self._temperature(nvml, query, handle),
            sm_clock_mhz=query("sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            traffic=self._traffic(nvml, gpu, query, handle),
            clocks_event_reasons=self._clocks_event_reasons(nvml, query, handle),
            pids=self._pids(nvml, query, handle),
            gpm=gpu.gpm.read(handle, query),
            xid_counts=xids,
            pcie=read_pcie(nvml, query, handle),
            nvlinks=gpu.nvlinks.read(nvml, query, handle),
        )

    def _memory(self, nvml: ModuleType, query: Query, handle: Any) -> tuple[int | None, int | None]:
        # v2 reports reserved memory apart from `used`, which then matches nvidia-smi; v1's
        # `used` includes what the driver reserves (research §4.1).
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            info = query("memory_v2", lambda: nvml.nvmlDeviceGetMemoryInfo(handle, version=version))
            if info is not None:
                return info.used, info.total
        info = query("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        return (info.used, info.total) if info is not None else (None, None)

    def _temperature(self, nvml: ModuleType, query: Query, handle: Any) -> int | None:
        sensor = nvml.NVML_TEMPERATURE_GPU
        value = query("temperature_v", lambda: nvml.nvmlDeviceGetTemperatureV(handle, sensor))
        if value is None:  # drivers before TemperatureV; the old call goes with CUDA 14
            value = query("temperature", lambda: nvml.nvmlDeviceGetTemperature(handle, sensor))
        return value

    def _traffic(self, nvml: ModuleType, gpu: _Gpu, query: Query, handle: Any) -> TrafficCounters:
        if not gpu.fields:
            return TrafficCounters()
        ids = [(field_id, scope) for _, field_id, scope in gpu.fields]
        values = query("fields", lambda: nvml.nvmlDeviceGetFieldValues(handle, ids))
        if values is None:
            return TrafficCounters()
        kept, counters = [], {}
        for (attribute, field_id, scope), value in zip(gpu.fields, values):
            if value.nvmlReturn in self._unsupported:
                continue  # this counter is not on this GPU (no NVLink on PCIe cards): stop asking
            kept.append((attribute, field_id, scope))
            if value.nvmlReturn == nvml.NVML_SUCCESS:
                member = self._value_members.get(value.valueType, "ullVal")
                counters[attribute] = float(getattr(value.value, member))
        gpu.fields = tuple(kept)
        return TrafficCounters(**counters)

    def _clocks_event_reasons(self, nvml: ModuleType, query: Query, handle: Any) -> int | None:
        value = query("clocks_event", lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        if value is None:  # the name before R535
            value = query("throttle", lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        return value

    def _pids(self, nvml: ModuleType, query: Query, handle: Any) -> frozenset[int]:
        pids: set[int] = set()
        for key, call in (
            ("compute_processes", nvml.nvmlDeviceGetComputeRunningProcesses),
            ("graphics_processes", nvml.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            processes = query(key, functools.partial(call, handle))
            pids.update(p.pid for p in processes or ())
        return frozenset(pids)

    # -- GPM priming and XID events --------------------------------------------------------------

    def _prime_gpm(self, nvml: ModuleType) -> None:
        """Give every GPM GPU without a previous sample one now, then wait one window for all."""
        primed = 0
        for gpu in self._gpus:
            if not gpu.gpm.needs_priming:
                continue
            try:
                handle = self._handle(nvml, gpu)
                primed += gpu.gpm.prime(handle, self._query_for(gpu))
            except (_GpuFailure, nvml.NVMLError):
                continue  # the GPU's own read reports what is wrong with it
        if primed:
            self._sleep(max(self.first_window_seconds, GPM_MIN_WINDOW_SECONDS))

    def _drain_xid_events(self, nvml: ModuleType) -> None:
        """Count the XID events queued since the last collection, by GPU and XID code."""
        if self._event_set is None:
            return
        xid_event = nvml.nvmlEventTypeXidCriticalError
        for _ in range(MAX_EVENTS_PER_COLLECTION):
            try:
                event = nvml.nvmlEventSetWait(self._event_set, 0)
            except nvml.NVMLError as exc:
                if exc.value != nvml.NVML_ERROR_TIMEOUT:
                    log.debug("nvml: event wait: %s", exc)
                return
            if not event.eventType & xid_event:
                continue
            index = self._index_of_handle.get(_address(event.device))
            if index is None:
                continue
            counts = self._xids.setdefault(index, {})
            counts[int(event.eventData)] = counts.get(int(event.eventData), 0.0) + 1.0
            log.warning("nvml: GPU %d: XID %d", index, event.eventData)


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value
