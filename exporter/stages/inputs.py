"""Per-engine inputs of the diagnosis, read from normalized metrics only.

The diagnosis never sees an engine's own metric names: it reads the `llm_*` families, so a new
engine or GPU source works with it unchanged. One collection's metrics become one EngineInputs per
live engine here; exporter/stages/signals.py keeps them over time (History).
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from statistics import fmean

from exporter.catalogue import ENGINE_SETTINGS
from exporter.model import Histogram, Labels, Metric, QuantileSummary, Sample
from exporter.stages.labelled import LABELLED_ENGINE_FAMILIES, labelled_engine_input
from exporter.stages.pd_inputs import HAND_OVER_FAMILIES, HandOverInputs, absorb

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
    #: requests finished (the e2e summary's `_count`)
    requests_finished_total: float | None = None
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
    #: node-wide seconds in which a runnable task waited for a CPU (PSI): its rate is the share of
    #: time the node's CPUs were contended, whoever's tasks they were
    host_cpu_waiting_seconds_total: float | None = None
    #: the engine's serving settings from `llm_engine_config_info` (ENGINE_SETTINGS names), so
    #: advice can name a setting's value and skip what is already on
    settings: dict[str, str] = field(default_factory=dict)
    #: requests refused at the door (all reasons), and the reasons seen refusing
    admission_rejections_total: float | None = None
    rejection_reasons: list[str] = field(default_factory=list)
    requests_waiting_deferred: float | None = None
    prefill_p95: float | None = None
    #: the engine's own estimate of its work per GPU (the MFU counters): FLOPs, and bytes read and
    #: written together
    estimated_flops_total: float | None = None
    estimated_memory_bytes_total: float | None = None
    spec_decode_acceptance: float | None = None
    tokens_per_step: float | None = None
    #: usage of each KV pool of a hybrid model (pool → 0-1)
    kv_pools: dict[str, float] = field(default_factory=dict)
    #: the ranks of a multi-rank engine that stopped reporting (llm_engine_rank_up 0)
    ranks_not_reporting: list[str] = field(default_factory=list)
    #: the GPU model names of the engine's GPUs (for their peak FLOP/s and bandwidth)
    gpu_models: list[str] = field(default_factory=list)
    #: the llm_engine_* families this engine's scrape carried (what the verdict did see)
    families: set[str] = field(default_factory=set)
    #: the engine's cumulative latency histograms behind `ttft_p95`, `itl_p95`, ... (keyed by
    #: those names), where its source passes them on: History.level reads a quantile over the
    #: stages' own window from their increase
    histograms: dict[str, Histogram] = field(default_factory=dict)


_ENGINE_GAUGES = {
    "llm_engine_requests_running": "running",
    "llm_engine_requests_waiting": "waiting",
    "llm_engine_kv_cache_usage_ratio": "kv_usage",
    "llm_engine_preemptions_total": "preemptions_total",
    "llm_engine_prompt_tokens_total": "prompt_tokens_total",
    "llm_engine_generation_tokens_total": "generation_tokens_total",
    "llm_engine_process_cpu_seconds_total": "process_cpu_seconds_total",
}
_ENGINE_GAUGES.update(
    {
        "llm_engine_requests_waiting_deferred": "requests_waiting_deferred",
        "llm_engine_estimated_flops_total": "estimated_flops_total",
        "llm_engine_spec_decode_acceptance_ratio": "spec_decode_acceptance",
        "llm_engine_tokens_per_step": "tokens_per_step",
    }
)
_E2E_SUMMARY = "llm_engine_e2e_request_latency_seconds"
_ENGINE_QUANTILES = {
    ("llm_engine_time_to_first_token_seconds", 0.95): "ttft_p95",
    ("llm_engine_inter_token_latency_seconds", 0.95): "itl_p95",
    ("llm_engine_queue_time_seconds", 0.95): "queue_p95",
    (_E2E_SUMMARY, 0.99): "e2e_p99",
    ("llm_engine_request_prefill_time_seconds", 0.95): "prefill_p95",
}
#: each quantile attribute's quantile
QUANTILE_OF = {attr: q for (_, q), attr in _ENGINE_QUANTILES.items()}
#: per summary family, its (quantile, attribute) pairs
_QUANTILES_OF_FAMILY = {
    family: [(q, attr) for (other, q), attr in _ENGINE_QUANTILES.items() if other == family]
    for family, _ in _ENGINE_QUANTILES
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
    RDMA ports and the host's CPU wait are node-wide, so every engine on the node sees them.
    """
    engines: dict[EngineKey, EngineInputs] = {}
    gpu_values: dict[str, dict[str, list[float]]] = {}  # engine name ("" unattributed) → field → values
    gpu_ids: dict[str, set[str]] = {}
    gpu_vendors: dict[str, set[str]] = {}
    gpu_models: dict[str, set[str]] = {}
    rdma: dict[str, list[float]] = {}
    cpu_waiting: float | None = None
    up: set[EngineKey] = set()

    def of(labels: Labels) -> EngineInputs:
        """The inputs of the engine whose series these are (made once, not per series read)."""
        key = engine_key(labels)
        inputs = engines.get(key)
        if inputs is None:
            inputs = engines[key] = EngineInputs()
        return inputs

    for metric in metrics:
        name = metric.name
        labels = metric.labels
        if name.startswith("llm_engine_") and "engine" in labels:
            of(labels).families.add(name)
        if isinstance(metric, QuantileSummary):
            for q, attr in _QUANTILES_OF_FAMILY.get(name, ()):
                value = dict(metric.quantiles).get(q)
                inputs = of(labels)
                if value is not None and not math.isnan(value):
                    setattr(inputs, attr, value)
                if metric.histogram is not None:
                    inputs.histograms[attr] = metric.histogram
            if name == _E2E_SUMMARY and not math.isnan(metric.sum):
                of(labels).e2e_seconds_total = metric.sum
            if name == _E2E_SUMMARY:
                of(labels).requests_finished_total = metric.count
            elif name in HAND_OVER_FAMILIES:
                absorb(of(labels), metric)
            continue
        assert isinstance(metric, Sample)
        if name == "llm_engine_up":
            if metric.value == 1.0:
                up.add(engine_key(labels))
                of(labels).labels = dict(labels)
        elif name == "llm_engine_config_info":
            of(labels).settings = {k: labels[k] for k in ENGINE_SETTINGS if k in labels}
        elif name in _ENGINE_GAUGES:
            setattr(of(labels), _ENGINE_GAUGES[name], metric.value)
        elif name in LABELLED_ENGINE_FAMILIES:
            labelled_engine_input(of(labels), metric)
        elif name in HAND_OVER_FAMILIES:
            absorb(of(labels), metric)
        elif name in _GPU_RATIOS:
            owner = labels.get("engine", "")
            gpu_values.setdefault(owner, {}).setdefault(_GPU_RATIOS[name], []).append(metric.value)
            gpu_ids.setdefault(owner, set()).add(labels.get("gpu", "?"))
            gpu_vendors.setdefault(owner, set()).add(labels.get("vendor", "nvidia"))
            if labels.get("gpu_model"):
                gpu_models.setdefault(owner, set()).add(labels["gpu_model"])
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
        elif name == "llm_host_cpu_waiting_seconds_total":
            cpu_waiting = metric.value
    live = {key: engines.get(key, EngineInputs()) for key in up}
    single_engine = len({key[0] for key in live}) == 1
    for key, inputs in live.items():
        whose = gpu_owner(key[0], gpu_values, single_engine)
        if whose is not None:
            inputs.gpus = sorted(gpu_ids[whose], key=lambda g: (len(g), g))
            inputs.gpu_vendors = sorted(gpu_vendors[whose])
            inputs.gpu_models = sorted(gpu_models.get(whose, ()))
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
        inputs.host_cpu_waiting_seconds_total = cpu_waiting
        capacity_waiting(inputs)
    return live


def capacity_waiting(inputs: EngineInputs) -> None:
    """A decode worker's waiting requests less those parked for their KV: a request whose KV is on
    its way waits for the transfer, not for a slot, and is not idle capacity either. The parked
    ones are the receiver's pending transfers, which on vLLM without its fetch-by-stage gauge are
    its `deferred` waiting (exporter/sources/engine_pd.py)."""
    if inputs.role == "decode" and inputs.waiting is not None and inputs.kv_pending_receiver:
        inputs.waiting = max(0.0, inputs.waiting - inputs.kv_pending_receiver)
