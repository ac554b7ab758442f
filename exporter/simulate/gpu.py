"""A simulated GPU: it accumulates what the engine's steps did to it and derives DCGM-style ratios.

Every counter comes from the step model, never drawn independently (research note §2 item 9),
so a scenario cannot show, say, high tensor activity without the FLOPs that cause it:
- utilization (NVML "a kernel was running") = kernel time / wall time;
- DRAM active = time the memory interface streams at the achieved bandwidth / wall time, i.e.
  HBM bytes / (peak bandwidth x MBU) per second: a step bound by memory keeps it busy all its
  kernel time, which is how the seed case reads 0.95;
- tensor active = FLOPs / peak FLOP/s per second (1.0 = the tensor pipes at peak all the time);
- SM active: compute time counts fully, memory-bound time at MEMORY_BOUND_SM_ACTIVE — decode
  GEMV and attention kernels saturate HBM with warps on part of the SMs. 0.3 is calibrated so that
  the seed case's decode-bound phase (its prefill chunks and recomputed prompts mixed in: a third
  of the time in tensor work) reads about 0.5, as docs/design.md#the-worked-case reports (SM active 45 % with DRAM
  active 95 %, tests/perf/seed_case.py); it is not a vendor figure.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from dataclasses import dataclass, fields, replace

from exporter.simulate.hardware import GpuSpec
from exporter.simulate.roofline import StepCost

MEMORY_BOUND_SM_ACTIVE = 0.3
COMM_SM_ACTIVE = 0.15  # NCCL kernels run on a few channels' thread blocks
MEMORY_BOUND_OCCUPANCY = 0.25
COMPUTE_OCCUPANCY = 0.5
PCIE_BYTES_PER_TOKEN = 4096  # token ids in, sampled ids and logprobs out: small next to HBM
HISTORY_SECONDS = 120.0


@dataclass
class GpuCounters:
    """Cumulative seconds of each kind of activity, and bytes, since the GPU came up."""

    busy_seconds: float = 0.0
    dram_seconds: float = 0.0
    tensor_seconds: float = 0.0
    sm_seconds: float = 0.0
    occupancy_seconds: float = 0.0
    hbm_bytes: float = 0.0
    flops: float = 0.0
    nvlink_bytes: float = 0.0
    pcie_tx_bytes: float = 0.0
    pcie_rx_bytes: float = 0.0
    energy_joules: float = 0.0


@dataclass(frozen=True)
class GpuActivity:
    """Ratios and rates over a window, as dcgm-exporter reports its profiling fields."""

    utilization: float = 0.0
    sm_active: float = 0.0
    sm_occupancy: float = 0.0
    tensor_active: float = 0.0
    dram_active: float = 0.0
    nvlink_bytes_per_second: float = 0.0
    pcie_tx_bytes_per_second: float = 0.0
    pcie_rx_bytes_per_second: float = 0.0


class GpuDevice:
    def __init__(self, index: int, spec: GpuSpec, rng: random.Random) -> None:
        self.index = index
        self.spec = spec
        self.uuid = "GPU-" + str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        self.memory_used_bytes = 512 * 1024 * 1024  # driver and context before an engine loads
        self.engine: int | None = None
        self.counters = GpuCounters()
        self._history: deque[tuple[float, GpuCounters]] = deque()
        self._power_watts = spec.idle_watts
        self.heat_celsius = 0.0  # above what its power explains (a failing fan, a blocked inlet)

    def account(self, cost: StepCost, steps: int = 1, tokens: int = 0) -> None:
        """Add `steps` identical steps of `cost` (the TP rank's share) to the counters."""
        c = self.counters
        bound = max(cost.memory_seconds, cost.compute_seconds)
        c.busy_seconds += steps * cost.kernel_seconds
        c.dram_seconds += steps * cost.memory_seconds
        c.tensor_seconds += steps * cost.flops / self.spec.bf16_flops_per_second
        memory_only = bound - cost.compute_seconds
        c.sm_seconds += steps * (
            cost.compute_seconds + memory_only * MEMORY_BOUND_SM_ACTIVE + cost.comm_seconds * COMM_SM_ACTIVE
        )
        c.occupancy_seconds += steps * (cost.compute_seconds * COMPUTE_OCCUPANCY + memory_only * MEMORY_BOUND_OCCUPANCY)
        c.hbm_bytes += steps * cost.hbm_bytes
        c.flops += steps * cost.flops
        c.nvlink_bytes += steps * cost.nvlink_bytes
        c.pcie_rx_bytes += steps * tokens * PCIE_BYTES_PER_TOKEN / 2
        c.pcie_tx_bytes += steps * tokens * PCIE_BYTES_PER_TOKEN / 2

    def sample(self, now: float) -> None:
        """Record the counters at `now`; power (and so energy) follows the activity since the last sample."""
        if self._history:
            last_t = self._history[-1][0]
            if now <= last_t:
                return
            activity = self.activity(now, now - last_t)
            spec = self.spec
            load = 0.35 * activity.sm_active + 0.45 * activity.dram_active + 0.2 * activity.tensor_active
            self._power_watts = spec.idle_watts + (spec.tdp_watts - spec.idle_watts) * min(1.0, load)
            self.counters.energy_joules += self._power_watts * (now - last_t)
        self._history.append((now, replace(self.counters)))
        while self._history and self._history[0][0] < now - HISTORY_SECONDS:
            self._history.popleft()

    def activity(self, now: float, window: float) -> GpuActivity:
        """Averages over the last `window` seconds (or since the first sample)."""
        base_t, base = self._history[0] if self._history else (0.0, GpuCounters())
        for t, counters in reversed(self._history):
            if t <= now - window:
                base_t, base = t, counters
                break
        span = now - base_t
        if span <= 0:
            return GpuActivity()
        delta = {f.name: getattr(self.counters, f.name) - getattr(base, f.name) for f in fields(GpuCounters)}

        def ratio(name: str) -> float:
            return min(1.0, max(0.0, delta[name] / span))

        return GpuActivity(
            utilization=ratio("busy_seconds"),
            sm_active=ratio("sm_seconds"),
            sm_occupancy=ratio("occupancy_seconds"),
            tensor_active=ratio("tensor_seconds"),
            dram_active=ratio("dram_seconds"),
            nvlink_bytes_per_second=delta["nvlink_bytes"] / span,
            pcie_tx_bytes_per_second=delta["pcie_tx_bytes"] / span,
            pcie_rx_bytes_per_second=delta["pcie_rx_bytes"] / span,
        )

    @property
    def power_watts(self) -> float:
        return self._power_watts

    @property
    def temperature_celsius(self) -> float:
        return 30.0 + self.heat_celsius + 40.0 * self._power_watts / self.spec.tdp_watts
