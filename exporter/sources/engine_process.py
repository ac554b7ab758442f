"""What an engine's exposition says of its process and its start, whatever the engine: the start
time and Python's garbage collector from prometheus_client's process and GC collectors (vLLM,
SGLang and trtllm-serve serve them unlabelled), and the start-up figures the engines that have them
export (field-2026.md §3.1). Read by the engine source beside the engine's own mapping, since the
names are the same in every engine that has them. An engine served at several URLs (`rank_urls`)
is read at its first: its own process, as for the process CPU."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from exporter.model import Sample
from exporter.promtext import ParsedSamples
from exporter.sources.engine_urls import URL_LABEL

PROCESS_START = "process_start_time_seconds"
GC_COLLECTIONS = "python_gc_collections_total"
#: wire name -> the `phase` of llm_engine_startup_seconds (gauges in seconds)
STARTUP_GAUGES = {
    "sglang:engine_startup_time": "engine",
    "sglang_engine_startup_time": "engine",
    "sglang:engine_load_weights_time": "load_weights",
    "sglang_engine_load_weights_time": "load_weights",
    # Triton: per model (and version), the model's last load
    "nv_model_load_duration_secs": "model_load",
}
#: Dynamo ModelExpress's load histogram: its mean over the process' lifetime is the figure
MODELEXPRESS_LOAD = ("mx_load_seconds_sum", "mx_load_seconds_count")
NAMES = frozenset({PROCESS_START, GC_COLLECTIONS, *STARTUP_GAUGES, *MODELEXPRESS_LOAD})


def process_samples(parsed: ParsedSamples, labels: Mapping[str, str], model: str) -> Iterator[Sample]:
    """The process and start-up samples of one reading (one model of the engine)."""
    starts = [value for key, value in (parsed.get(PROCESS_START) or {}).items() if _first_url(key)]
    if starts and starts[0] > 0:
        yield Sample("llm_engine_process_start_time_seconds", labels, starts[0])
    for key, value in sorted((parsed.get(GC_COLLECTIONS) or {}).items()):
        generation = dict(key).get("generation") if _first_url(key) else None
        if generation is not None:
            yield Sample("llm_engine_gc_collections_total", {**labels, "generation": generation}, value)
    figures: dict[str, float] = {}
    for name, phase in STARTUP_GAUGES.items():
        for key, value in (parsed.get(name) or {}).items():
            own = dict(key)
            if own.get("model", model) == model and value >= 0:
                figures[phase] = max(value, figures.get(phase, 0.0))
    total = sum((parsed.get(MODELEXPRESS_LOAD[0]) or {}).values())
    count = sum((parsed.get(MODELEXPRESS_LOAD[1]) or {}).values())
    if count > 0:
        figures["load"] = total / count
    for phase, value in sorted(figures.items()):
        yield Sample("llm_engine_startup_seconds", {**labels, "phase": phase}, value)


def _first_url(key: tuple[tuple[str, str], ...]) -> bool:
    """A series of the engine's first URL (or of its only one)."""
    return dict(key).get(URL_LABEL, "0") == "0"
