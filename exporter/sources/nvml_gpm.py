"""NVML GPM (GPU Performance Monitoring, Hopper and newer): one GPU's sample pair and its window.

GPM ratios come from two samples: each collection takes one and computes the window since the
previous collection's (no sleeping in steady state); the very first collection takes a priming
sample, and the reader waits one window once for all GPUs. Kept apart from the rest of the NVML
reader because the sample lifetime (allocate, keep one, free the other) is its own small state
machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any, Protocol, TypeVar

from exporter.sources.gpu_common import quietly

log = logging.getLogger(__name__)
T = TypeVar("T")


class Query(Protocol):
    """The reader's graded call for one GPU: `call()`, or None when the GPU cannot answer `key`."""

    def __call__(self, key: str, call: Callable[[], T]) -> T | None: ...


# NVML's own floor between two GPM samples ("should be greater than 100ms").
GPM_MIN_WINDOW_SECONDS = 0.1


@dataclass(frozen=True)
class GpmMetrics:
    """One GPM window in NVML's units (percent, MiB/s); None where the GPU had no data for it."""

    sm_util_percent: float | None = None
    sm_occupancy_percent: float | None = None
    any_tensor_util_percent: float | None = None
    dram_bw_util_percent: float | None = None
    pcie_tx_mib_per_second: float | None = None
    pcie_rx_mib_per_second: float | None = None
    nvlink_total_rx_mib_per_second: float | None = None
    nvlink_total_tx_mib_per_second: float | None = None


# GpmMetrics attribute → the nvidia-ml-py name of its metric ID, resolved in the loaded module.
GPM_METRIC_NAMES: dict[str, str] = {
    "sm_util_percent": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy_percent": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "any_tensor_util_percent": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "dram_bw_util_percent": "NVML_GPM_METRIC_DRAM_BW_UTIL",
    "pcie_tx_mib_per_second": "NVML_GPM_METRIC_PCIE_TX_PER_SEC",
    "pcie_rx_mib_per_second": "NVML_GPM_METRIC_PCIE_RX_PER_SEC",
    "nvlink_total_rx_mib_per_second": "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC",
    "nvlink_total_tx_mib_per_second": "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC",
}
assert set(GPM_METRIC_NAMES) == {f.name for f in fields(GpmMetrics)}, "name every GpmMetrics attribute"


class GpmWindow:
    """One GPU's GPM state: whether it has GPM, the previous sample, and the last window read."""

    def __init__(self, index: int, nvml: ModuleType, clock: Callable[[], float]) -> None:
        self._index = index
        self._nvml = nvml
        self._clock = clock
        self.supported: bool | None = None  # None: not asked yet
        self._sample: Any = None
        self._sample_time = 0.0
        self._last = GpmMetrics()

    def is_supported(self, handle: Any, query: Query) -> bool:
        if self.supported is None:
            support = query("gpm_support", lambda: self._nvml.nvmlGpmQueryDeviceSupport(handle))
            self.supported = bool(support is not None and support.isSupportedDevice)
            log.info("nvml: GPU %d: GPM %s", self._index, "supported" if self.supported else "not supported")
        return self.supported

    @property
    def needs_priming(self) -> bool:
        """No previous sample yet (and GPM not known to be absent)."""
        return self.supported is not False and self._sample is None

    def prime(self, handle: Any, query: Query) -> bool:
        """Take the first sample of a GPM GPU; True when one was taken. NVML errors propagate."""
        if not self.is_supported(handle, query):
            return False
        self._sample = self._take_sample(handle)
        self._sample_time = self._clock()
        return True

    def read(self, handle: Any, query: Query) -> GpmMetrics | None:
        """The window since the previous sample (or the last one, when too soon); None without GPM."""
        if not self.is_supported(handle, query):
            return None
        current = query("gpm", lambda: self._take_sample(handle))
        if current is None:
            return None
        taken = self._clock()
        previous = self._sample
        if previous is None or taken - self._sample_time < GPM_MIN_WINDOW_SECONDS:
            if previous is None:
                self._sample, self._sample_time = current, taken
            else:  # too soon for a new window: keep serving the last one
                self._nvml.nvmlGpmSampleFree(current)
            return self._last
        try:
            self._last = self._metrics_between(previous, current, query)
        finally:
            self._nvml.nvmlGpmSampleFree(previous)
            self._sample, self._sample_time = current, taken
        return self._last

    def release(self) -> None:
        """Free the kept sample (closing, or the GPU was lost); a failure to free is only logged."""
        if self._sample is not None:
            quietly(self._nvml.nvmlGpmSampleFree, self._sample)
            self._sample = None

    def _take_sample(self, handle: Any) -> Any:
        nvml = self._nvml
        sample = nvml.nvmlGpmSampleAlloc()
        try:
            nvml.nvmlGpmSampleGet(handle, sample)
        except nvml.NVMLError:
            nvml.nvmlGpmSampleFree(sample)
            raise
        return sample

    def _metrics_between(self, previous: Any, current: Any, query: Query) -> GpmMetrics:
        nvml = self._nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.sample1, request.sample2 = previous, current
        attributes = list(GPM_METRIC_NAMES)
        request.numMetrics = len(attributes)
        for position, attribute in enumerate(attributes):
            request.metrics[position].metricId = getattr(nvml, GPM_METRIC_NAMES[attribute])
        if query("gpm", lambda: nvml.nvmlGpmMetricsGet(request)) is None:
            return GpmMetrics()
        values: dict[str, float] = {}
        for position, attribute in enumerate(attributes):
            metric = request.metrics[position]
            if metric.nvmlReturn == nvml.NVML_SUCCESS and metric.value == metric.value:  # NaN = no data
                values[attribute] = float(metric.value)
        return GpmMetrics(**values)
