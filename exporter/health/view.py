"""The node as the health checks read it: one round's normalized samples, grouped by device, with
the counter increases over the windows the published thresholds are stated in.

Only `llm_*` families are read, so the checks work the same whichever source filled them (NVML or
dcgm-exporter for a GPU, sysfs for a NIC).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from exporter.health.history import CounterHistory
from exporter.model import Labels, Metric, QuantileSummary, Sample


@dataclass
class Bounds:
    """A PCIe link's generation and width by bound: current, max (device and slot), device_max."""

    generation: dict[str, float] = field(default_factory=dict)
    width: dict[str, float] = field(default_factory=dict)


@dataclass
class GpuFacts:
    labels: dict[str, str]
    pcie: Bounds = field(default_factory=Bounds)
    #: the busiest of SM active and utilization: a GPU that is idle trains its link down by design
    busy: float | None = None
    nvlink_links: dict[str, float] = field(default_factory=dict)
    fabric_degraded: float | None = None

    @property
    def name(self) -> str:
        return f"GPU {self.labels.get('gpu', '?')}"


@dataclass
class PortFacts:
    device: str
    port: str
    up: bool | None = None
    physical_state: float | None = None
    rate_bytes_per_second: float | None = None
    link_layer: str = ""
    netdev: str = ""
    ecn: dict[tuple[str, str], bool] = field(default_factory=dict)
    trust: str = ""
    utilization: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass
class EngineFacts:
    """One engine's facts the startup and host checks read (by engine name: all its models)."""

    name: str
    labels: dict[str, str]
    up: bool = False
    asleep: bool = False
    start_time: float | None = None
    startup_seconds: dict[str, float] = field(default_factory=dict)
    served_total: float | None = None


def _key(name: str, labels: Labels, *drop: str) -> tuple:
    return (name, *sorted((k, v) for k, v in labels.items() if k not in drop))


@dataclass
class NodeView:
    """One round of the node, grouped; `counters` keeps every counter the checks take increases of."""

    now: float
    counters: CounterHistory
    gpus: dict[str, GpuFacts] = field(default_factory=dict)
    nics: dict[str, Bounds] = field(default_factory=lambda: defaultdict(Bounds))
    ports: dict[tuple[str, str], PortFacts] = field(default_factory=dict)
    engines: dict[str, EngineFacts] = field(default_factory=dict)
    #: counter keys seen this round, by family (for the checks to iterate)
    counter_keys: dict[str, list[tuple[tuple, Labels]]] = field(default_factory=lambda: defaultdict(list))
    gauges: dict[str, list[tuple[Labels, float]]] = field(default_factory=lambda: defaultdict(list))

    def port(self, labels: Labels) -> PortFacts:
        key = (labels.get("device", ""), labels.get("port", ""))
        if key not in self.ports:
            self.ports[key] = PortFacts(*key)
        return self.ports[key]

    def gpu(self, labels: Labels) -> GpuFacts:
        key = labels.get("uuid") or labels.get("gpu", "")
        if key not in self.gpus:
            own = {k: v for k, v in labels.items() if k not in ("bound", "state", "kind")}
            self.gpus[key] = GpuFacts(own)
        return self.gpus[key]

    def engine(self, labels: Labels) -> EngineFacts:
        name = labels.get("engine", "")
        if name not in self.engines:
            self.engines[name] = EngineFacts(name, {k: labels[k] for k in ("engine", "engine_type") if k in labels})
        return self.engines[name]

    def increase(self, family: str, labels: Labels, seconds: float) -> float | None:
        return self.counters.increase(_key(family, labels), seconds)

    def span(self, family: str, labels: Labels, seconds: float) -> float:
        return self.counters.span(_key(family, labels), seconds)


_GPU_BUSY = ("llm_gpu_sm_active_ratio", "llm_gpu_utilization_ratio")


def build_view(metrics: Iterable[Metric], now: float, counters: CounterHistory) -> NodeView:
    """Group one round's samples; every counter a check reads is observed into `counters` (those
    not seen for a horizon are forgotten: a device that went away takes its history with it)."""
    view = NodeView(now, counters)
    seen: set[tuple] = set()
    for metric in metrics:
        name, labels = metric.name, metric.labels
        if isinstance(metric, QuantileSummary):
            if not math.isnan(metric.sum):
                for part, value in (("_sum", metric.sum), ("_count", metric.count)):
                    _observe(view, seen, name + part, labels, value)
            continue
        assert isinstance(metric, Sample)
        value = metric.value
        if name.endswith("_total"):
            _observe(view, seen, name, labels, value)
        _group(view, name, labels, value)
    counters.forget_unseen(seen, now)
    return view


def _observe(view: NodeView, seen: set[tuple], name: str, labels: Labels, value: float) -> None:
    if not view.counters.wants(name):
        return
    key = _key(name, labels)
    seen.add(key)
    view.counters.observe(key, view.now, value)
    view.counter_keys[name].append((key, labels))


def _group(view: NodeView, name: str, labels: Labels, value: float) -> None:
    if name.startswith("llm_gpu_"):
        _gpu(view, name, labels, value)
    elif name.startswith("llm_rdma_device_pcie_link_"):
        bounds = view.nics[labels.get("device", "")]
        target = bounds.generation if name.endswith("generation") else bounds.width
        target[labels.get("bound", "")] = value
    elif name.startswith("llm_rdma_port_"):
        _port(view.port(labels), name, labels, value)
    elif name.startswith("llm_engine_"):
        _engine(view, name, labels, value)
    else:
        view.gauges[name].append((labels, value))


def _gpu(view: NodeView, name: str, labels: Labels, value: float) -> None:
    if name in _GPU_BUSY:
        gpu = view.gpu(labels)
        gpu.busy = value if gpu.busy is None else max(gpu.busy, value)
    elif name == "llm_gpu_pcie_link_generation":
        view.gpu(labels).pcie.generation[labels.get("bound", "")] = value
    elif name == "llm_gpu_pcie_link_width":
        view.gpu(labels).pcie.width[labels.get("bound", "")] = value
    elif name == "llm_gpu_nvlink_links":
        view.gpu(labels).nvlink_links[labels.get("state", "")] = value
    elif name == "llm_gpu_fabric_degraded_bandwidth":
        view.gpu(labels).fabric_degraded = value
    elif name == "llm_gpu_up":
        view.gpu(labels)


def _port(port: PortFacts, name: str, labels: Labels, value: float) -> None:
    if name == "llm_rdma_port_up":
        port.up = value == 1.0
    elif name == "llm_rdma_port_physical_state":
        port.physical_state = value
    elif name == "llm_rdma_port_link_rate_bytes_per_second":
        port.rate_bytes_per_second = value
    elif name == "llm_rdma_port_info":
        port.link_layer, port.netdev = labels.get("link_layer", ""), labels.get("netdev", "")
    elif name == "llm_rdma_port_ecn_enabled":
        port.netdev = labels.get("netdev", port.netdev)
        port.ecn[(labels.get("point", ""), labels.get("priority", ""))] = value == 1.0
    elif name == "llm_rdma_port_qos_info":
        port.trust = labels.get("trust", "")
    elif name.endswith("_utilization_ratio"):
        port.utilization = max(port.utilization, value)


def _engine(view: NodeView, name: str, labels: Labels, value: float) -> None:
    if name == "llm_engine_up":
        engine = view.engine(labels)
        engine.up = engine.up or value == 1.0
        engine.labels.setdefault("model", labels.get("model", ""))
    elif name == "llm_engine_asleep":
        view.engine(labels).asleep |= value == 1.0
    elif name == "llm_engine_process_start_time_seconds":
        view.engine(labels).start_time = value
    elif name == "llm_engine_startup_seconds":
        view.engine(labels).startup_seconds[labels.get("phase", "")] = value
    elif name == "llm_engine_generation_tokens_total":
        engine = view.engine(labels)
        engine.served_total = (engine.served_total or 0.0) + value
    else:
        view.gauges[name].append((labels, value))
