"""What a verdict did not see: the engine families an engine does not report, and its ranks that
stopped reporting.

A family the engine's version or options do not have (TGI has no KV usage, vLLM without
`--enable-mfu-metrics` no FLOPs, an engine before 0.32 no admission counter) is absent from the
exposition, never a zero; /diagnosis lists it per engine with what it would have told, so a verdict
reached without it reads as such. An engine's state (asleep among them) is states.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.stages.inputs import EngineInputs

#: the engine families the stages and the SLOs read, and what each tells them
WATCHED: Mapping[str, str] = {
    "llm_engine_requests_running": "requests in the engine (every stage)",
    "llm_engine_requests_waiting": "queueing",
    "llm_engine_kv_cache_usage_ratio": "KV-cache capacity",
    "llm_engine_preemptions_total": "KV-cache capacity (preemptions)",
    "llm_engine_prompt_tokens_total": "prefill compute (prompt share)",
    "llm_engine_generation_tokens_total": "prefill compute (prompt share)",
    "llm_engine_time_to_first_token_seconds": "prefill compute; ttft SLOs",
    "llm_engine_inter_token_latency_seconds": "decode memory bandwidth; itl SLOs",
    "llm_engine_queue_time_seconds": "queueing",
    "llm_engine_e2e_request_latency_seconds": "e2e SLOs; goodput",
    "llm_engine_admission_rejections_total": "refused requests as SLO misses",
    "llm_engine_prompt_tokens_cached_total": "prefix reuse by tokens",
    "llm_engine_estimated_flops_total": "the engine-side roofline (MFU counters)",
}
NOT_REPORTED = "not reported by this engine"


def not_reported(inputs: EngineInputs) -> list[dict[str, str]]:
    """The watched families this engine's last scrape did not carry, with what each would tell."""
    return [
        {"family": family, "used_for": used_for, "why": NOT_REPORTED}
        for family, used_for in WATCHED.items()
        if family not in inputs.families
    ]


def coverage_fields(inputs: EngineInputs) -> dict[str, Any]:
    """The /diagnosis fields of one engine beside its verdict and state (states.py): what it does
    not report, its ranks that stopped reporting."""
    fields: dict[str, Any] = {"not_reported": not_reported(inputs)}
    if inputs.ranks_not_reporting:
        fields["ranks_not_reporting"] = sorted(inputs.ranks_not_reporting)
    return fields
