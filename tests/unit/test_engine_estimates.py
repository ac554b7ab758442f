"""The engine's MFU counters as compute and memory-bandwidth evidence (exporter/stages/
engine_estimates.py): beside the GPU's counters where it has them, in their place where it has none,
and as a bare rate on a GPU whose peak is not known; speculative decoding and tokens per step where
tokens slowed."""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages import decode_memory_bandwidth, prefill_compute
from exporter.stages.engine_estimates import peak_of
from exporter.stages.inputs import EngineInputs
from exporter.stages.signals import History

H100 = "NVIDIA H100 80GB HBM3"
T = Thresholds()


def history(seconds: float = 60.0, **per_second: float) -> History:
    """An engine whose counters grow at `per_second` and whose levels are the other keywords' values."""
    counters = {k: v for k, v in per_second.items() if k.endswith("_total")}
    levels = {k: v for k, v in per_second.items() if not k.endswith("_total")}
    h = History(600.0)
    for t in range(0, int(seconds) + 1, 5):
        inputs = EngineInputs(**{k: v * t for k, v in counters.items()}, **levels)  # type: ignore[arg-type]
        inputs.gpu_models = [H100]
        h.add(float(t), inputs)
    return h


def test_engine_flops_stand_in_for_missing_tensor_activity() -> None:
    flops, _ = peak_of(H100) or (0.0, 0.0)
    h = history(
        estimated_flops_total=0.5 * flops, prompt_tokens_total=9000.0, generation_tokens_total=500.0, running=4.0
    )
    result = prefill_compute.score(h, T)
    assert result.score > 0.9
    assert any("50% of NVIDIA H100" in line and "in place of tensor activity" in line for line in result.evidence)


def test_engine_flops_are_evidence_beside_the_gpu_s_own_tensor_activity() -> None:
    flops, _ = peak_of(H100) or (0.0, 0.0)
    h = history(estimated_flops_total=0.5 * flops, tensor_active=0.1, prompt_tokens_total=9000.0, running=4.0)
    result = prefill_compute.score(h, T)
    assert result.score < 0.1  # the GPU's own counter decides
    assert any(line.startswith("engine-estimated FLOPs") for line in result.evidence)
    assert any(line.startswith("tensor active 0.10") for line in result.evidence)


def test_an_unknown_gpu_gets_the_rate_but_no_share() -> None:
    h = history(estimated_memory_bytes_total=2e12, running=4.0)
    h.latest().gpu_models = ["Some Future GPU"]
    result = decode_memory_bandwidth.score(h, T)
    assert any("2000.0 GB/s per GPU" in line and "peak unknown for Some Future GPU" in line for line in result.evidence)


def test_a_round_without_the_gpu_source_keeps_the_gpus_peak() -> None:
    """The GPU source missed the last round (a timeout): the window's rates still stand, and so
    does the model of the GPUs they are a share of."""
    _, bandwidth = peak_of(H100) or (0.0, 0.0)
    h = history(estimated_memory_bytes_total=0.6 * bandwidth, running=4.0)
    h.add(65.0, EngineInputs(estimated_memory_bytes_total=0.6 * bandwidth * 65, running=4.0))
    assert h.latest().gpu_models == []
    result = decode_memory_bandwidth.score(h, T)
    assert any("60% of NVIDIA H100" in line for line in result.evidence), result.evidence


def test_speculative_acceptance_that_fell_explains_slower_tokens() -> None:
    h = History(600.0)
    for t in range(0, 121, 5):
        slowed = t > 60
        inputs = EngineInputs(
            running=8.0,
            itl_p95=0.03 if slowed else 0.01,
            spec_decode_acceptance=0.3 if slowed else 0.8,
            tokens_per_step=40.0,
        )
        h.add(float(t), inputs)
    lines = decode_memory_bandwidth.score(h, T).evidence
    assert any("accepts 30% of draft tokens (was 80% at best)" in line for line in lines), lines
