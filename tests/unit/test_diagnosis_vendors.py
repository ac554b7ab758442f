"""The decode-bandwidth stage reads each vendor's memory-bandwidth signal against that vendor's band,
and says what it lacks where a vendor has none (docs/diagnosis.md, "Accelerators")."""

from __future__ import annotations

from exporter.diagnosis import Diagnoser
from exporter.model import Metric, Sample
from exporter.settings import Thresholds
from exporter.stages.vendors import BANDWIDTH_SIGNALS
from tests.unit.test_diagnosis import engine_metrics, run


def device_metrics(vendor: str, dram: float | None, utilization: float = 0.9) -> list[Metric]:
    out: list[Metric] = []
    for index in range(2):
        labels = {"gpu": str(index), "vendor": vendor, "engine": "e0"}
        out.append(Sample("llm_gpu_utilization_ratio", labels, utilization))
        if dram is not None:
            out.append(Sample("llm_gpu_dram_active_ratio", labels, dram))
    return out


def slowing_decode(vendor: str, dram: float | None):
    """The seed case's engine: a growing batch whose inter-token latency rose 2.5x."""
    return lambda i: (
        engine_metrics(running=18, waiting=3 + i, kv=0.7, itl_p95=0.02 if i < 6 else 0.05)
        + device_metrics(vendor, dram)
    )


def test_amd_umc_activity_diagnosed_like_nvidia_dram_active() -> None:
    amd, _ = run(Diagnoser(), 20, slowing_decode("amd", 0.95))
    nvidia, _ = run(Diagnoser(), 20, slowing_decode("nvidia", 0.95))
    assert amd.primary == nvidia.primary == "decode_memory_bandwidth"
    assert amd.scores["decode_memory_bandwidth"] == nvidia.scores["decode_memory_bandwidth"]
    assert any("UMC (memory-controller) activity 0.95 on GPUs 0, 1" in line for line in amd.evidence)
    assert any("DRAM active 0.95 on GPUs 0, 1" in line for line in nvidia.evidence)


def test_ascend_hbm_bandwidth_share_saturates_lower() -> None:
    # 0.72 of peak HBM bandwidth is saturation for a bandwidth share, not for a busy-time share.
    ascend, _ = run(Diagnoser(), 20, slowing_decode("ascend", 0.72))
    nvidia, _ = run(Diagnoser(), 20, slowing_decode("nvidia", 0.72))
    assert ascend.scores["decode_memory_bandwidth"] > nvidia.scores["decode_memory_bandwidth"]
    busy, saturated = BANDWIDTH_SIGNALS["ascend"].band(Thresholds())
    assert busy < Thresholds().dram_active_busy and saturated < Thresholds().dram_active_saturated
    assert any(
        f"HBM bandwidth utilization 0.72 on GPUs 0, 1 (practical peak ~{saturated:g})" in line
        for line in ascend.evidence
    )


def test_a_vendor_without_a_bandwidth_signal_says_so_and_scores_from_latency() -> None:
    gaudi, _ = run(Diagnoser(), 20, slowing_decode("gaudi", None))
    assert any(
        line.endswith("the Gaudi metric exporter has no HBM-bandwidth signal: scored from inter-token latency alone")
        for line in gaudi.evidence
    ), gaudi.evidence
    assert gaudi.scores["decode_memory_bandwidth"] > 0.0  # still scored, from the slowing tokens


def test_series_without_a_vendor_label_read_as_nvidia() -> None:
    def unlabelled(i: int) -> list[Metric]:
        out = []
        for metric in slowing_decode("nvidia", 0.95)(i):
            if isinstance(metric, Sample) and "vendor" in metric.labels:
                metric = Sample(metric.name, {k: v for k, v in metric.labels.items() if k != "vendor"}, metric.value)
            out.append(metric)
        return out

    d, _ = run(Diagnoser(), 20, unlabelled)
    assert any("DRAM active 0.95 on GPUs 0, 1" in line for line in d.evidence)
