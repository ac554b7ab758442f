"""Read a DCGM host engine (standalone or embedded) through pydcgm into typed per-GPU readings.

pydcgm is loaded, and the host engine reached, by `exporter.sources.dcgm_connection`. Fields are
named by numeric ID, which DCGM 4.6's renames did not change; the IDs are named below once, by
their dcgm_fields.h names. DCGM reports a missing value as a "blank" sentinel rather
than an error; those are dropped here, never handed on. `exporter.sources.dcgm` maps the readings
to `llm_gpu_*`.

Unavailability is graded: no pydcgm or libdcgm, or a host engine that does not answer
(`ConnectionNotValid`) raises `SourceError` and the reader reconnects on the next read; profiling
fields that cannot be watched (`ProfilingNotSupported`, `ModuleNotLoaded`, `NotSupported`,
`RequiresRoot` on pre-Hopper GPUs without root, perfmon held by another profiler) only leave those
values out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from exporter.sources.base import SourceError
from exporter.sources.dcgm_connection import DcgmModules, load_dcgm, open_handle
from exporter.sources.gpu_common import quietly

log = logging.getLogger(__name__)

# DCGM field IDs, by their names in dcgm_fields.h (and pydcgm's dcgm_fields.py); units as documented
# there. DCGM 4.6 renamed some fields for dcgm-exporter but kept every ID.
DCGM_FI_DEV_SM_CLOCK = 100  # MHz
DCGM_FI_DEV_CLOCKS_EVENT_REASONS = 112  # bitmask; DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.3
DCGM_FI_DEV_GPU_TEMP = 150  # °C
DCGM_FI_DEV_POWER_USAGE = 155  # W
DCGM_FI_DEV_GPU_UTIL = 203  # percent
DCGM_FI_DEV_XID_ERRORS = 230  # the latest XID code
DCGM_FI_DEV_FB_TOTAL = 250  # MiB
DCGM_FI_DEV_FB_FREE = 251  # MiB
DCGM_FI_DEV_FB_USED = 252  # MiB
DCGM_FI_PROF_SM_ACTIVE = 1002  # ratio
DCGM_FI_PROF_SM_OCCUPANCY = 1003  # ratio
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE = 1004  # ratio
DCGM_FI_PROF_DRAM_ACTIVE = 1005  # ratio
DCGM_FI_PROF_PCIE_TX_BYTES = 1009  # B/s
DCGM_FI_PROF_PCIE_RX_BYTES = 1010  # B/s
DCGM_FI_PROF_NVLINK_TX_BYTES = 1011  # B/s
DCGM_FI_PROF_NVLINK_RX_BYTES = 1012  # B/s
DCGM_FE_GPU = 1  # dcgm_fields.h entity group of whole GPUs

# Blank sentinels (dcgmvalue.py): anything at or above these is "no value" (+1 not found,
# +2 not supported, +3 no permission); the FP64 blank also stands for NaN from GPM.
INT32_BLANK = 0x7FFFFFF0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0
STR_BLANK = "<<<NULL>>>"

# DCGM status codes (dcgm_structs.h dcgmReturn_t) and how each is taken.
DCGM_ST_NOT_SUPPORTED, DCGM_ST_CONNECTION_NOT_VALID, DCGM_ST_LIBRARY_NOT_FOUND = -6, -21, -25
DCGM_ST_REQUIRES_ROOT, DCGM_ST_MODULE_NOT_LOADED, DCGM_ST_IN_USE = -29, -33, -34
DCGM_ST_PROFILING_NOT_SUPPORTED, DCGM_ST_PROFILING_LIBRARY_ERROR, DCGM_ST_PROFILING_MULTI_PASS = -36, -37, -38
PROFILING_UNAVAILABLE = frozenset(
    {
        DCGM_ST_NOT_SUPPORTED,
        DCGM_ST_REQUIRES_ROOT,
        DCGM_ST_MODULE_NOT_LOADED,
        DCGM_ST_IN_USE,
        DCGM_ST_PROFILING_NOT_SUPPORTED,
        DCGM_ST_PROFILING_LIBRARY_ERROR,
        DCGM_ST_PROFILING_MULTI_PASS,
    }
)


@dataclass(frozen=True)
class DcgmGpuReading:
    """One GPU's latest non-blank values, in DCGM's units (see the field IDs); None is "no value"."""

    gpu_id: int
    uuid: str = ""
    device_name: str = ""
    sm_clock_mhz: float | None = None
    gpu_temp_celsius: float | None = None
    power_usage_watts: float | None = None
    gpu_util_percent: float | None = None
    fb_total_mib: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    clocks_event_reasons: int | None = None
    prof_sm_active: float | None = None
    prof_sm_occupancy: float | None = None
    prof_pipe_tensor_active: float | None = None
    prof_dram_active: float | None = None
    prof_pcie_tx_bytes: float | None = None
    prof_pcie_rx_bytes: float | None = None
    prof_nvlink_tx_bytes: float | None = None
    prof_nvlink_rx_bytes: float | None = None
    xid_counts: Mapping[int, float] = field(default_factory=dict)  # XID code → occurrences since start

    @property
    def has_values(self) -> bool:
        """Whether DCGM held any value at all (not: fallen off the bus, or not yet sampled)."""
        return any(getattr(self, attribute) is not None for attribute in FIELD_ATTRIBUTES.values())


# Watched field ID → DcgmGpuReading attribute: base fields always, profiling where DCGM can.
BASE_FIELDS: dict[int, str] = {
    DCGM_FI_DEV_SM_CLOCK: "sm_clock_mhz",
    DCGM_FI_DEV_GPU_TEMP: "gpu_temp_celsius",
    DCGM_FI_DEV_POWER_USAGE: "power_usage_watts",
    DCGM_FI_DEV_GPU_UTIL: "gpu_util_percent",
    DCGM_FI_DEV_FB_TOTAL: "fb_total_mib",
    DCGM_FI_DEV_FB_USED: "fb_used_mib",
    DCGM_FI_DEV_FB_FREE: "fb_free_mib",
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS: "clocks_event_reasons",
}
PROFILING_FIELDS: dict[int, str] = {
    DCGM_FI_PROF_SM_ACTIVE: "prof_sm_active",
    DCGM_FI_PROF_SM_OCCUPANCY: "prof_sm_occupancy",
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: "prof_pipe_tensor_active",
    DCGM_FI_PROF_DRAM_ACTIVE: "prof_dram_active",
    DCGM_FI_PROF_PCIE_TX_BYTES: "prof_pcie_tx_bytes",
    DCGM_FI_PROF_PCIE_RX_BYTES: "prof_pcie_rx_bytes",
    DCGM_FI_PROF_NVLINK_TX_BYTES: "prof_nvlink_tx_bytes",
    DCGM_FI_PROF_NVLINK_RX_BYTES: "prof_nvlink_rx_bytes",
}
FIELD_ATTRIBUTES = {**BASE_FIELDS, **PROFILING_FIELDS}
INTEGER_ATTRIBUTES = frozenset({"clocks_event_reasons"})


def is_blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (bytes, str)):
        return (value.decode(errors="replace") if isinstance(value, bytes) else value) == STR_BLANK
    if isinstance(value, float):
        return value != value or value >= FP64_BLANK
    if isinstance(value, int):
        return INT32_BLANK <= value < (1 << 31) or value >= INT64_BLANK
    return False


def status_code(error: BaseException) -> int | None:
    """The DCGM_ST_* code of a DCGMError (pydcgm keeps it in `.value`)."""
    value = getattr(error, "value", None)
    return value if isinstance(value, int) else None


@dataclass
class _Gpu:
    gpu_id: int
    uuid: str = ""
    device_name: str = ""
    last_xid_ts: int | None = None


class DcgmReader:
    """One connection to a host engine, its watched field groups, and the XID counts so far."""

    def __init__(self, address: str, interval_seconds: float, modules: DcgmModules | None = None) -> None:
        self.address = address
        self._interval = interval_seconds
        self._modules = modules
        self._handle: Any = None
        self._group: Any = None
        self._base_fields: Any = None
        self._prof_fields: Any = None
        self._xid_fields: Any = None
        self._xid_collection: Any = None
        self._gpus: list[_Gpu] = []
        self._xids: dict[int, dict[int, float]] = {}
        #: captures holding DCGM's profiling paused (profiling_paused); a lock, as they run in
        #: threads of their own beside the collection
        self._pauses = 0
        self._pause_lock = threading.Lock()

    # -- connection ------------------------------------------------------------------------------

    def _connect(self) -> None:
        modules = self._modules = self._modules or load_dcgm()
        pydcgm, structs = modules.pydcgm, modules.structs
        tag = f"llm-exporter-{os.getpid()}"  # names must be unique per host engine
        try:
            self._handle = open_handle(modules, self.address)
            system = self._handle.GetSystem()
            gpu_ids = list(system.discovery.GetAllSupportedGpuIds())
            self._group = pydcgm.DcgmGroup(self._handle, groupName=tag, groupType=structs.DCGM_GROUP_EMPTY)
            self._gpus = []
            for gpu_id in gpu_ids:
                self._group.AddGpu(gpu_id)
                identifiers = system.discovery.GetGpuAttributes(gpu_id).identifiers
                self._gpus.append(_Gpu(gpu_id, _text(identifiers.uuid), _text(identifiers.deviceName)))
            # DCGM updates at half our interval so a fresh value is always there when we read
            # (the advice of DCGM's own dcgm_prometheus.py); a few samples only, PR #32 of
            # slurm-job-exporter saw stale H100 values with maxKeepSamples=0.
            update_us = max(100_000, int(self._interval * 1e6 / 2))
            keep_age = max(30.0, self._interval * 3)
            self._base_fields = pydcgm.DcgmFieldGroup(self._handle, name=f"{tag}-base", fieldIds=list(BASE_FIELDS))
            self._group.samples.WatchFields(self._base_fields, update_us, keep_age, 5)
            self._xid_fields = pydcgm.DcgmFieldGroup(self._handle, name=f"{tag}-xid", fieldIds=[DCGM_FI_DEV_XID_ERRORS])
            self._group.samples.WatchFields(self._xid_fields, update_us, keep_age, 0)
            self._prof_fields = self._watch_profiling(structs, pydcgm, tag, update_us, keep_age)
            with self._pause_lock:  # a new host engine (restarted) knows nothing of a pause
                if self._pauses:
                    self._profiling("Pause")
            system.UpdateAllFields(1)
        except structs.DCGMError as exc:
            self._disconnect()
            raise self._source_error(exc) from exc
        log.info(
            "dcgm: connected to %s, %d GPU(s), profiling %s",
            self.address,
            len(self._gpus),
            "watched" if self._prof_fields is not None else "unavailable",
        )

    def _watch_profiling(
        self, structs: ModuleType, pydcgm: ModuleType, tag: str, update_us: int, keep_age: float
    ) -> Any:
        fields = None
        try:
            fields = pydcgm.DcgmFieldGroup(self._handle, name=f"{tag}-prof", fieldIds=list(PROFILING_FIELDS))
            self._group.samples.WatchFields(fields, update_us, keep_age, 5)
            return fields
        except structs.DCGMError as exc:
            if status_code(exc) not in PROFILING_UNAVAILABLE:
                raise
            log.warning("dcgm: profiling fields (SM/tensor/DRAM active, PCIe/NVLink rates) unavailable: %s", exc)
            if fields is not None:
                quietly(fields.Delete)
            return None

    @contextlib.contextmanager
    def profiling_paused(self) -> Iterator[None]:
        """DCGM's profiling module paused while the block runs, resumed after whatever happened in
        it: a GPU trace (CUPTI, an engine's profiler) and DCGM's profiling cannot both hold the
        GPU's performance counters. Nested blocks (two engines captured at once) resume when the
        last ends. While paused the profiling fields are left out of readings, absent rather than
        zero: DCGM stores blanks then, but its latest value may be one from before the pause."""
        self._change_pauses(+1)
        try:
            yield
        finally:
            self._change_pauses(-1)

    def _change_pauses(self, change: int) -> None:
        with self._pause_lock:
            before = self._pauses
            self._pauses = max(0, before + change)  # close() may have released them all
            if (before == 0) != (self._pauses == 0):  # the first pause, or the last one released
                self._profiling("Pause" if self._pauses else "Resume")

    def _profiling(self, call: str) -> None:
        """pydcgm's DcgmSystem.profiling.Pause/Resume (dcgm_agent.dcgmProfPause/Resume on this
        handle); nothing while unconnected or with no profiling watched. A failure is logged: the
        capture goes on (the engine's trace may then lack GPU kernels, which its summary shows)."""
        if self._handle is None or self._prof_fields is None:
            return
        assert self._modules is not None
        try:
            getattr(self._handle.GetSystem().profiling, call)()
        except self._modules.structs.DCGMError as exc:
            log.warning("dcgm: profiling %s failed: %s", call.lower(), exc)
        else:
            log.info("dcgm: profiling %s", "paused for a profile capture" if call == "Pause" else "resumed")

    def _disconnect(self) -> None:
        for fields in (self._prof_fields, self._xid_fields, self._base_fields):
            if fields is not None:
                quietly(fields.Delete)
        if self._group is not None:
            quietly(self._group.Delete)
        if self._handle is not None:
            quietly(self._handle.Shutdown)
        self._handle = self._group = self._base_fields = self._prof_fields = self._xid_fields = None
        self._xid_collection = None

    def _source_error(self, exc: BaseException) -> SourceError:
        code = status_code(exc)
        if code == DCGM_ST_CONNECTION_NOT_VALID:
            return SourceError("connection", f"DCGM host engine at {self.address}: {exc}")
        if code == DCGM_ST_LIBRARY_NOT_FOUND:
            return SourceError("unavailable", f"libdcgm not found: {exc}")
        return SourceError("dcgm_error", f"DCGM at {self.address}: {exc}")

    # -- collection ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Connected to the host engine with the fields watched: what is left is reading them."""
        return self._handle is not None

    def read(self) -> list[DcgmGpuReading]:
        """The latest values of every GPU, connecting first where there is no connection."""
        if self._handle is None:
            self._connect()
        assert self._modules is not None
        try:
            base = self._group.samples.GetLatest_v2(self._base_fields).values
            watched = self._prof_fields is not None and not self._pauses
            prof = self._group.samples.GetLatest_v2(self._prof_fields).values if watched else {}
            self._xid_collection = self._group.samples.GetAllSinceLastCall_v2(self._xid_collection, self._xid_fields)
        except self._modules.structs.DCGMError as exc:
            if status_code(exc) == DCGM_ST_CONNECTION_NOT_VALID:
                self._disconnect()  # the host engine restarted or died: reconnect next time
            raise self._source_error(exc) from exc
        self._count_xids(self._xid_collection.values)
        return [self._reading(gpu, base, prof) for gpu in self._gpus]

    def _reading(self, gpu: _Gpu, base: Any, prof: Any) -> DcgmGpuReading:
        values = {**_latest(base, gpu.gpu_id, BASE_FIELDS), **_latest(prof, gpu.gpu_id, PROFILING_FIELDS)}
        typed: dict[str, Any] = {}  # attribute → value, each of its declared type
        for field_id, value in values.items():
            attribute = FIELD_ATTRIBUTES[field_id]
            typed[attribute] = int(value) if attribute in INTEGER_ATTRIBUTES else float(value)
        xids = dict(self._xids.get(gpu.gpu_id, {}))
        return DcgmGpuReading(gpu.gpu_id, gpu.uuid, gpu.device_name, xid_counts=xids, **typed)

    def _count_xids(self, collection: Any) -> None:
        """Count each XID value DCGM recorded since the last read, by its timestamp.

        DCGM_FI_DEV_XID_ERRORS holds only the latest XID; its time series since our last call tells each
        occurrence apart. The first read only sets the mark: an XID older than the exporter is
        not counted as new. GetAllSinceLastCall_v2 re-returns the latest value when nothing new
        arrived, which the timestamp filters out.
        """
        for gpu in self._gpus:
            series = _series(collection, gpu.gpu_id, DCGM_FI_DEV_XID_ERRORS)
            first_read = gpu.last_xid_ts is None
            mark = gpu.last_xid_ts if gpu.last_xid_ts is not None else -1
            for sample in series:
                ts = getattr(sample, "ts", 0)
                if ts <= mark or getattr(sample, "isBlank", False) or is_blank(sample.value):
                    continue
                mark = max(mark, ts)
                if not first_read and int(sample.value) != 0:
                    counts = self._xids.setdefault(gpu.gpu_id, {})
                    counts[int(sample.value)] = counts.get(int(sample.value), 0.0) + 1.0
                    log.warning("dcgm: GPU %d: XID %d", gpu.gpu_id, int(sample.value))
            gpu.last_xid_ts = max(mark, 0) if first_read else mark

    def close(self) -> None:
        """Disconnect; a pause still held (a capture running through a reload or the exporter's
        stop) is resumed first: the host engine outlives this connection, and other clients too."""
        with self._pause_lock:
            if self._pauses:
                self._profiling("Resume")
                self._pauses = 0
            self._disconnect()


def _series(values: Any, gpu_id: int, field_id: int) -> list[Any]:
    try:
        series = values[DCGM_FE_GPU][gpu_id][field_id]
    except (KeyError, IndexError, TypeError):
        return []
    return list(getattr(series, "values", series) or [])


def _latest(values: Any, gpu_id: int, field_ids: Iterable[int]) -> dict[int, Any]:
    """The latest non-blank value of each field for one GPU."""
    result = {}
    for field_id in field_ids:
        series = _series(values, gpu_id, field_id)
        if not series:
            continue
        sample = series[-1]
        if getattr(sample, "isBlank", False) or is_blank(sample.value):
            continue
        result[field_id] = sample.value
    return result


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")
