"""The DCGM source: watch fields on a DCGM host engine (standalone or embedded) through pydcgm.

pydcgm is not on PyPI; it ships with DCGM under /usr/share/datacenter-gpu-manager-4/bindings/python3
(DCGM 4) or /usr/local/dcgm/bindings/python3 (DCGM 3), and it is imported only when this source is
used. Fields are named by numeric ID, which DCGM 4.6's renames did not change. DCGM reports a
missing value as a "blank" sentinel rather than an error; those are dropped here, never exported.

Unavailability is graded: no pydcgm or libdcgm, or a host engine that does not answer
(`ConnectionNotValid`) makes the source down and it reconnects next collection; profiling fields
that cannot be watched (`ProfilingNotSupported`, `ModuleNotLoaded`, `NotSupported`, `RequiresRoot`
on pre-Hopper GPUs without root, perfmon held by another profiler) only leave those metrics out.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from exporter.attribution import Attributor, GpuRef
from exporter.model import Metric
from exporter.sources.base import Source, SourceError
from exporter.sources.gpu_common import MIB, PERCENT, GpuReading, Scale, render_readings, scaled

log = logging.getLogger(__name__)

BINDINGS_PATHS = (
    "/usr/share/datacenter-gpu-manager-4/bindings/python3",
    "/usr/local/dcgm/bindings/python3",
)
DEFAULT_PORT = 5555  # DCGM_HE_PORT_NUMBER
EMBEDDED = "embedded"

# Field ID → (family, scale). Units from dcgm_fields.h: FB in MiB, power W, clocks MHz,
# GPU_UTIL percent, DCP fields ratios, PCIe/NVLink bytes per second.
DEVICE_FIELDS: dict[int, tuple[str, Scale]] = {
    100: ("llm_gpu_sm_clock_hertz", 1e6),  # DCGM_FI_DEV_SM_CLOCK
    150: ("llm_gpu_temperature_celsius", 1.0),  # DCGM_FI_DEV_GPU_TEMP
    155: ("llm_gpu_power_watts", 1.0),  # DCGM_FI_DEV_POWER_USAGE
    203: ("llm_gpu_utilization_ratio", PERCENT),  # DCGM_FI_DEV_GPU_UTIL
    250: ("llm_gpu_memory_total_bytes", MIB),  # DCGM_FI_DEV_FB_TOTAL
    252: ("llm_gpu_memory_used_bytes", MIB),  # DCGM_FI_DEV_FB_USED
}
FB_FREE, CLOCK_EVENT_REASONS, XID_ERRORS = 251, 112, 230
PROFILING_FIELDS: dict[int, tuple[str, Scale]] = {
    1002: ("llm_gpu_sm_active_ratio", 1.0),
    1003: ("llm_gpu_sm_occupancy_ratio", 1.0),
    1004: ("llm_gpu_tensor_active_ratio", 1.0),
    1005: ("llm_gpu_dram_active_ratio", 1.0),
    1009: ("llm_gpu_pcie_transmit_bytes_per_second", 1.0),
    1010: ("llm_gpu_pcie_receive_bytes_per_second", 1.0),
    1011: ("llm_gpu_nvlink_transmit_bytes_per_second", 1.0),
    1012: ("llm_gpu_nvlink_receive_bytes_per_second", 1.0),
}
BASE_FIELD_IDS = (*DEVICE_FIELDS, FB_FREE, CLOCK_EVENT_REASONS)
DCGM_FE_GPU = 1

# Blank sentinels (dcgmvalue.py): anything at or above these is "no value" (+1 not found,
# +2 not supported, +3 no permission); the FP64 blank also stands for NaN from GPM.
INT32_BLANK = 0x7FFFFFF0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0
STR_BLANK = "<<<NULL>>>"

# DCGM status codes (dcgm_structs.h) and how each is taken.
ST_NOT_SUPPORTED, ST_CONNECTION_NOT_VALID, ST_LIBRARY_NOT_FOUND = -6, -21, -25
ST_REQUIRES_ROOT, ST_MODULE_NOT_LOADED, ST_IN_USE = -29, -33, -34
ST_PROFILING_NOT_SUPPORTED, ST_PROFILING_LIBRARY_ERROR, ST_PROFILING_MULTI_PASS = -36, -37, -38
PROFILING_UNAVAILABLE = frozenset(
    {
        ST_NOT_SUPPORTED,
        ST_REQUIRES_ROOT,
        ST_MODULE_NOT_LOADED,
        ST_IN_USE,
        ST_PROFILING_NOT_SUPPORTED,
        ST_PROFILING_LIBRARY_ERROR,
        ST_PROFILING_MULTI_PASS,
    }
)


@dataclass(frozen=True)
class DcgmModules:
    pydcgm: ModuleType
    structs: ModuleType


def load_dcgm() -> DcgmModules:
    """Import pydcgm from the path, else from where the DCGM packages install it."""
    for attempt in range(2):
        try:
            return DcgmModules(importlib.import_module("pydcgm"), importlib.import_module("dcgm_structs"))
        except ImportError as exc:
            if attempt == 1:
                raise SourceError("unavailable", f"pydcgm is not importable (install DCGM): {exc}") from exc
            for path in BINDINGS_PATHS:
                if os.path.isdir(path) and path not in sys.path:
                    sys.path.append(path)
    raise AssertionError("unreachable")


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


def host_and_port(address: str) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]:port` → (host, port), the port defaulting to 5555."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    return host or "localhost", int(port) if port.isdigit() else DEFAULT_PORT


def host_engine_listening(address: str, timeout: float = 0.5) -> bool:
    """Cheap first check for `--gpu auto`: is anything accepting connections at the address?"""
    if address == EMBEDDED:
        return False
    if address.startswith("unix://"):
        return os.path.exists(address[len("unix://") :])
    try:
        with socket.create_connection(host_and_port(address), timeout=timeout):
            return True
    except OSError:
        return False


def open_handle(modules: DcgmModules, address: str) -> Any:
    """A DcgmHandle: embedded host engine, Unix socket, or TCP (2 s connect timeout)."""
    mode = modules.structs.DCGM_OPERATION_MODE_AUTO
    if address == EMBEDDED:
        return modules.pydcgm.DcgmHandle(ipAddress=None, opMode=mode)
    if address.startswith("unix://"):
        return modules.pydcgm.DcgmHandle(unixSocketPath=address[len("unix://") :], opMode=mode, timeoutMs=2000)
    return modules.pydcgm.DcgmHandle(ipAddress=address, opMode=mode, timeoutMs=2000)


@dataclass
class _Gpu:
    gpu_id: int
    uuid: str = ""
    model: str = ""
    last_xid_ts: int | None = None


class DcgmSource(Source):
    name = "dcgm"
    timeout_seconds = 5.0

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
        self._interval = interval_seconds
        self._modules = modules
        self._process_lister = process_lister
        self._handle: Any = None
        self._group: Any = None
        self._base_fields: Any = None
        self._prof_fields: Any = None
        self._xid_fields: Any = None
        self._xid_collection: Any = None
        self._gpus: list[_Gpu] = []
        self._xids: dict[int, dict[int, float]] = {}

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
            self._base_fields = pydcgm.DcgmFieldGroup(self._handle, name=f"{tag}-base", fieldIds=list(BASE_FIELD_IDS))
            self._group.samples.WatchFields(self._base_fields, update_us, keep_age, 5)
            self._xid_fields = pydcgm.DcgmFieldGroup(self._handle, name=f"{tag}-xid", fieldIds=[XID_ERRORS])
            self._group.samples.WatchFields(self._xid_fields, update_us, keep_age, 0)
            self._prof_fields = self._watch_profiling(pydcgm, tag, update_us, keep_age)
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

    def _watch_profiling(self, pydcgm: ModuleType, tag: str, update_us: int, keep_age: float) -> Any:
        structs = self._modules.structs
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
                _quietly(fields.Delete)
            return None

    def _disconnect(self) -> None:
        for fields in (self._prof_fields, self._xid_fields, self._base_fields):
            if fields is not None:
                _quietly(fields.Delete)
        if self._group is not None:
            _quietly(self._group.Delete)
        if self._handle is not None:
            _quietly(self._handle.Shutdown)
        self._handle = self._group = self._base_fields = self._prof_fields = self._xid_fields = None
        self._xid_collection = None

    def _source_error(self, exc: BaseException) -> SourceError:
        code = status_code(exc)
        if code == ST_CONNECTION_NOT_VALID:
            return SourceError("connection", f"DCGM host engine at {self.address}: {exc}")
        if code == ST_LIBRARY_NOT_FOUND:
            return SourceError("unavailable", f"libdcgm not found: {exc}")
        return SourceError("dcgm_error", f"DCGM at {self.address}: {exc}")

    # -- collection ------------------------------------------------------------------------------

    def collect(self, now: float) -> list[Metric]:
        if self._handle is None:
            self._connect()
        structs = self._modules.structs
        try:
            base = self._group.samples.GetLatest_v2(self._base_fields).values
            prof = self._group.samples.GetLatest_v2(self._prof_fields).values if self._prof_fields is not None else {}
            self._xid_collection = self._group.samples.GetAllSinceLastCall_v2(self._xid_collection, self._xid_fields)
        except structs.DCGMError as exc:
            if status_code(exc) == ST_CONNECTION_NOT_VALID:
                self._disconnect()  # the host engine restarted or died: reconnect next time
            raise self._source_error(exc) from exc
        self._count_xids(self._xid_collection.values)
        readings = [self._reading(gpu, base, prof) for gpu in self._gpus]
        pids = self._process_lister.pids_by_uuid() if self._process_lister is not None else {}
        refs = [GpuRef(r.index, r.uuid, pids.get(r.uuid, frozenset())) for r in readings]
        attribution = self._attributor.attribute(refs) if self._attributor else [{} for _ in readings]
        return render_readings(readings, attribution)

    def _reading(self, gpu: _Gpu, base: Any, prof: Any) -> GpuReading:
        reading = GpuReading(str(gpu.gpu_id), gpu.uuid, gpu.model)
        reading.xid_counts = dict(self._xids.get(gpu.gpu_id, {}))
        values = {**_latest(base, gpu.gpu_id, BASE_FIELD_IDS), **_latest(prof, gpu.gpu_id, PROFILING_FIELDS)}
        # A GPU for which DCGM holds no value at all (fallen off the bus, or not yet sampled).
        reading.up = bool(values)
        for field_id, (family, scale) in (*DEVICE_FIELDS.items(), *PROFILING_FIELDS.items()):
            if field_id in values:
                reading.set(family, scaled(float(values[field_id]), scale))
        if 250 not in values and 252 in values and FB_FREE in values:
            reading.set("llm_gpu_memory_total_bytes", (float(values[252]) + float(values[FB_FREE])) * MIB)
        if CLOCK_EVENT_REASONS in values:
            reading.throttle_reasons = int(values[CLOCK_EVENT_REASONS])
        return reading

    def _count_xids(self, collection: Any) -> None:
        """Count each XID value DCGM recorded since the last read, by its timestamp.

        Field 230 holds only the latest XID; its time series since our last call tells each
        occurrence apart. The first read only sets the mark: an XID older than the exporter is
        not counted as new. GetAllSinceLastCall_v2 re-returns the latest value when nothing new
        arrived, which the timestamp filters out.
        """
        for gpu in self._gpus:
            series = _series(collection, gpu.gpu_id, XID_ERRORS)
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
        self._disconnect()
        if self._process_lister is not None:
            self._process_lister.close()


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


def _quietly(call: Any) -> None:
    try:
        call()
    except Exception as exc:  # tearing down a dead connection fails in many ways; none matter
        log.debug("dcgm: cleanup: %s", exc)


def dcgm_answers(address: str) -> tuple[bool, str]:
    """For `--gpu auto`: does a DCGM host engine answer at `address`? (and why not)."""
    if address != EMBEDDED and not host_engine_listening(address):
        return False, f"no DCGM host engine listening at {address}"
    try:
        modules = load_dcgm()
    except SourceError as exc:
        return False, str(exc)
    try:
        handle = open_handle(modules, address)
        count = len(list(handle.GetSystem().discovery.GetAllSupportedGpuIds()))
        _quietly(handle.Shutdown)
    except modules.structs.DCGMError as exc:
        return False, f"DCGM at {address}: {exc}"
    return count > 0, f"DCGM host engine at {address} sees {count} GPU(s)"
