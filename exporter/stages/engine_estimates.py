"""Compute and memory-bandwidth utilisation from the engine's side: its MFU counters over the peak
of its GPUs.

vLLM (`--enable-mfu-metrics`, 0.13+) and SGLang (`--enable-mfu-metrics`, 0.5) count the FLOPs and
the device-memory bytes each step should take, per GPU, from the model's shape and the batch. Their
rates over the GPU's datasheet peak are a roofline reading without DCGM profiling counters
(shared/research/field-2026.md §2.2): where the GPU source has tensor and DRAM activity they are
evidence beside it, where it has none (NVML without GPM, the AMD, Ascend and Gaudi exporters, a
GPU source that is not there) they stand in its place, and the evidence says which.

They are estimates, not measurements: a share of peak, lower than a pipe's busy fraction (a pipe
that is busy is not busy at its peak rate). Compute is scored on the tensor band
(`tensor_active_high` − 0.2 to `tensor_active_high`), which compute-bound prefill reaches in MFU
terms; bandwidth on the band of a share-of-peak signal, 0.5-0.7 (memory-bound kernels reach about
0.75-0.8 of the datasheet figure, as for Ascend's HBM bandwidth utilization in vendors.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.settings import Thresholds
from exporter.stages.signals import History

#: dense BF16 FLOP/s and HBM bytes/s of each GPU, from the vendors' datasheets (dense, not "with
#: sparsity"), matched by a fragment of the model name its driver reports; the first match wins, so
#: the more specific names come first
PEAKS: tuple[tuple[str, float, float], ...] = (
    ("H100 PCIe", 756e12, 2.0e12),
    ("H100", 989.4e12, 3.35e12),  # SXM5 80GB HBM3
    ("H800", 989.4e12, 3.35e12),
    ("H200", 989.4e12, 4.8e12),
    ("GH200", 989.4e12, 4.0e12),
    ("B200", 2250e12, 8.0e12),
    ("A100-SXM4-40GB", 312e12, 1.555e12),
    ("A100-PCIE-40GB", 312e12, 1.555e12),
    ("A100", 312e12, 2.039e12),  # 80GB
    ("L40S", 362e12, 0.864e12),
    ("L4", 121e12, 0.3e12),
    ("MI300X", 1307.4e12, 5.3e12),
)
#: the share of peak bandwidth where an engine-estimated decode is busy, and saturated
BANDWIDTH_BAND = (0.5, 0.7)


def peak_of(gpu_model: str) -> tuple[float, float] | None:
    """(FLOP/s, bytes/s) of a GPU model name, or None when it is not in the table."""
    for fragment, flops, bandwidth in PEAKS:
        if fragment.lower() in gpu_model.lower():
            return flops, bandwidth
    return None


@dataclass(frozen=True)
class EngineEstimate:
    """The engine's own estimate of one roofline: its rate, and its share of the GPU's peak."""

    rate: float  # FLOP/s or bytes/s per GPU
    share: float | None  # of the peak; None: the GPU's peak is not known
    line: str  # for the evidence


def engine_estimate(h: History, t: Thresholds, kind: str) -> EngineEstimate | None:
    """`kind` "compute" or "bandwidth": the engine's MFU counter rate over the level window, as a
    share of its GPUs' peak where their model is known. None: the engine has no MFU counters."""
    attr = "estimated_flops_total" if kind == "compute" else "estimated_memory_bytes_total"
    rate = h.rate(attr, t.level_seconds)
    if rate is None:
        return None
    models = h.gpu_models()
    peaks = [p for p in (peak_of(m) for m in models) if p is not None]
    unit, scale = ("TFLOP/s", 1e12) if kind == "compute" else ("GB/s", 1e9)
    what = "FLOPs" if kind == "compute" else "memory bytes"
    line = f"engine-estimated {what} {rate / scale:.1f} {unit} per GPU (the engine's MFU counters)"
    if not peaks:
        named = f" for {', '.join(models)}" if models else ""
        return EngineEstimate(rate, None, line + f"; peak unknown{named}: not a share of it")
    peak = min(p[0] if kind == "compute" else p[1] for p in peaks)
    share = rate / peak
    return EngineEstimate(rate, share, line + f": {share:.0%} of {models[0]}'s peak {peak / scale:,.0f} {unit}")


def decode_work_lines(h: History, t: Thresholds, slowdown: float | None) -> list[str]:
    """What the engine says of its own steps, where tokens slowed: speculative decoding that accepts
    fewer drafts makes each step yield fewer tokens, and more tokens per step is a bigger batch."""
    if slowdown is None or slowdown <= 1.05:
        return []
    lines = []
    acceptance = h.mean("spec_decode_acceptance", t.level_seconds)
    best = h.maximum("spec_decode_acceptance", t.baseline_seconds)
    if acceptance is not None:
        line = f"speculative decoding accepts {acceptance:.0%} of draft tokens"
        if best is not None and best > acceptance * 1.2:
            line += f" (was {best:.0%} at best): each step yields fewer tokens, so tokens slow at the same step time"
        lines.append(line)
    per_step = h.mean("tokens_per_step", t.level_seconds)
    fewest = h.minimum("tokens_per_step", t.baseline_seconds)
    if per_step is not None:
        line = f"{per_step:.0f} tokens per engine step"
        if fewest and per_step > fewest * 1.5:
            line += f" ({per_step / fewest:.1f}x the fewest): a bigger batch, each step reads more KV"
        lines.append(line)
    return lines
