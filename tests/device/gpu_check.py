"""Real-GPU check of the NVML source's GPM ratios: memory-bound work must read as DRAM-active,
compute-bound work as tensor-active.

Run on a machine with an NVIDIA GPU (Hopper or newer for GPM) and PyTorch with CUDA:

    python tests/device/gpu_check.py [--seconds 20]

While the exporter's NvmlSource samples once a second, it runs large device-to-device copies
(memory-bound), then bf16 matrix products (compute-bound), prints the mean SM, DRAM and tensor
activity of each phase, and exits 1 unless DRAM ≫ tensor in the first phase and tensor ≫ DRAM in
the second. Elsewhere it prints why it is skipped and exits 0. Not collected by pytest
(tests/device/conftest.py) and not part of .ci/run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from exporter.sources.base import SourceError  # noqa: E402
from exporter.sources.nvml import NvmlSource  # noqa: E402

RATIOS = ("llm_gpu_sm_active_ratio", "llm_gpu_dram_active_ratio", "llm_gpu_tensor_active_ratio")
MUCH_GREATER = 3.0  # "≫": at least three times
WARMUP_SECONDS = 3.0  # samples whose GPM window may straddle the phase change are dropped


def skip(reason: str) -> int:
    print(f"SKIPPED: {reason}")
    return 0


class Sampler(threading.Thread):
    """Collects the NVML source every second and files the ratios of one GPU under the phase."""

    def __init__(self, source: NvmlSource, uuid: str) -> None:
        super().__init__(daemon=True)
        self.source, self.uuid = source, uuid
        self.phase, self.phase_started = "idle", time.monotonic()
        self.samples: dict[str, list[dict[str, float]]] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def set_phase(self, phase: str) -> None:
        self.phase, self.phase_started = phase, time.monotonic()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                metrics = self.source.collect(time.monotonic())
            except BaseException as exc:  # reported by main
                self.error = exc
                return
            if time.monotonic() - self.phase_started < WARMUP_SECONDS:
                continue
            values = {m.name: m.value for m in metrics if m.labels.get("uuid") == self.uuid and m.name in RATIOS}
            if values:
                self.samples.setdefault(self.phase, []).append(values)


def memory_bound(torch, seconds: float) -> None:
    # 2 GiB buffers: far larger than L2, so every copy streams through HBM.
    src = torch.empty(1 << 31, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            dst.copy_(src)
        torch.cuda.synchronize()


def compute_bound(torch, seconds: float) -> None:
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            torch.matmul(a, b)
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        return skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        return skip("no NVIDIA GPU visible to PyTorch (torch.cuda.is_available() is False)")
    source = NvmlSource(first_window_seconds=1.0)
    try:
        metrics = source.collect(time.monotonic())
    except SourceError as exc:
        return skip(f"NVML unavailable: {exc}")
    props = torch.cuda.get_device_properties(0)
    uuid = str(getattr(props, "uuid", "") or "")
    uuids = [m.labels.get("uuid", "") for m in metrics if m.name == "llm_gpu_up"]
    match = [u for u in uuids if uuid and (u == uuid or u.endswith(uuid) or uuid in u)]
    uuid = match[0] if match else uuids[0]
    if not any(m.name == "llm_gpu_sm_active_ratio" and m.labels.get("uuid") == uuid for m in metrics):
        return skip(f"{props.name} has no GPM metrics (NVML GPM needs Hopper or newer)")
    print(f"GPU {props.name} ({uuid}), {args.seconds:g} s per phase, NVML GPM sampled every second")

    sampler = Sampler(source, uuid)
    sampler.start()
    try:
        sampler.set_phase("memory-bound: device-to-device copies")
        memory_bound(torch, args.seconds)
        sampler.set_phase("compute-bound: bf16 matmul 8192x8192")
        compute_bound(torch, args.seconds)
    finally:
        sampler.stop.set()
        sampler.join()
        source.close()
    if sampler.error is not None:
        print(f"FAILED: the NVML source raised {sampler.error!r}")
        return 1

    means: dict[str, dict[str, float]] = {}
    print(f"{'phase':40} {'samples':>7} {'SM active':>10} {'DRAM active':>12} {'tensor active':>14}")
    for phase, samples in sampler.samples.items():
        if phase == "idle":
            continue
        means[phase] = {name: statistics.fmean(s[name] for s in samples if name in s) for name in RATIOS}
        m = means[phase]
        print(f"{phase:40} {len(samples):>7} {m[RATIOS[0]]:>10.3f} {m[RATIOS[1]]:>12.3f} {m[RATIOS[2]]:>14.3f}")
    memory, compute = (
        means.get(p) for p in ("memory-bound: device-to-device copies", "compute-bound: bf16 matmul 8192x8192")
    )
    if memory is None or compute is None:
        print("FAILED: a phase produced no samples")
        return 1
    checks = [
        ("memory-bound: DRAM active >> tensor active", memory[RATIOS[1]] > MUCH_GREATER * max(memory[RATIOS[2]], 1e-3)),
        (
            "compute-bound: tensor active >> DRAM active",
            compute[RATIOS[2]] > MUCH_GREATER * max(compute[RATIOS[1]], 1e-3),
        ),
    ]
    for name, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
