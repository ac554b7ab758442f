"""Choose the GPU source for `--gpu` (auto, nvml, dcgm, dcgm-exporter=URL, amdsmi, amd-exporter=URL,
ascend-exporter=URL, gaudi-exporter=URL, none), with the NVML probe and process list that choice needs.

`auto` prefers a DCGM host engine that answers (it already runs the node's one profiling session,
and reading it adds no second one), else NVML with GPM where the GPUs have it, else AMD SMI where
the node has AMD GPUs, else nothing. The vendors' exporters are never guessed: they run as their
own DaemonSets at addresses only the deployment knows, so their modes name a URL. The
choice is logged once with the reason for each rejected option, and shows in `/metrics` as the
`source` label of `llm_exporter_source_up`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType

from exporter.attribution import Attributor
from exporter.settings import GpuSettings
from exporter.sources.amd_exporter import AmdExporterSource
from exporter.sources.amd_smi import AmdSmiSource, amdsmi_available
from exporter.sources.ascend_exporter import AscendExporterSource
from exporter.sources.base import Source, SourceError
from exporter.sources.dcgm import DcgmSource
from exporter.sources.dcgm_connection import dcgm_answers
from exporter.sources.dcgm_exporter import DcgmExporterSource
from exporter.sources.device_exporter import DeviceExporterSource
from exporter.sources.gaudi_exporter import GaudiExporterSource
from exporter.sources.gpu_common import quietly
from exporter.sources.nvml import NvmlSource
from exporter.sources.nvml_reader import load_pynvml

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]
#: `--gpu MODE=URL` modes that ingest a vendor's device exporter
DEVICE_EXPORTERS: dict[str, type[DeviceExporterSource]] = {
    "amd-exporter": AmdExporterSource,
    "ascend-exporter": AscendExporterSource,
    "gaudi-exporter": GaudiExporterSource,
}


def build_gpu_source(
    gpu: GpuSettings,
    attributor: Attributor,
    interval_seconds: float,
    dcgm_probe: Probe | None = None,
    nvml_probe: Probe | None = None,
    amdsmi_probe: Probe | None = None,
) -> Source | None:
    """The GPU source `gpu.mode` asks for, or None; `attributor` is closed when none is built."""
    mode = gpu.mode
    if mode == "none":
        log.info("gpu: disabled (--gpu none)")
        attributor.close()
        return None
    if mode == "dcgm-exporter":
        assert gpu.url is not None
        log.info("gpu: ingesting dcgm-exporter at %s", gpu.url)
        return DcgmExporterSource(gpu.url, attributor)
    if mode in DEVICE_EXPORTERS:
        assert gpu.url is not None
        log.info("gpu: ingesting %s at %s", mode, gpu.url)
        return DEVICE_EXPORTERS[mode](gpu.url, attributor)
    if mode == "amdsmi":
        log.info("gpu: AMD SMI (--gpu amdsmi)")
        return AmdSmiSource(attributor)
    if mode == "nvml":
        log.info("gpu: NVML (--gpu nvml)")
        return NvmlSource(attributor)
    if mode == "dcgm":
        log.info("gpu: DCGM host engine at %s (--gpu dcgm)", gpu.dcgm_address)
        return _dcgm(gpu, attributor, interval_seconds)
    dcgm_ok, dcgm_why = (dcgm_probe or (lambda: dcgm_answers(gpu.dcgm_address)))()
    if dcgm_ok:
        log.info("gpu: auto chose DCGM (%s)", dcgm_why)
        return _dcgm(gpu, attributor, interval_seconds)
    nvml_ok, nvml_why = (nvml_probe or nvml_available)()
    if nvml_ok:
        log.info("gpu: auto chose NVML (%s; not DCGM: %s)", nvml_why, dcgm_why)
        return NvmlSource(attributor)
    amd_ok, amd_why = (amdsmi_probe or amdsmi_available)()
    if amd_ok:
        log.info("gpu: auto chose AMD SMI (%s; not DCGM: %s; not NVML: %s)", amd_why, dcgm_why, nvml_why)
        return AmdSmiSource(attributor)
    log.info(
        "gpu: auto found no GPU telemetry (DCGM: %s; NVML: %s; AMD SMI: %s); GPU families are absent",
        dcgm_why,
        nvml_why,
        amd_why,
    )
    attributor.close()
    return None


def _dcgm(gpu: GpuSettings, attributor: Attributor, interval_seconds: float) -> DcgmSource:
    return DcgmSource(gpu.dcgm_address, attributor, interval_seconds, process_lister=NvmlProcessLister())


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
