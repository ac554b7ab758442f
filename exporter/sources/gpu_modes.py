"""The `--gpu` modes: each GPU source module registers its mode here when imported.

A mode is a name (the source's `source` label too), what it reads, the vendor whose GPUs it sees
and how to build its source from the settings. Modes that ingest another exporter (`MODE=URL`)
state that exporter's usual port, which the configuration quotes when the URL is missing. The
library modes (nvml.py, dcgm.py, amd_smi.py) register in their modules; each vendor exporter is one
module in exporter/sources/gpu_exporters/, which imports every module of itself; gpu.py adds `auto`
and `none` and imports them all, so `GPU_MODES` there names every mode the configuration accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.attribution import Attributor
from exporter.registry import Registry
from exporter.settings import GpuSettings
from exporter.sources.base import Source
from exporter.sources.device_exporter import DeviceExporterSource, DeviceExporterSpec, ExporterIngest

#: (the GPU settings, the attributor, the collection interval) -> the source, or None for no GPUs
Build = Callable[[GpuSettings, Attributor, float], Source | None]


@dataclass(frozen=True)
class GpuMode:
    """One `--gpu` mode."""

    name: str
    #: what it reads, as the log and docs/gpu.md name it
    title: str
    build: Build
    #: the `vendor` label of the GPUs it reads; None for `auto` (it chooses) and `none`
    vendor: str | None = None
    #: for a mode that ingests another exporter's /metrics (`MODE=URL`): that exporter's usual port
    exporter_port: int | None = None
    #: a vendor exporter's mapping, which docs/metrics.md's "GPUs by vendor" is written from
    spec: DeviceExporterSpec | None = None

    @property
    def usage(self) -> str:
        """How `--gpu` names it: `MODE=URL` where it ingests an exporter."""
        return self.name if self.exporter_port is None else f"{self.name}=URL"


GPU_MODES: Registry[GpuMode] = Registry("GPU mode", lambda mode: mode.name)


def exporter_mode(source: type[ExporterIngest], title: str, port: int, vendor: str | None = None) -> GpuMode:
    """The mode of an exporter ingest (`--gpu NAME=URL`); a vendor exporter's spec names its vendor."""
    spec = source.spec if issubclass(source, DeviceExporterSource) else None
    if vendor is None and spec is not None:
        vendor = spec.vendor

    def build(gpu: GpuSettings, attributor: Attributor, interval_seconds: float) -> Source:
        if gpu.url is None:  # the configuration refuses the mode without one
            raise ValueError(f"--gpu {source.name} needs a URL")
        return source(gpu.url, attributor)

    return GpuMode(source.name, title, build, vendor, port, spec)
