"""The engine families beyond the basic gauges and counters: labelled counters, state, and the
ratios worked out over the exporter's window from the engine's counters (exporter/sources/engine.py
calls `signal_samples` for each reading).

A ratio over the window is the increase of one counter over the increase of another, as
`rate(a[w]) / rate(b[w])` would give it, so a reset (a restart) costs one window, never a wrong
figure; no increase of the denominator means no series rather than a 0 that reads as "no reuse".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from exporter.model import EngineReading, Labels, Sample
from exporter.window import DeltaWindow

#: (key, values) → the window holding them: the source's `_observe`, one window per key and model
Observe = Callable[[str, tuple[float, ...]], DeltaWindow]


def signal_samples(reading: EngineReading, labels: Labels, observe: Observe) -> Iterator[Sample]:
    """Every sample of the newer families this reading carries (absent signals give none)."""
    for reason, value in sorted(reading.admission_rejections_total.items()):
        yield Sample("llm_engine_admission_rejections_total", {**labels, "reason": reason}, value)
    for source, value in sorted(reading.prompt_tokens_cached_total.items()):
        yield Sample("llm_engine_prompt_tokens_cached_total", {**labels, "source": source}, value)
    if reading.sleep_state is not None:
        asleep = 0.0 if reading.sleep_state == "awake" else 1.0
        yield Sample("llm_engine_asleep", {**labels, "sleep_state": reading.sleep_state}, asleep)
    if reading.estimated_flops_total is not None:
        yield Sample("llm_engine_estimated_flops_total", labels, reading.estimated_flops_total)
    directions: tuple[tuple[str, float | None], ...] = (
        ("read", reading.estimated_read_bytes_total),
        ("write", reading.estimated_write_bytes_total),
    )
    for direction, moved in directions:
        if moved is not None:
            yield Sample("llm_engine_estimated_memory_bytes_total", {**labels, "direction": direction}, moved)
    for pool, usage in sorted(reading.kv_pool_usage.items()):
        yield Sample("llm_engine_kv_cache_pool_usage_ratio", {**labels, "pool": pool}, usage)
    for state, slots in (("used", reading.lora_slots_used), ("total", reading.lora_slots_total)):
        if slots is not None:
            yield Sample("llm_engine_lora_adapter_slots", {**labels, "state": state}, slots)
    yield from _window_ratios(reading, labels, observe)


def _window_ratios(reading: EngineReading, labels: Labels, observe: Observe) -> Iterator[Sample]:
    cached = reading.prompt_tokens_cached_total
    if cached and reading.prompt_tokens_total is not None:
        reuse = _ratio(observe("prompt_reuse", (sum(cached.values()), reading.prompt_tokens_total)))
        if reuse is not None:
            yield Sample("llm_engine_prompt_reuse_ratio", labels, reuse)
    hits, queries = reading.external_prefix_cache_hits_total, reading.external_prefix_cache_queries_total
    if hits is not None and queries is not None:
        external = _ratio(observe("external_prefix_cache", (hits, queries)))
        if external is not None:
            yield Sample("llm_engine_external_prefix_cache_hit_ratio", labels, external)
    accepted, drafted = reading.spec_decode_accepted_tokens_total, reading.spec_decode_draft_tokens_total
    acceptance = reading.spec_decode_acceptance_ratio
    if accepted is not None and drafted is not None:
        acceptance = _ratio(observe("spec_decode", (accepted, drafted)))
    if acceptance is not None:
        yield Sample("llm_engine_spec_decode_acceptance_ratio", labels, acceptance)
    steps = reading.histograms.get("iteration_tokens")
    if steps is not None and not steps.sum != steps.sum:  # a sum of NaN: no token total to divide
        totals = observe("iteration_tokens", (steps.sum, steps.count)).total()
        if totals is not None and totals[1] > 0:
            yield Sample("llm_engine_tokens_per_step", labels, totals[0] / totals[1])


def _ratio(window: DeltaWindow) -> float | None:
    totals = window.total()
    if totals is None or totals[1] <= 0:
        return None
    return min(1.0, max(0.0, totals[0] / totals[1]))
