"""Choose the GPU source for `--gpu`: a mode each GPU source registers (gpu_modes.py), or `auto`.

`auto` prefers a DCGM host engine that answers (it already runs the node's one profiling session,
and reading it adds no second one), else NVML with GPM where the GPUs have it, else AMD SMI where
the node has AMD GPUs, else nothing. The vendors' exporters are never guessed: they run as their
own DaemonSets at addresses only the deployment knows, so their modes name a URL. The
choice is logged once with the reason for each rejected option, and shows in `/metrics` as the
`source` label of `llm_exporter_source_up`.

Importing this module imports every GPU source, so `GPU_MODES` here names every mode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import exporter.sources.gpu_exporters  # noqa: F401 - its modules register the `MODE=URL` modes
from exporter.attribution import Attributor
from exporter.settings import GpuSettings
from exporter.sources.amd_smi import AmdSmiSource, amdsmi_available
from exporter.sources.base import Source
from exporter.sources.dcgm import dcgm_source
from exporter.sources.dcgm_connection import dcgm_answers
from exporter.sources.gpu_modes import GPU_MODES, GpuMode
from exporter.sources.nvml import NvmlSource, nvml_available

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]


def build_gpu_source(
    gpu: GpuSettings,
    attributor: Attributor,
    interval_seconds: float,
    dcgm_probe: Probe | None = None,
    nvml_probe: Probe | None = None,
    amdsmi_probe: Probe | None = None,
) -> Source | None:
    """The GPU source `gpu.mode` asks for, or None; `attributor` is closed when none is built."""
    if gpu.mode == "auto":  # the probes are the tests' to replace
        source = _auto(gpu, attributor, interval_seconds, dcgm_probe, nvml_probe, amdsmi_probe)
    else:
        mode = GPU_MODES[gpu.mode]
        if gpu.url is not None:
            log.info("gpu: ingesting %s at %s", mode.title, gpu.url)
        else:
            log.info("gpu: %s (--gpu %s)", mode.title, mode.name)
        source = mode.build(gpu, attributor, interval_seconds)
    if source is None:
        attributor.close()
    return source


def _auto(
    gpu: GpuSettings,
    attributor: Attributor,
    interval_seconds: float,
    dcgm_probe: Probe | None,
    nvml_probe: Probe | None,
    amdsmi_probe: Probe | None,
) -> Source | None:
    dcgm_ok, dcgm_why = (dcgm_probe or (lambda: dcgm_answers(gpu.dcgm_address)))()
    if dcgm_ok:
        log.info("gpu: auto chose DCGM (%s)", dcgm_why)
        return dcgm_source(gpu, attributor, interval_seconds)
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
    return None


GPU_MODES.register(
    GpuMode(
        "auto",
        "DCGM, NVML or AMD SMI, whichever answers first",
        lambda gpu, attributor, interval: _auto(gpu, attributor, interval, None, None, None),
    )
)
GPU_MODES.register(GpuMode("none", "no GPU telemetry", lambda gpu, attributor, interval: None))
