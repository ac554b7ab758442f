"""Diagnosis thresholds, each with where its default comes from.

Every threshold is a configuration key under `diagnosis:` (docs/diagnosis.md); the alert rules and
dashboards read the same values, so a page and its graph agree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Thresholds:
    # Autoscaler conventions: Gateway API inference extension (queueThresholdCritical = 5) and
    # llm-d WVA (queueLengthThreshold = 5) call a replica saturated at 5 waiting requests.
    waiting_requests: float = 5.0
    # The same projects use KV usage 0.8 as the saturation line; vllm-doctor flags 0.9.
    kv_usage_warning: float = 0.8
    kv_usage_critical: float = 0.95
    # vllmstat/vllm-doctor: any sustained preemption is a capacity problem; 0.05/s is their rate line.
    preemptions_per_second: float = 0.05
    # NVIDIA DCGM profiling guidance: DRAM active tops out near 0.8 in practice.
    dram_active_saturated: float = 0.8
    dram_active_busy: float = 0.6
    # DCGM: SM active below 0.5 "likely indicates ineffective GPU usage".
    sm_active_ineffective: float = 0.5
    # A tensor pipe busy most cycles means the step is compute-bound (prefill).
    tensor_active_high: float = 0.5
    # vllm-doctor flags TTFT p95 ≥ 2 s and TPOT p95 ≥ 0.2 s; we look at changes against the
    # engine's own baseline first, these absolute lines are the fallback.
    ttft_p95_seconds: float = 2.0
    itl_p95_seconds: float = 0.2
    # ITL up this many times over the engine's recent best means decode slowed down.
    itl_slowdown_ratio: float = 2.0
    # RDMA: link utilization near the rate, and congestion notifications.
    rdma_utilization_high: float = 0.8
    cnp_per_second: float = 1000.0
    retransmissions_per_second: float = 10.0
    # One Python scheduler thread saturates one core; 0.9 of a core is "at its limit".
    engine_cpu_cores_busy: float = 0.9
    # Hysteresis: a stage turns active at `enter` and stays active until it falls below `exit`.
    enter_score: float = 0.6
    exit_score: float = 0.4
    # Levels are averaged over `level_seconds`; trends compare against the best over `baseline_seconds`.
    level_seconds: float = 30.0
    baseline_seconds: float = 600.0

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
