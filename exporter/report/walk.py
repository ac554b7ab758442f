"""The stage walk: the framework's stages in order, each with its score over every window, a
verdict, the evidence with numbers, and what it is not.

The per-engine stages are the exporter's own verdicts as Prometheus stored them
(`llm_bottleneck_primary`, `llm_bottleneck_score`): the report does not diagnose again, it reads
how the running diagnosis judged each engine over the window. An engine's primary stage for a
window is the stage that was primary for the largest share of its steps there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from exporter.catalogue import STAGES
from exporter.report.matrix import Row
from exporter.report.render_text import fmt_relative, fmt_value

NONE = "none"
#: A stage leads a window when it was primary in at least this share of the engines' steps.
LEAD_SHARE = 0.25
#: A score change below this is noise: the diagnosis' own scores move this much between steps.
SCORE_CHANGE = 0.15


@dataclass(frozen=True)
class EngineStages:
    """One engine in one window: the share of steps each stage was primary, and mean scores."""

    primary_share: Mapping[str, float]
    scores: Mapping[str, float]
    steps: int

    @property
    def primary(self) -> str:
        if not self.primary_share:
            return NONE
        return max(self.primary_share, key=lambda s: (self.primary_share[s], s == NONE))


@dataclass(frozen=True)
class StageStep:
    stage: str
    scores: Mapping[str, float | None]  # window -> mean score over engines
    shares: Mapping[str, float | None]  # window -> share of engine-steps where it was primary
    verdict: str
    evidence: list[str] = field(default_factory=list)
    not_this: list[str] = field(default_factory=list)


def cluster_primary(engines: Mapping[str, EngineStages]) -> str:
    """The stage most engines had as their primary; `none` when no engine has data."""
    counts: dict[str, int] = {}
    for stages in engines.values():
        counts[stages.primary] = counts.get(stages.primary, 0) + 1
    return max(counts, key=lambda s: (counts[s], s != NONE)) if counts else NONE


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def verdict(
    base_share: float | None, incident_share: float | None, base_score: float | None, incident_score: float | None
) -> str:
    if incident_share is None or base_share is None:
        return "no data"
    if incident_share >= LEAD_SHARE > base_share:
        return "became the bottleneck"
    if base_share >= LEAD_SHARE > incident_share:
        return "eased"
    if base_score is not None and incident_score is not None:
        if incident_score - base_score >= SCORE_CHANGE:
            return "worsened"
        if base_score - incident_score >= SCORE_CHANGE:
            return "improved"
    return "unchanged"


def walk(
    stages: Mapping[str, Mapping[str, EngineStages]],  # window -> engine -> stages
    cluster_rows: Mapping[str, Row],  # figure key -> cluster-wide row (first cluster)
) -> list[StageStep]:
    steps = []
    for stage in STAGES:
        scores: dict[str, float | None] = {}
        shares: dict[str, float | None] = {}
        for window, engines in stages.items():
            scores[window] = _mean([e.scores[stage] for e in engines.values() if stage in e.scores])
            shares[window] = _mean([e.primary_share.get(stage, 0.0) for e in engines.values()]) if engines else None
        step = StageStep(
            stage,
            scores,
            shares,
            verdict(shares.get("baseline"), shares.get("incident"), scores.get("baseline"), scores.get("incident")),
        )
        step.evidence.extend(_evidence(stage, cluster_rows))
        step.not_this.extend(_misreadings(stage, step.verdict, cluster_rows))
        steps.append(step)
    return steps


_EVIDENCE: Mapping[str, tuple[str, ...]] = {
    "queueing": ("waiting", "queue_p99", "request_rate"),
    "prefill_compute": ("ttft_p99", "prompt_tokens_rate", "tensor_active"),
    "decode_memory_bandwidth": ("itl_p50", "dram_active", "sm_active", "generation_tokens_rate"),
    "kv_cache_capacity": ("kv_usage_max", "preemptions_rate", "running"),
    "cross_node_communication": ("rdma_utilization", "rdma_congestion"),
    "host_overhead": ("cpu",),
}


def change_line(row: Row, window: str = "incident") -> str:
    base, other = row.value("baseline"), row.value(window)
    unit = row.figure.unit
    text = f"{row.figure.label} {fmt_value(base, unit)} → {fmt_value(other, unit)}"
    comparison = row.incident if window == "incident" else row.after
    if comparison is not None and comparison.relative is not None:
        text += f" ({fmt_relative(comparison.relative)})"
    return text


def _evidence(stage: str, rows: Mapping[str, Row]) -> list[str]:
    return [change_line(rows[key]) for key in _EVIDENCE.get(stage, ()) if key in rows]


def _ratio(rows: Mapping[str, Row], key: str) -> float | None:
    row = rows.get(key)
    if row is None:
        return None
    base, incident = row.value("baseline"), row.value("incident")
    if base is None or incident is None or base <= 0:
        return None
    return incident / base


def _misreadings(stage: str, verdict_text: str, rows: Mapping[str, Row]) -> list[str]:
    """The seed case's misreadings, each said where its figures are in the matrix."""
    out = []
    moved = verdict_text in ("became the bottleneck", "worsened")
    if stage == "decode_memory_bandwidth" and moved:
        sm = rows.get("sm_active")
        value = sm.value("incident") if sm else None
        if value is not None and value < 0.8:
            out.append(
                f"SM active {value:.0%} is not idle capacity: a decode step bound by memory bandwidth waits on "
                "HBM reads of the KV cache, and more concurrency would make each step read more"
            )
    if stage == "queueing" or (stage == "decode_memory_bandwidth" and moved):
        p50, p99 = _ratio(rows, "e2e_p50"), _ratio(rows, "e2e_p99")
        if p50 is not None and p99 is not None and p99 > 1.2 * p50:
            out.append(f"an average hides P99: E2E P50 moved ×{p50:.2f}, P99 ×{p99:.2f}")
    if stage == "kv_cache_capacity" and moved:
        prompt = _ratio(rows, "mean_prompt_tokens")
        if prompt is not None and prompt > 1.5:
            out.append(
                f"a static KV configuration: the pool was sized for prompts ×{prompt:.1f} shorter; "
                "gpu_memory_utilization and max_model_len do not follow the request mix"
            )
    return out
