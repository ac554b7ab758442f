"""The `nodes:` key of a scenario: how many nodes, how the router shares load over them, and events.

A cluster scenario runs the scenario's node `count` times in one process, each node with its own
engines, GPUs, RDMA tree and address (exporter/simulate/cluster.py). The workload's
`rate_per_second` is per node on average; `load_weights` skew the router's share (node i receives
`count * w_i / sum(w)` of the mean, as a router with sticky sessions or a misweighted pool does),
and a node that is down receives nothing, its share spread over the others by their weights.
Events change one node for a while:

- `thermal_throttle`: the node's GPUs run at `clock_fraction` of their clocks (SM and memory: HBM
  throttles with the die), hotter by `heat_celsius`; its steps take longer, so does every token;
- `link_congestion`: one RDMA port (`port`, an index into the node's NICs) carries another job's
  `background_utilization` with `ecn_mark_fraction` of its packets marked; a tensor-parallel group
  across nodes runs at the pace of its slowest link;
- `node_down`: the node stops answering (engines and GPU endpoint answer 503) from `start_seconds`
  to `end_seconds`; it then comes back with fresh engine processes (counters reset, empty caches)
  that load for `restart_seconds` before they serve and the router sends them traffic again.

Validation is the shared layer's (`exporter.validation`); every error names its key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from exporter import validation as v
from exporter.validation import ConfigError

CLUSTER_KEYS = ("count", "load_weights", "events", "expect")
#: what the cluster rules should find: the alert (or recovery) a scenario is built to show
CLUSTER_FINDINGS = ("none", "load_imbalance", "straggler", "congested_link", "node_recovery")
EVENT_KINDS = ("thermal_throttle", "link_congestion", "node_down")
EVENT_KEYS = (
    "node",
    "kind",
    "start_seconds",
    "end_seconds",
    "clock_fraction",
    "heat_celsius",
    "port",
    "background_utilization",
    "ecn_mark_fraction",
    "restart_seconds",
)
MAX_NODES = 256


@dataclass(frozen=True)
class NodeEvent:
    node: int
    kind: str
    start_seconds: float = 0.0
    end_seconds: float = math.inf
    clock_fraction: float = 1.0
    heat_celsius: float = 0.0
    port: int = 0
    background_utilization: float = 0.0
    ecn_mark_fraction: float = 0.0
    restart_seconds: float = 0.0

    def active(self, t: float) -> bool:
        return self.start_seconds <= t < self.end_seconds

    @property
    def ready_seconds(self) -> float:
        """When a returned node's engines serve again (node_down only)."""
        return self.end_seconds + self.restart_seconds


@dataclass(frozen=True)
class ClusterSpec:
    count: int
    load_weights: tuple[float, ...]
    events: tuple[NodeEvent, ...] = ()
    expect: str = "none"

    def events_of(self, node: int) -> tuple[NodeEvent, ...]:
        return tuple(e for e in self.events if e.node == node)

    def serving(self, node: int, t: float) -> bool:
        """The node's engines serve (and the router sends them traffic) at `t`."""
        return not any(e.kind == "node_down" and e.start_seconds <= t < e.ready_seconds for e in self.events_of(node))

    def load_share(self, node: int, t: float) -> float:
        """The node's arrival rate as a multiple of the per-node mean rate."""
        if not self.serving(node, t):
            return 0.0
        up = [w for i, w in enumerate(self.load_weights) if self.serving(i, t)]
        return len(self.load_weights) * self.load_weights[node] / sum(up) if sum(up) > 0 else 0.0

    def boundaries(self) -> tuple[float, ...]:
        """Times where some node's share changes (a node goes down or serves again)."""
        times = set()
        for e in self.events:
            if e.kind == "node_down":
                times.add(e.start_seconds)
                if math.isfinite(e.ready_seconds):
                    times.add(e.ready_seconds)
        return tuple(sorted(times))


def parse_cluster(value: object, nics: int) -> ClusterSpec:
    data = v.section(value, "nodes", CLUSTER_KEYS)
    count = v.positive_int(v.required(data.get("count"), "nodes.count"), "nodes.count")
    if count > MAX_NODES:
        raise ConfigError("nodes.count", f"at most {MAX_NODES} nodes in one process, not {count}")
    weights = tuple(
        v.non_negative(w, f"nodes.load_weights[{i}]")
        for i, w in enumerate(v.sequence(data.get("load_weights", [1.0] * count), "nodes.load_weights"))
    )
    if len(weights) != count:
        raise ConfigError("nodes.load_weights", f"needs one weight per node ({count}), got {len(weights)}")
    if not any(weights):
        raise ConfigError("nodes.load_weights", "at least one node needs a weight above 0")
    events = tuple(
        _event(item, f"nodes.events[{i}]", count, nics)
        for i, item in enumerate(v.sequence(data.get("events", []), "nodes.events"))
    )
    expect = v.choice(data.get("expect", "none"), "nodes.expect", CLUSTER_FINDINGS)
    return ClusterSpec(count, weights, events, expect)


def _event(value: object, where: str, count: int, nics: int) -> NodeEvent:
    data = v.section(value, where, EVENT_KEYS)
    node = v.integer(v.required(data.get("node"), f"{where}.node"), f"{where}.node", minimum=0)
    if node >= count:
        raise ConfigError(f"{where}.node", f"node {node} is not one of the {count} nodes (0-{count - 1})")
    kind = v.choice(v.required(data.get("kind"), f"{where}.kind"), f"{where}.kind", EVENT_KINDS)
    start = v.non_negative(data.get("start_seconds", 0.0), f"{where}.start_seconds")
    end = (
        math.inf if data.get("end_seconds") is None else v.positive_number(data["end_seconds"], f"{where}.end_seconds")
    )
    if end <= start:
        raise ConfigError(f"{where}.end_seconds", f"must be after start_seconds ({start:g})")
    port = v.integer(data.get("port", 0), f"{where}.port", minimum=0)
    if kind == "link_congestion" and port >= nics:
        raise ConfigError(f"{where}.port", f"the node has {nics} RDMA ports (0-{nics - 1})")
    if kind == "node_down" and not math.isfinite(end) and "restart_seconds" in data:
        raise ConfigError(f"{where}.restart_seconds", "a node that never returns does not restart")
    return NodeEvent(
        node=node,
        kind=kind,
        start_seconds=start,
        end_seconds=end,
        clock_fraction=v.positive_number(data.get("clock_fraction", 1.0), f"{where}.clock_fraction", 1.0),
        heat_celsius=v.non_negative(data.get("heat_celsius", 0.0), f"{where}.heat_celsius", 60.0),
        port=port,
        background_utilization=v.non_negative(
            data.get("background_utilization", 0.0), f"{where}.background_utilization", 0.95
        ),
        ecn_mark_fraction=v.non_negative(data.get("ecn_mark_fraction", 0.0), f"{where}.ecn_mark_fraction", 1.0),
        restart_seconds=v.non_negative(data.get("restart_seconds", 0.0), f"{where}.restart_seconds", 3600.0),
    )
