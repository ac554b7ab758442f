"""Per-engine inputs of the diagnosis, read from normalized metrics only.

The diagnosis never sees an engine's own metric names: it reads the `llm_*` families, so a new
engine or GPU source works with it unchanged. Counters become rates here, reset-aware.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, fields
from statistics import fmean
from typing import Any

from exporter.catalogue import ENGINE_SETTINGS
from exporter.model import Labels, Metric, QuantileSummary, Sample
from exporter.stages.pd_inputs import HAND_OVER_FAMILIES, HandOverInputs, absorb
from exporter.stages.pd_view import PdView

EngineKey = tuple[str, str, str]  # engine, engine_type, model


@dataclass
class EngineInputs(HandOverInputs):
    """One collection's view of one engine: levels, quantiles and the hardware it runs on (and
    its part of a disaggregated pair: HandOverInputs)."""

    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    ttft_p95: float | None = None
    itl_p95: float | None = None
    queue_p95: float | None = None
    e2e_p99: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    #: cumulative seconds of finished requests (the e2e summary's `_sum`): its rate is the mean
    #: number of requests in the engine by Little's law, a count no sampling can miss
    e2e_seconds_total: float | None = None
    process_cpu_seconds_total: float | None = None
    gpus: list[str] = field(default_factory=list)
    #: the `vendor` labels of those GPUs ("nvidia" where a series has none)
    gpu_vendors: list[str] = field(default_factory=list)
    #: GPUs on the node that no attribution tied to an engine while several engines run: their
    #: ratios are not this engine's own, so they are not averaged in and the evidence says so
    unattributed_gpus: list[str] = field(default_factory=list)
    #: over those GPUs, the lowest and highest reading of each ratio (`sm_active`, ...): whichever
    #: GPUs the engine uses, its own readings lie in between, so a verdict that holds at both ends
    #: holds for it (stages.gpu_level)
    node_gpu_range: dict[str, tuple[float, float]] = field(default_factory=dict)
    sm_active: float | None = None
    dram_active: float | None = None
    tensor_active: float | None = None
    gpu_utilization: float | None = None
    rdma_utilization: float | None = None
    rdma_cnp_total: float | None = None
    rdma_retransmissions_total: float | None = None
    rdma_xmit_wait_total: float | None = None
    #: node-wide RDMA bytes received and sent (every port), for the hand-over's link check
    rdma_receive_bytes_total: float | None = None
    rdma_transmit_bytes_total: float | None = None
    #: the engine's serving settings from `llm_engine_config_info` (ENGINE_SETTINGS names), so
    #: advice can name a setting's value and skip what is already on
    settings: dict[str, str] = field(default_factory=dict)


#: the EngineInputs attributes that are numbers (or None): the columns History keeps
_NUMERIC = tuple(f.name for f in fields(EngineInputs) if f.type == "float | None")

_ENGINE_GAUGES = {
    "llm_engine_requests_running": "running",
    "llm_engine_requests_waiting": "waiting",
    "llm_engine_kv_cache_usage_ratio": "kv_usage",
    "llm_engine_preemptions_total": "preemptions_total",
    "llm_engine_prompt_tokens_total": "prompt_tokens_total",
    "llm_engine_generation_tokens_total": "generation_tokens_total",
    "llm_engine_process_cpu_seconds_total": "process_cpu_seconds_total",
}
_E2E_SUMMARY = "llm_engine_e2e_request_latency_seconds"
_ENGINE_QUANTILES = {
    ("llm_engine_time_to_first_token_seconds", 0.95): "ttft_p95",
    ("llm_engine_inter_token_latency_seconds", 0.95): "itl_p95",
    ("llm_engine_queue_time_seconds", 0.95): "queue_p95",
    (_E2E_SUMMARY, 0.99): "e2e_p99",
}
_GPU_RATIOS = {
    "llm_gpu_sm_active_ratio": "sm_active",
    "llm_gpu_dram_active_ratio": "dram_active",
    "llm_gpu_tensor_active_ratio": "tensor_active",
    "llm_gpu_utilization_ratio": "gpu_utilization",
}


def engine_key(labels: Labels) -> EngineKey:
    get = labels.get
    return (get("engine", ""), get("engine_type", ""), get("model", ""))


def gpu_owner(engine: str, owners: Container[str], single_engine: bool) -> str | None:
    """Whose GPU readings an engine reads, among `owners` (the `engine` label values GPUs carry,
    "" for none): its own where attribution tied GPUs to it; the node's unattributed GPUs where the
    node runs this one engine; otherwise none, so that no engine reads another's GPUs."""
    if engine in owners:
        return engine
    return "" if single_engine and "" in owners else None


def engine_inputs(metrics: Iterable[Metric]) -> dict[EngineKey, EngineInputs]:
    """Join engine, GPU, RDMA and host metrics into one EngineInputs per live engine.

    GPUs join their engine through the `engine` label set by attribution; where no GPU carries an
    engine label and the node runs one engine, the node's GPUs are that engine's. With several
    engines, unattributed GPUs are nobody's: averaging them into every engine would let one
    engine's busy GPUs decide another's stage, so each engine records only that they exist and the
    range of their readings (lowest, highest), which the stages use where the whole range agrees.
    RDMA ports are node-wide, so every engine on the node sees them.
    """
    engines: dict[EngineKey, EngineInputs] = {}
    gpu_values: dict[str, dict[str, list[float]]] = {}  # engine name ("" unattributed) → field → values
    gpu_ids: dict[str, set[str]] = {}
    gpu_vendors: dict[str, set[str]] = {}
    rdma: dict[str, list[float]] = {}
    up: set[EngineKey] = set()
    for metric in metrics:
        name = metric.name
        labels = metric.labels
        if isinstance(metric, QuantileSummary):
            for (family, q), attr in _ENGINE_QUANTILES.items():
                if family == name:
                    value = dict(metric.quantiles).get(q)
                    if value is not None and not math.isnan(value):
                        setattr(engines.setdefault(engine_key(labels), EngineInputs()), attr, value)
            if name == _E2E_SUMMARY and not math.isnan(metric.sum):
                engines.setdefault(engine_key(labels), EngineInputs()).e2e_seconds_total = metric.sum
            elif name in HAND_OVER_FAMILIES:
                absorb(engines.setdefault(engine_key(labels), EngineInputs()), metric)
            continue
        assert isinstance(metric, Sample)
        if name == "llm_engine_up":
            if metric.value == 1.0:
                up.add(engine_key(labels))
                engines.setdefault(engine_key(labels), EngineInputs()).labels = dict(labels)
        elif name == "llm_engine_config_info":
            engines.setdefault(engine_key(labels), EngineInputs()).settings = {
                k: labels[k] for k in ENGINE_SETTINGS if k in labels
            }
        elif name in _ENGINE_GAUGES:
            setattr(engines.setdefault(engine_key(labels), EngineInputs()), _ENGINE_GAUGES[name], metric.value)
        elif name in HAND_OVER_FAMILIES:
            absorb(engines.setdefault(engine_key(labels), EngineInputs()), metric)
        elif name in _GPU_RATIOS:
            owner = labels.get("engine", "")
            gpu_values.setdefault(owner, {}).setdefault(_GPU_RATIOS[name], []).append(metric.value)
            gpu_ids.setdefault(owner, set()).add(labels.get("gpu", "?"))
            gpu_vendors.setdefault(owner, set()).add(labels.get("vendor", "nvidia"))
        elif name in ("llm_rdma_port_transmit_utilization_ratio", "llm_rdma_port_receive_utilization_ratio"):
            rdma.setdefault("utilization", []).append(metric.value)
        elif name in ("llm_rdma_port_cnp_handled_total", "llm_rdma_port_cnp_sent_total"):
            rdma.setdefault("cnp", []).append(metric.value)
        elif name == "llm_rdma_port_retransmissions_total":
            rdma.setdefault("retransmissions", []).append(metric.value)
        elif name == "llm_rdma_port_transmit_wait_total":
            rdma.setdefault("xmit_wait", []).append(metric.value)
        elif name == "llm_rdma_port_receive_bytes_total":
            rdma.setdefault("receive_bytes", []).append(metric.value)
        elif name == "llm_rdma_port_transmit_bytes_total":
            rdma.setdefault("transmit_bytes", []).append(metric.value)
    live = {key: engines.get(key, EngineInputs()) for key in up}
    single_engine = len({key[0] for key in live}) == 1
    for key, inputs in live.items():
        whose = gpu_owner(key[0], gpu_values, single_engine)
        if whose is not None:
            inputs.gpus = sorted(gpu_ids[whose], key=lambda g: (len(g), g))
            inputs.gpu_vendors = sorted(gpu_vendors[whose])
            for attr, values in gpu_values[whose].items():
                setattr(inputs, attr, fmean(values))
        elif "" in gpu_ids:
            inputs.unattributed_gpus = sorted(gpu_ids[""], key=lambda g: (len(g), g))
            inputs.gpu_vendors = sorted(gpu_vendors[""])
            inputs.node_gpu_range = {attr: (min(values), max(values)) for attr, values in gpu_values[""].items()}
        if rdma.get("utilization"):
            inputs.rdma_utilization = max(rdma["utilization"])
        for attr, totals in (
            ("rdma_cnp_total", rdma.get("cnp")),
            ("rdma_retransmissions_total", rdma.get("retransmissions")),
            ("rdma_xmit_wait_total", rdma.get("xmit_wait")),
            ("rdma_receive_bytes_total", rdma.get("receive_bytes")),
            ("rdma_transmit_bytes_total", rdma.get("transmit_bytes")),
        ):
            if totals:
                setattr(inputs, attr, sum(totals))
    return live


#: the numeric attributes that are counters: their columns also keep a running increase
_COUNTERS = tuple(attr for attr in _NUMERIC if attr.endswith("_total"))


class History:
    """A bounded time series of EngineInputs for one engine, with the window helpers stages use.

    Each numeric attribute is also kept as its own column of (time, value) where it was present,
    in lists with a start offset (compacted now and then), so a window is a bisection and a slice
    in C, not a walk over every point reading each one's attribute (a deque cannot be sliced
    without walking to the slice). Counters keep a third column, the running increase
    (Prometheus-style across resets), so a rate is two lookups, not a turn per point. Each
    helper's answer is remembered until the next point is added: the stages ask ~40 questions per
    engine per collection, half of them repeats, over windows up to the baseline's length (issue
    #23's per-target budget). Points are only ever added through `add`.
    """

    def __init__(self, horizon_seconds: float, max_points: int = 2048) -> None:
        self.horizon_seconds = horizon_seconds
        self.points: deque[tuple[float, EngineInputs]] = deque(maxlen=max_points)
        self._times: dict[str, list[float]] = {attr: [] for attr in _NUMERIC}
        self._values: dict[str, list[float]] = {attr: [] for attr in _NUMERIC}
        #: per counter, the increase from its column's first entry to each entry
        self._increases: dict[str, list[float]] = {attr: [] for attr in _COUNTERS}
        #: per column, where its live entries start (the ones before are dropped, not yet removed)
        self._start: dict[str, int] = dict.fromkeys(_NUMERIC, 0)
        self._answers: dict[tuple[str, str, float], Any] = {}
        #: when a point last carried node-wide GPU ranges: an engine with GPUs of its own (or a
        #: node without GPUs) has none, and node_range need not walk its window to find that out
        self._node_ranges_seen = -math.inf
        #: the node's unattributed GPUs as last seen (a point whose GPU source missed the round
        #: has none, while the window's node-wide readings still count)
        self._unattributed: list[str] = []
        #: this engine's place in a disaggregated pair, worked out across engines each round by
        #: the diagnosis (exporter/diagnosis/pd.py); None for an engine of no pair
        self.pd: PdView | None = None

    def add(self, now: float, inputs: EngineInputs) -> None:
        self.points.append((now, inputs))
        if inputs.node_gpu_range:
            self._node_ranges_seen = now
        if inputs.unattributed_gpus:
            self._unattributed = inputs.unattributed_gpus
        while self.points and self.points[0][0] < now - self.horizon_seconds:
            self.points.popleft()
        oldest = self.points[0][0]  # what the horizon or max_points kept
        increases = self._increases
        for attr in _NUMERIC:
            times, values = self._times[attr], self._values[attr]
            value = getattr(inputs, attr)
            if value is not None:
                if attr in increases:
                    column = increases[attr]
                    if values:
                        before = values[-1]
                        column.append(column[-1] + (value - before if value >= before else value))
                    else:
                        column.append(0.0)
                times.append(now)
                values.append(value)
            start = self._start[attr]
            if start < len(times) and times[start] < oldest:
                start = bisect_left(times, oldest, start)
                if start > 64 and start > len(times) // 2:  # compact: drop what no window reaches
                    del times[:start], values[:start]
                    if attr in increases:
                        del increases[attr][:start]
                    start = 0
                self._start[attr] = start
        self._answers.clear()

    def latest(self) -> EngineInputs:
        return self.points[-1][1]

    def unattributed_gpus(self, seconds: float) -> list[str]:
        """The node's unattributed GPUs where any point of the last `seconds` read them: the
        window the stages' node-wide readings come from. The latest point alone would drop them
        (and the evidence saying so) for a round whose GPU source timed out on a busy host."""
        if self.points and self._node_ranges_seen >= self.points[-1][0] - seconds:
            return self._unattributed
        return []

    def _first(self, attr: str, seconds: float) -> int:
        """The index of the first entry of `attr`'s column within the last `seconds`."""
        return bisect_left(self._times[attr], self.points[-1][0] - seconds, self._start[attr])

    def values(self, attr: str, seconds: float) -> list[float]:
        key = ("values", attr, seconds)
        answers = self._answers
        if key in answers:
            return answers[key]
        found = self._values[attr][self._first(attr, seconds) :] if self.points else []
        answers[key] = found
        return found

    def mean(self, attr: str, seconds: float) -> float | None:
        key = ("mean", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = fmean(values) if values else None
        return answers[key]

    def maximum(self, attr: str, seconds: float) -> float | None:
        key = ("maximum", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = max(values) if values else None
        return answers[key]

    def minimum(self, attr: str, seconds: float) -> float | None:
        key = ("minimum", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            answers[key] = min(values) if values else None
        return answers[key]

    def node_range(self, attr: str, seconds: float) -> tuple[float, float] | None:
        """(mean of the lowest, mean of the highest) node-wide reading of GPU ratio `attr` over the
        last `seconds`: no unattributed GPU's own mean lies outside it. Remembered for the round
        like the other answers: every stage asks it of every engine."""
        key = ("node_range", attr, seconds)
        if key in self._answers:
            return self._answers[key]
        found: tuple[float, float] | None = None
        if self.points and self._node_ranges_seen >= self.points[-1][0] - seconds:
            start = self.points[-1][0] - seconds
            lows: list[float] = []
            highs: list[float] = []
            for t, point in reversed(self.points):
                if t < start:
                    break
                bounds = point.node_gpu_range.get(attr)
                if bounds is not None:
                    lows.append(bounds[0])
                    highs.append(bounds[1])
            found = (fmean(lows), fmean(highs)) if lows else None
        self._answers[key] = found
        return found

    def rate(self, attr: str, seconds: float) -> float | None:
        """Per-second increase of a counter over the last `seconds`, Prometheus-style on resets."""
        key = ("rate", attr, seconds)
        answers = self._answers
        if key in answers:
            return answers[key]
        found: float | None = None
        if self.points:
            times = self._times[attr]
            first, last = self._first(attr, seconds), len(times) - 1
            if last - first >= 1 and times[last] > times[first]:
                if attr in self._increases:
                    increases = self._increases[attr]
                    increase = increases[last] - increases[first]
                else:  # not a counter by its name: walked, as any series would be
                    values = self._values[attr]
                    increase = 0.0
                    for before, after in zip(values[first:last], values[first + 1 : last + 1]):
                        increase += after - before if after >= before else after
                found = increase / (times[last] - times[first])
        answers[key] = found
        return found

    def trend(self, attr: str, seconds: float) -> float | None:
        """Mean of the newest third minus mean of the oldest third of the window."""
        key = ("trend", attr, seconds)
        answers = self._answers
        if key not in answers:
            values = self.values(attr, seconds)
            if len(values) < 3:
                answers[key] = None
            else:
                third = max(1, len(values) // 3)
                answers[key] = fmean(values[-third:]) - fmean(values[:third])
        return answers[key]


def capacity_waiting(inputs: EngineInputs) -> None:
    """A decode worker's waiting requests less those parked for their KV: a request whose KV is on
    its way waits for the transfer, not for a slot, and is not idle capacity either."""
    if inputs.role == "decode" and inputs.waiting is not None and inputs.kv_pending_receiver:
        inputs.waiting = max(0.0, inputs.waiting - inputs.kv_pending_receiver)
