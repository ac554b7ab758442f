"""The AMD SMI source (`--gpu amdsmi`): the `amdsmi` Python binding read into `llm_gpu_*`, vendor "amd".

The binding is imported on first use, like pydcgm: it ships with ROCm (`/opt/rocm/share/amd_smi`)
or as PyPI `amdsmi` matching the node's ROCm, and loads `$ROCM_PATH/lib/libamd_smi.so` when it is
imported. It prints to stdout when that library is missing, which would corrupt `once`'s output, so
the import runs with stdout captured and what it said goes to the log instead.

Per GPU: `amdsmi_get_gpu_activity` (gfx and UMC activity, percent), `amdsmi_get_gpu_vram_usage`
(MB), `amdsmi_get_power_info` (socket power, W), the hotspot temperature, total ECC counts, the
compute and memory partition modes, the PCI address (the AMD device plugin's device ID) and the
process list (PIDs, for attribution). A value the binding marks "N/A" (0xFFFF) or a call that
answers NOT_SUPPORTED is left out; any other failure of one GPU makes that GPU `up=0`, and a
library that cannot start raises `SourceError("unavailable")`, retried the next collection.
XGMI counters are not read here (they sit in the large, version-dependent gpu_metrics table);
the amd-exporter mode has them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from exporter.attribution import Attributor, GpuRef
from exporter.model import Metric
from exporter.sources.base import SourceError
from exporter.sources.gpu_common import MIB, PERCENT, GpuReading, LibraryGpuSource, attributed_samples, quietly, scaled
from exporter.sources.gpu_modes import GPU_MODES, GpuMode

log = logging.getLogger(__name__)

NOT_AVAILABLE = "N/A"  # what the binding puts where the library answered 0xFFFF
# amdsmi_status_t codes (amdsmi.h) that mean "this GPU cannot report this", not "this GPU failed".
UNSUPPORTED_STATUSES = frozenset({2, 4})  # AMDSMI_STATUS_NOT_SUPPORTED, AMDSMI_STATUS_NO_PERM


def load_amdsmi() -> ModuleType:
    """Import the binding (and so load libamd_smi.so), or raise SourceError("unavailable")."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            module = importlib.import_module("amdsmi")
    except ImportError as exc:
        raise SourceError("unavailable", f"amdsmi: the Python binding is not installed ({exc})") from exc
    except Exception as exc:  # the binding binds every symbol at import: a missing library is a KeyError
        words = " ".join(said.getvalue().split())
        raise SourceError("unavailable", f"amdsmi: cannot load libamd_smi.so ({words or exc!r})") from exc
    if said.getvalue().strip():
        log.info("amdsmi: %s", " ".join(said.getvalue().split()))
    return module


class AmdSmiReader:
    """One `amdsmi_init` for the source's life; handles re-read every collection (a reset GPU
    comes back under a new handle)."""

    def __init__(self, amdsmi: ModuleType | None = None) -> None:
        self._amdsmi = amdsmi
        self._ready = False

    @property
    def started(self) -> bool:
        """`amdsmi_init` done: what is left of a collection is reading the GPUs."""
        return self._ready

    def read(self) -> list[GpuReading]:
        smi = self._start()
        try:
            handles = smi.amdsmi_get_processor_handles()
        except smi.AmdSmiException as exc:
            self.close()
            raise SourceError("unavailable", f"amdsmi: listing GPUs failed: {exc}") from exc
        return [self._read_gpu(smi, index, handle) for index, handle in enumerate(handles)]

    def close(self) -> None:
        if self._ready and self._amdsmi is not None:
            quietly(self._amdsmi.amdsmi_shut_down)
        self._ready = False

    def _start(self) -> ModuleType:
        smi = self._amdsmi = self._amdsmi or load_amdsmi()
        if not self._ready:
            try:
                smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
            except smi.AmdSmiException as exc:
                raise SourceError("unavailable", f"amdsmi: amdsmi_init failed: {exc}") from exc
            self._ready = True
        return smi

    def _read_gpu(self, smi: ModuleType, index: int, handle: Any) -> GpuReading:
        reading = GpuReading(str(index), vendor="amd")

        def ask(call: Callable[..., Any], *args: Any) -> Any:
            """The call's answer, or None where this GPU cannot answer it."""
            try:
                return call(handle, *args)
            except smi.AmdSmiLibraryException as exc:
                if exc.get_error_code() in UNSUPPORTED_STATUSES:
                    return None
                raise

        try:
            reading.uuid = ask(smi.amdsmi_get_gpu_device_uuid) or ""
            asic = ask(smi.amdsmi_get_gpu_asic_info) or {}
            reading.model = str(asic.get("market_name", ""))
            for label, call in (
                ("pci_bus_id", smi.amdsmi_get_gpu_device_bdf),
                ("compute_partition", smi.amdsmi_get_gpu_compute_partition),
                ("memory_partition", smi.amdsmi_get_gpu_memory_partition),
            ):
                value = ask(call)
                if value:
                    # Partition modes in the exporter's spelling ("spx", "nps1"), one value per mode.
                    reading.labels[label] = value if label == "pci_bus_id" else str(value).lower()
            activity = ask(smi.amdsmi_get_gpu_activity) or {}
            _set(reading, "llm_gpu_utilization_ratio", activity.get("gfx_activity"), PERCENT)
            _set(reading, "llm_gpu_dram_active_ratio", activity.get("umc_activity"), PERCENT)
            vram = ask(smi.amdsmi_get_gpu_vram_usage) or {}
            _set(reading, "llm_gpu_memory_used_bytes", vram.get("vram_used"), MIB)
            _set(reading, "llm_gpu_memory_total_bytes", vram.get("vram_total"), MIB)
            power = ask(smi.amdsmi_get_power_info) or {}
            current = power.get("current_socket_power", NOT_AVAILABLE)
            average = power.get("average_socket_power")
            _set(reading, "llm_gpu_power_watts", average if current == NOT_AVAILABLE else current)
            hotspot, current_metric = smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureMetric.CURRENT
            _set(reading, "llm_gpu_temperature_celsius", ask(smi.amdsmi_get_temp_metric, hotspot, current_metric))
            ecc = ask(smi.amdsmi_get_gpu_total_ecc_count)
            if ecc:
                for severity, key in (("correctable", "correctable_count"), ("uncorrectable", "uncorrectable_count")):
                    reading.labelled.append(("llm_gpu_ecc_errors_total", {"severity": severity}, float(ecc[key])))
            processes = ask(smi.amdsmi_get_gpu_process_list) or []
            reading.pids = frozenset(int(p["pid"]) for p in processes if isinstance(p, dict) and "pid" in p)
        except smi.AmdSmiException as exc:
            log.debug("amdsmi: GPU %d: %s", index, exc)
            reading = GpuReading(str(index), reading.uuid, reading.model, up=False, vendor="amd")
        return reading


def _set(reading: GpuReading, family: str, value: Any, scale: float | str = 1.0) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        reading.set(family, scaled(float(value), scale))


def amdsmi_available() -> tuple[bool, str]:
    """For `--gpu auto`: does AMD SMI start and see a GPU? (and why not)."""
    reader = AmdSmiReader()
    try:
        count = len(reader.read())
    except SourceError as exc:
        return False, str(exc)
    finally:
        reader.close()
    return count > 0, f"amdsmi sees {count} GPU(s)"


class AmdSmiSource(LibraryGpuSource[AmdSmiReader]):
    name = "amdsmi"

    def __init__(self, attributor: Attributor | None = None, amdsmi: ModuleType | None = None) -> None:
        self._attributor = attributor
        self._reader = AmdSmiReader(amdsmi)

    def collect(self, now: float) -> list[Metric]:
        readings = self._reader.read()
        refs = [
            GpuRef(r.index, r.uuid, r.pids, device_ids=tuple(v for v in (r.labels.get("pci_bus_id"),) if v))
            for r in readings
        ]
        return attributed_samples(readings, refs, self._attributor)

    def close(self) -> None:
        self._reader.close()


GPU_MODES.register(
    GpuMode(AmdSmiSource.name, "AMD SMI", lambda gpu, attributor, interval: AmdSmiSource(attributor), vendor="amd")
)
