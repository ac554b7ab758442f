"""What each accelerator vendor calls its memory-bandwidth signal, and where it saturates.

All sources export that signal as `llm_gpu_dram_active_ratio`, but it is not the same measurement
everywhere: NVIDIA's DRAM active is the share of cycles the memory interface moved data, AMD's UMC
activity the share of time its memory controllers were busy, Ascend's HBM bandwidth utilization the
achieved share of peak bandwidth. The decode-bandwidth stage reads the band of the engine's vendor
from here; the reasoning and sources for each band are in docs/diagnosis.md ("Accelerators").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from exporter.settings import Thresholds


@dataclass(frozen=True)
class BandwidthSignal:
    """The vendor's memory-bandwidth signal: its name in evidence and its busy/saturated band."""

    name: str
    #: None: the configured `dram_active_busy`/`dram_active_saturated` (NVIDIA's, DCGM-sourced)
    busy: float | None = None
    saturated: float | None = None

    def band(self, t: Thresholds) -> tuple[float, float]:
        return (
            t.dram_active_busy if self.busy is None else self.busy,
            t.dram_active_saturated if self.saturated is None else self.saturated,
        )


BANDWIDTH_SIGNALS: dict[str, BandwidthSignal] = {
    "nvidia": BandwidthSignal("DRAM active"),
    # A busy-time share like DRAM active; AMD publishes no saturation figure, so NVIDIA's band holds.
    "amd": BandwidthSignal("UMC (memory-controller) activity"),
    # A share of peak bandwidth: streaming kernels reach ~0.75-0.8 of the datasheet peak, so the
    # band sits lower than a busy-time share's.
    "ascend": BandwidthSignal("HBM bandwidth utilization", busy=0.5, saturated=0.7),
}
#: vendors whose exporter has no memory-bandwidth signal at all, and what stands in for it
NO_BANDWIDTH_SIGNAL: dict[str, str] = {
    "gaudi": "the Gaudi metric exporter has no HBM-bandwidth signal",
}


def bandwidth_signal(vendors: Sequence[str]) -> BandwidthSignal:
    """The signal of the engine's accelerators (NVIDIA's where no vendor label says otherwise)."""
    for vendor in vendors:
        if vendor in BANDWIDTH_SIGNALS:
            return BANDWIDTH_SIGNALS[vendor]
    return BANDWIDTH_SIGNALS["nvidia"]


def missing_bandwidth_reason(vendors: Sequence[str]) -> str | None:
    """Why no bandwidth signal can exist for these accelerators, or None if one could."""
    for vendor in vendors:
        if vendor in NO_BANDWIDTH_SIGNAL:
            return NO_BANDWIDTH_SIGNAL[vendor]
    return None
