"""Host pauses and jitter, as evidence for the host-overhead stage (the framework: "the same input's
inference time varies by more than 15 %: check system load, the GC frequency, the input
distribution"): the spread of time per output token round to round, full garbage collections of the
engine's Python process (prometheus_client's `python_gc_collections_total`; it counts collections
and does not time them, so a pause's length is not known: vLLM's `VLLM_GC_DEBUG` logs them), CPU
throttling of the engine's cgroup (cgroup v2 `cpu.stat`) and CPU stolen from the node."""

from __future__ import annotations

from collections.abc import Sequence
from math import sqrt
from statistics import fmean

from exporter.health import alerts
from exporter.health.finding import HOST, STARTUP, Finding
from exporter.health.record import FindingKind, register
from exporter.health.view import NodeView
from exporter.settings import HealthSettings

WINDOW = 300.0
#: the window the spread of time per output token is taken over, and the least tokens a round
#: must generate for its mean to count (a round of a few tokens is noise, not jitter)
JITTER_WINDOW, JITTER_MIN_TOKENS, JITTER_MIN_ROUNDS = 120.0, 20.0, 4
ITL = "llm_engine_inter_token_latency_seconds"


def _per_round(view: NodeView, labels: dict[str, str], num: str, den: str) -> list[float]:
    """The mean of num over den between each two points of the window (both counters of one
    engine, observed together: their points fall at the same times)."""
    top = view.counters.samples(_key(num, labels), JITTER_WINDOW)
    bottom = dict(view.counters.samples(_key(den, labels), JITTER_WINDOW))
    means = []
    for (t0, n0), (t1, n1) in zip(top, top[1:]):
        d0, d1 = bottom.get(t0), bottom.get(t1)
        if d0 is None or d1 is None or d1 - d0 < JITTER_MIN_TOKENS or n1 < n0:
            continue
        means.append((n1 - n0) / (d1 - d0))
    return means


def _key(name: str, labels: dict[str, str]) -> tuple:
    return (name, *sorted(labels.items()))


def round_to_round(means: Sequence[float]) -> float:
    """The spread of successive rounds' means relative to their mean: von Neumann's estimate from
    successive differences (the root of half their mean square), which equals the standard
    deviation for values that scatter independently, as a host's stalls make them, while a load
    that shifts (a burst of long requests, a phase's backlog draining) moves the level smoothly and
    barely counts: the spread around the mean read every such shift as jitter."""
    steps = [b - a for a, b in zip(means, means[1:])]
    return sqrt(fmean(d * d for d in steps) / 2) / fmean(means)


def jitter(view: NodeView, s: HealthSettings) -> list[Finding]:
    """Time per output token only: request time per generated token mixes the requests that end in
    a round (their queueing included) with the tokens generated in it, and varied by more than the
    line on every steady simulated engine."""
    found = []
    for _, labels in view.counter_keys.get(ITL + "_count", []):
        own = dict(labels)
        means = _per_round(view, own, ITL + "_sum", ITL + "_count")
        if len(means) < JITTER_MIN_ROUNDS or fmean(means) <= 0:
            continue
        spread = round_to_round(means)
        if spread > s.jitter_ratio:
            text = (
                f"time per output token varies {spread:.0%} round to round over {JITTER_WINDOW:.0f} s (mean "
                f"{fmean(means) * 1000:.1f} ms, {min(means) * 1000:.1f}-{max(means) * 1000:.1f} ms; line "
                f"{s.jitter_ratio:.0%})"
            )
            engine = own.get("engine", "")
            found.append(Finding("jitter", HOST, engine, text, ITL + "_sum", spread, engine=engine))
    return found


def gc_pauses(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    per_engine: dict[str, dict[str, float]] = {}
    for _, labels in view.counter_keys.get("llm_engine_gc_collections_total", []):
        rose = view.increase("llm_engine_gc_collections_total", labels, WINDOW)
        span = view.span("llm_engine_gc_collections_total", labels, WINDOW)
        if rose is not None and span > 0:
            per_engine.setdefault(labels.get("engine", ""), {})[labels.get("generation", "")] = rose / span * 60
    for engine, rates in sorted(per_engine.items()):
        full = rates.get("2", 0.0)
        if full > s.gc_full_collections_per_minute:
            shown = ", ".join(f"gen {g} {r:.1f}/min" for g, r in sorted(rates.items()))
            text = (
                f"{full:.1f} full garbage collections per minute (line {s.gc_full_collections_per_minute:g}; {shown}): "
                "each stops the engine's Python thread for its length, which prometheus_client does not time"
            )
            found.append(Finding("gc_pauses", HOST, engine, text, "python_gc_collections_total", full, engine=engine))
    return found


def throttled(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for _, labels in view.counter_keys.get("llm_engine_cgroup_cpu_periods_total", []):
        periods = view.increase("llm_engine_cgroup_cpu_periods_total", labels, WINDOW) or 0.0
        hit = view.increase("llm_engine_cgroup_cpu_throttled_periods_total", labels, WINDOW) or 0.0
        held = view.increase("llm_engine_cgroup_cpu_throttled_seconds_total", labels, WINDOW) or 0.0
        if periods > 0 and hit / periods > s.cpu_throttled_ratio:
            engine = labels.get("engine", "")
            text = (
                f"its cgroup was throttled in {hit / periods:.0%} of its CPU periods over {WINDOW / 60:.0f} minutes "
                f"({held:.1f} s held back; line {s.cpu_throttled_ratio:.0%}): raise or remove the CPU limit"
            )
            found.append(Finding("cpu_throttled", HOST, engine, text, "cgroup cpu.stat nr_throttled", hit / periods,
                                 engine=engine))  # fmt: skip
    return found


def steal(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for _, value in view.gauges.get("llm_host_cpu_steal_ratio", []):
        if value > s.cpu_steal_ratio:
            text = f"{value:.0%} of the node's CPU time stolen by the hypervisor (line {s.cpu_steal_ratio:.0%})"
            found.append(Finding("cpu_steal", HOST, "node", text, "/proc/stat steal", value))
    return found


def _found_by_the_start_tracker(view: NodeView, s: HealthSettings) -> list[Finding]:
    """Loading engines are found by exporter/health/startup.py, which remembers starts."""
    return []


_CGROUP = ("periods", "throttled_periods", "throttled_seconds")
for _id, _topic, _title, _check, _alert, _line, _reads in (
    ("jitter", HOST, "jittery tokens", jitter, alerts.HOST_PAUSES,
     "time per output token varies more than `jitter_ratio` (15 %) round to round",
     ((ITL + "_sum", JITTER_WINDOW), (ITL + "_count", JITTER_WINDOW))),
    ("gc_pauses", HOST, "garbage-collection pauses", gc_pauses, alerts.HOST_PAUSES,
     "more than `gc_full_collections_per_minute` (1) generation-2 collections per minute",
     (("llm_engine_gc_collections_total", WINDOW),)),
    ("cpu_throttled", HOST, "CPU quota throttling", throttled, alerts.HOST_PAUSES,
     "more than `cpu_throttled_ratio` (5 %) of the engine cgroup's periods throttled",
     tuple((f"llm_engine_cgroup_cpu_{c}_total", WINDOW) for c in _CGROUP)),
    ("cpu_steal", HOST, "CPU steal", steal, alerts.HOST_PAUSES, "more than `cpu_steal_ratio` (5 %) stolen", ()),
    ("engine_loading", STARTUP, "engine loading", _found_by_the_start_tracker, alerts.STUCK_LOADING,
     "the engine's process runs but neither its metrics nor a request are served; pages after 15 minutes", ()),
):  # fmt: skip
    register(FindingKind(_id, _topic, _title, _check, _alert, _line, _reads))
