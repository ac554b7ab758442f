"""Values that cannot be true, caught before they are exported.

An engine's numbers pass through the exporter into alerts and diagnosis: a KV usage of -5 or
+Inf waiting requests would page someone, or hide a real saturation behind a nonsense one. Each
signal of an EngineReading has a rule here; a value that breaks it is dropped (the family is
absent for that model, as when the engine has no such signal), never clamped, since a clamped
value looks real. Every dropped value is counted in
`llm_exporter_source_errors_total{reason="invalid_value"}` (one per collection that dropped any).

A counter that goes down between scrapes is a restart, as in Prometheus (`rate()` handles the
reset; the exporter's windows do the same), so it is not an impossible value. What cannot be true
within one scrape is: a negative or non-finite counter, hits above queries, and a histogram whose
buckets fall as `le` rises or whose count is below its +Inf bucket.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import gt
from typing import Any

from exporter.model import EngineReading, Histogram

INVALID_VALUE = "invalid_value"


@dataclass(frozen=True)
class Rule:
    """One rule of docs/metrics.md ("Values that cannot be true"), with the check behind it."""

    fields: tuple[str, ...]
    text: str
    holds: Callable[[float], bool]


def _non_negative(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _ratio(value: float) -> bool:
    return math.isfinite(value) and 0 <= value <= 1


RULES = (
    Rule(
        ("requests_running", "requests_waiting", "requests_waiting_deferred", "lora_slots_used", "lora_slots_total"),
        "finite and ≥ 0; else dropped",
        _non_negative,
    ),
    Rule(
        ("kv_cache_usage_ratio", "prefix_cache_hit_ratio", "spec_decode_acceptance_ratio"),
        "finite and within 0–1; else dropped",
        _ratio,
    ),
    Rule(
        (
            "preemptions_total",
            "prompt_tokens_total",
            "generation_tokens_total",
            "process_cpu_seconds_total",
            "prefix_cache_hits_total",
            "prefix_cache_queries_total",
            "external_prefix_cache_hits_total",
            "external_prefix_cache_queries_total",
            "estimated_flops_total",
            "estimated_read_bytes_total",
            "estimated_write_bytes_total",
            "spec_decode_drafts_total",
            "spec_decode_draft_tokens_total",
            "spec_decode_accepted_tokens_total",
            "corrupted_requests_total",
        ),
        "finite and ≥ 0; else dropped. A drop between scrapes is a restart (a reset), not an error",
        _non_negative,
    ),
)
#: per-key signals (by reason, source, pool): a key whose value breaks the rule is dropped alone
KEYED_RULES = (
    Rule(("admission_rejections_total", "prompt_tokens_cached_total"), "each value finite and ≥ 0", _non_negative),
    Rule(("kv_pool_usage",), "each pool's usage finite and within 0–1", _ratio),
)
PAIR_RULE = "prefix-cache hits above queries: both dropped (no hit ratio)"
HISTOGRAM_RULE = (
    "bucket counts finite, ≥ 0 and non-decreasing in `le`, `_count` not below the +Inf bucket, "
    "`_sum` ≥ 0 (NaN when the engine exports none); else the whole summary is dropped"
)


def histogram_holds(histogram: Histogram) -> bool:
    """Cumulative buckets that could have come from real observations of a latency: finite, from
    zero up, never decreasing (each check a pass in C: every engine's every histogram, every round)."""
    cumulative = histogram.cumulative
    if not all(map(math.isfinite, cumulative)) or cumulative[0] < 0.0 or any(map(gt, cumulative, cumulative[1:])):
        return False
    if not math.isfinite(histogram.count) or histogram.count < cumulative[-1]:
        return False
    return math.isnan(histogram.sum) or _non_negative(histogram.sum)


def screened(reading: EngineReading) -> tuple[EngineReading, list[str]]:
    """The reading without its impossible values, and a description of each one dropped."""
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for rule in RULES:
        for name in rule.fields:
            value = getattr(reading, name)
            if value is not None and not rule.holds(value):
                changes[name] = None
                problems.append(f"{name}={value!r}")
    for rule in KEYED_RULES:
        for name in rule.fields:
            values = getattr(reading, name)
            bad_keys = [key for key, value in values.items() if not rule.holds(value)]
            if bad_keys:
                changes[name] = {key: value for key, value in values.items() if key not in bad_keys}
                problems.extend(f"{name}[{key}]={values[key]!r}" for key in bad_keys)
    hits = changes.get("prefix_cache_hits_total", reading.prefix_cache_hits_total)
    queries = changes.get("prefix_cache_queries_total", reading.prefix_cache_queries_total)
    if isinstance(hits, float) and isinstance(queries, float) and hits > queries:
        changes["prefix_cache_hits_total"] = changes["prefix_cache_queries_total"] = None
        problems.append(f"prefix_cache_hits_total={hits!r} > prefix_cache_queries_total={queries!r}")
    bad = [key for key, histogram in reading.histograms.items() if not histogram_holds(histogram)]
    if bad:
        changes["histograms"] = {k: h for k, h in reading.histograms.items() if k not in bad}
        problems.extend(f"histogram {key}" for key in bad)
    return (dataclasses.replace(reading, **changes) if changes else reading), problems


def rules_reference() -> list[str]:
    """The rules as docs/metrics.md states them (written by exporter.reference)."""
    lines = [
        "## Values that cannot be true",
        "",
        "Checked per model before export (exporter/sanity.py); a value that breaks its rule is dropped, never",
        'clamped, and counted in `llm_exporter_source_errors_total{reason="invalid_value"}`. Signals are the',
        "engine reading's fields; each exported one is the family `llm_engine_<signal>` (hits and queries only feed",
        "`llm_engine_prefix_cache_hit_ratio`).",
        "",
        "| signal | rule |",
        "|---|---|",
    ]
    lines += [f"| {', '.join(f'`{name}`' for name in rule.fields)} | {rule.text} |" for rule in RULES + KEYED_RULES]
    lines += [f"| prefix-cache counters | {PAIR_RULE} |", f"| latency histograms | {HISTOGRAM_RULE} |"]
    return lines
