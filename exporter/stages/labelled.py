"""The engine families with a label of their own (a reason, a pool, a rank), each read into one
field of the diagnosis's per-engine inputs (exporter/stages/inputs.py). An engine's sleep state is
its state, not an input: exporter/diagnosis/states.py reads `llm_engine_asleep`."""

from __future__ import annotations

from typing import Protocol

from exporter.model import Sample


class EngineInputs(Protocol):
    """The fields of exporter.stages.inputs.EngineInputs read here."""

    admission_rejections_total: float | None
    estimated_memory_bytes_total: float | None
    rejection_reasons: list[str]
    kv_pools: dict[str, float]
    ranks_not_reporting: list[str]


#: labelled engine families summed over their label into one input
ENGINE_SUMS = {
    "llm_engine_admission_rejections_total": "admission_rejections_total",
    "llm_engine_estimated_memory_bytes_total": "estimated_memory_bytes_total",
}
LABELLED_ENGINE_FAMILIES = frozenset({*ENGINE_SUMS, "llm_engine_kv_cache_pool_usage_ratio", "llm_engine_rank_up"})


def labelled_engine_input(inputs: EngineInputs, metric: Sample) -> None:
    """The engine families with a label of their own, into one input each."""
    name, labels, value = metric.name, metric.labels, metric.value
    if name in ENGINE_SUMS:
        attr = ENGINE_SUMS[name]
        setattr(inputs, attr, (getattr(inputs, attr) or 0.0) + value)
        if name == "llm_engine_admission_rejections_total" and value > 0:
            inputs.rejection_reasons.append(labels.get("reason", ""))
    elif name == "llm_engine_kv_cache_pool_usage_ratio":
        inputs.kv_pools[labels.get("pool", "")] = value
    elif name == "llm_engine_rank_up" and not value:
        inputs.ranks_not_reporting.append(labels.get("rank", ""))
