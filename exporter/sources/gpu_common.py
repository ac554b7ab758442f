"""What the GPU sources (NVML, DCGM, dcgm-exporter, amdsmi and the vendors' exporters) share: one reading per GPU,
and the one way it becomes `llm_gpu_*` samples with attribution labels.

Each source turns its own format into `GpuReading`s; only this module knows label names, so a GPU
looks the same in `/metrics` whichever telemetry the node has.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from exporter.model import Metric, Sample
from exporter.sources.base import Source

if TYPE_CHECKING:
    from exporter.attribution import Attributor, GpuRef

log = logging.getLogger(__name__)

MIB = 1 << 20
#: How long a library-backed source's collection may take before the library is up: the first one
#: also loads it, initialises it and finds the GPUs (or connects to DCGM's host engine), which
#: takes milliseconds on a quiet node and seconds on a loaded one. A library wedged at start-up is
#: still marked down, only later.
START_UP_TIMEOUT_SECONDS = 30.0
# A scale that divides by 100 (percent → ratio): 47 / 100 is 0.47, where 47 * 0.01 is not.
PERCENT = "percent"
Scale = float | str


def scaled(value: float, scale: Scale) -> float:
    return value / 100.0 if scale == PERCENT else value * float(scale)


# Clock-event ("throttle") reason bits, named as nvml.h and nvidia-ml-py name them
# (nvmlClocksEventReason*, nvmlClocksThrottleReason* before R535). DCGM field 112 and dcgm-exporter
# carry the same bitmask, so the values are written here, where no source has pynvml loaded; a unit
# test checks each against nvidia-ml-py.
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100
# Label values follow dcgm-exporter's `clock_event` names so the sources read alike.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (nvmlClocksEventReasonGpuIdle, "gpu_idle"),
    (nvmlClocksEventReasonApplicationsClocksSetting, "clocks_setting"),
    (nvmlClocksEventReasonSwPowerCap, "power_cap"),
    (nvmlClocksEventReasonHwSlowdown, "hw_slowdown"),
    (nvmlClocksEventReasonSyncBoost, "sync_boost"),
    (nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal"),
    (nvmlClocksEventReasonHwThermalSlowdown, "hw_thermal"),
    (nvmlClocksEventReasonHwPowerBrakeSlowdown, "hw_power_brake"),
    (nvmlClocksEventReasonDisplayClockSetting, "display_clocks"),
)


@dataclass
class GpuReading:
    """One GPU (or MIG instance) in one collection, already in our units.

    `values` maps a catalogue family to its value; a family the GPU cannot report is simply absent.
    `labels` are labels the source itself knows beyond gpu/uuid/model (MIG instance, pod from
    dcgm-exporter); attribution adds `engine` and the kubelet's pod on top.
    """

    index: str
    uuid: str = ""
    model: str = ""
    up: bool = True
    values: dict[str, float] = field(default_factory=dict)
    throttle_reasons: int | None = None
    xid_counts: dict[int, float] = field(default_factory=dict)
    pids: frozenset[int] = frozenset()
    labels: dict[str, str] = field(default_factory=dict)
    #: whose device this is, the `vendor` label: "nvidia", "amd", "ascend", "gaudi"
    vendor: str = "nvidia"
    #: samples of families with a label of their own (`severity`, `link`): (family, labels, value)
    labelled: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    #: the IDs the vendor's device plugin hands the kubelet for this device (Gaudi's: its serial
    #: number), matched against the pod-resources answer; not exported as labels
    device_ids: tuple[str, ...] = ()

    def set(self, family: str, value: float | None) -> None:
        """Record a value unless it is missing or not a number (NaN means "no data" upstream)."""
        if value is not None and not math.isnan(value) and not math.isinf(value):
            self.values[family] = float(value)


def base_labels(reading: GpuReading) -> dict[str, str]:
    """gpu/uuid/gpu_model plus the source's own labels; an unknown (empty) value is left out."""
    labels = {
        "gpu": reading.index,
        "uuid": reading.uuid,
        "gpu_model": reading.model,
        "vendor": reading.vendor,
        **reading.labels,
    }
    return {key: value for key, value in labels.items() if value}


def attributed_samples(
    readings: Sequence[GpuReading], refs: Sequence[GpuRef], attributor: Attributor | None
) -> list[Metric]:
    """The samples of every source's readings, labelled by what `attributor` says of `refs[i]`."""
    attribution = attributor.attribute(refs) if attributor else [{} for _ in readings]
    return list(render_readings(readings, attribution))


def render_readings(readings: Sequence[GpuReading], attribution: Sequence[Mapping[str, str]]) -> list[Sample]:
    """`llm_gpu_*` samples; `attribution[i]` holds the extra labels of `readings[i]`.

    A down GPU exports only `llm_gpu_up 0` and its XID counters: its other readings would be stale,
    while an XID (79 "fallen off the bus") is exactly what explains why it is down.
    """
    samples: list[Sample] = []
    for reading, extra in zip(readings, attribution):
        labels = base_labels(reading)
        for key, value in extra.items():
            labels.setdefault(key, value)
        samples.append(Sample("llm_gpu_up", labels, 1.0 if reading.up else 0.0))
        if reading.up:
            samples.extend(Sample(family, labels, value) for family, value in reading.values.items())
            samples.extend(Sample(family, {**labels, **own}, value) for family, own, value in reading.labelled)
            if reading.throttle_reasons is not None:
                samples.extend(throttle_samples(reading.throttle_reasons, labels))
        for xid, count in sorted(reading.xid_counts.items()):
            samples.append(Sample("llm_gpu_xid_errors_total", {**labels, "xid": str(xid)}, count))
    return samples


def throttle_samples(bitmask: int, labels: Mapping[str, str]) -> Iterable[Sample]:
    for bit, reason in THROTTLE_REASONS:
        yield Sample("llm_gpu_throttle_reason_active", {**labels, "reason": reason}, 1.0 if bitmask & bit else 0.0)


def quietly(call: Callable[..., Any], *args: Any) -> None:
    """`call(*args)` for cleanup: freeing one handle of a dead library or connection fails in many
    ways, none of which may stop the others from being released."""
    try:
        call(*args)
    except Exception as exc:
        log.debug("gpu cleanup: %s: %s", getattr(call, "__name__", call), exc)


class StartingReader(Protocol):
    """A vendor library's reader: `started` once the library is initialised and the GPUs found."""

    @property
    def started(self) -> bool: ...


Reader = TypeVar("Reader", bound=StartingReader)


class LibraryGpuSource(Source, Generic[Reader]):
    """A GPU source that reads through a vendor's C library in the loop's threads (NVML, DCGM,
    AMD SMI): a read is bounded by `timeout_seconds`, the library's start-up by
    START_UP_TIMEOUT_SECONDS."""

    timeout_seconds = 5.0
    _reader: Reader

    def deadline_seconds(self) -> float:
        if self._reader.started:
            return self.timeout_seconds
        return max(self.timeout_seconds, START_UP_TIMEOUT_SECONDS)
