"""A simulated cluster: a scenario's node N times in one process, each with its own address.

Each node is a `ClusterNode` — its own engines, GPUs, RDMA ports and seed — served by its own
`SimulationServer` on its own loopback port, with its own sysfs tree (`DIR/<hostname>`), so one
exporter per node reads it exactly as it reads a single simulated node. The nodes share nothing
but the scenario's clock and the router's shares (`ClusterSpec.load_share`, a function of time
alone), so each advances on its own. The cluster's JSON index (`ClusterServer`, on the
`--listen` address) lists every node with its engine URLs, GPU URL and sysfs directory.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import Any

from exporter.simulate.cluster_spec import ClusterSpec, NodeEvent
from exporter.simulate.network import NetworkCondition
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import Scenario, replace_node
from exporter.simulate.server import IndexedServer, SimulationServer, index_head
from exporter.simulate.workload import WorkloadSpec

# A throttled die: how much hotter its GPUs read when an event gives no `heat_celsius`.
DEFAULT_THROTTLE_HEAT_CELSIUS = 20.0


def node_hostnames(scenario: Scenario) -> list[str]:
    """`sim-node-0` … for the default hostname; else the scenario's hostname with `-<i>` appended."""
    spec = scenario.cluster
    count = spec.count if spec else 1
    base = scenario.node.hostname
    if count == 1:
        return [base]
    stem = base[: -len("-0")] if base.endswith("-0") else base
    return [f"{stem}-{i}" for i in range(count)]


class ClusterNode(SimulatedNode):
    """One node of a cluster: its share of the load, its throttling, congestion and outages."""

    def __init__(self, scenario: Scenario, cluster: ClusterSpec, index: int, seed: int | None = None) -> None:
        self.cluster = cluster
        self.node_index = index
        self.events = cluster.events_of(index)
        self._throttled: NodeEvent | None = None
        self._restarted: set[int] = set()
        super().__init__(scenario, seed)
        boundaries = {*self._arrivals.boundaries, *cluster.boundaries()}
        self._arrivals.boundaries = tuple(sorted(boundaries))
        self._base_clock = scenario.node.gpu.sm_clock_mhz
        self._apply_events()

    @property
    def hostname(self) -> str:
        return self.scenario.node.hostname

    def advance(self, until: float) -> None:
        # Step to each event boundary so that a change applies at its time, not a chunk late.
        for t in sorted({e for ev in self.events for e in (ev.start_seconds, ev.end_seconds) if self.now < e < until}):
            super().advance(t)
            self._apply_events()
        super().advance(until)
        self._apply_events()

    def _workload_at(self, t: float) -> WorkloadSpec:
        spec = super()._workload_at(t)
        share = self.cluster.load_share(self.node_index, t)
        return replace(spec, rate_per_second=spec.rate_per_second * share, clients=round(spec.clients * share))

    def down(self, t: float | None = None) -> bool:
        at = self.now if t is None else t
        return any(e.kind == "node_down" and e.active(at) for e in self.events)

    def unavailable(self, endpoint: str) -> str | None:
        if self.down():
            return f"node {self.hostname} is down"
        if endpoint == "engine" and not self.cluster.serving(self.node_index, self.now):
            return f"engine on {self.hostname} is loading its model after a restart"
        return None

    def _apply_events(self) -> None:
        now = self.now
        throttle = next((e for e in self.events if e.kind == "thermal_throttle" and e.active(now)), None)
        if throttle is not self._throttled:
            self._throttle(throttle)
        for port in self.ports:
            port.override = None
        for event in self.events:
            if event.kind == "link_congestion" and event.active(now):
                self.ports[event.port].override = NetworkCondition(
                    event.background_utilization, event.ecn_mark_fraction
                )
        for number, event in enumerate(self.events):
            # Back from an outage: fresh engine processes (counters from zero, empty caches).
            if event.kind == "node_down" and now >= event.end_seconds and number not in self._restarted:
                self._restarted.add(number)
                self.build_replicas()
                self._apply_phase(self.phase)
                if self._throttled is not None:
                    self._scale_efficiency(self._throttled.clock_fraction)

    def _throttle(self, event: NodeEvent | None) -> None:
        if self._throttled is not None:
            self._scale_efficiency(1.0 / self._throttled.clock_fraction)
        self._throttled = event
        fraction = event.clock_fraction if event else 1.0
        heat = (event.heat_celsius or DEFAULT_THROTTLE_HEAT_CELSIUS) if event else 0.0
        for gpu in self.gpus:
            gpu.spec = replace(gpu.spec, sm_clock_mhz=round(self._base_clock * fraction))
            gpu.heat_celsius = heat
        if event is not None:
            self._scale_efficiency(fraction)

    def _scale_efficiency(self, factor: float) -> None:
        """Slower clocks: the same work at a fraction of the achieved FLOP/s and HBM bandwidth."""
        for replica in self.replicas:
            config = replica.config
            replica.reconfigure(mfu=min(1.0, config.mfu * factor), mbu=min(1.0, config.mbu * factor))


class SimulatedCluster:
    """The cluster's nodes, advanced together (offline) or each by its own server (real time)."""

    def __init__(self, scenario: Scenario, seed: int | None = None) -> None:
        spec = scenario.cluster or ClusterSpec(1, (1.0,))
        self.scenario = scenario
        base_seed = scenario.seed if seed is None else seed
        self.nodes = [
            ClusterNode(replace_node(scenario, hostname=hostname), spec, i, base_seed + 7919 * i)
            for i, hostname in enumerate(node_hostnames(scenario))
        ]

    @property
    def now(self) -> float:
        return self.nodes[0].now

    @property
    def expect(self) -> str:
        return self.scenario.cluster.expect if self.scenario.cluster else "none"

    def advance(self, until: float) -> None:
        for node in self.nodes:
            node.advance(until)


class ClusterServer(IndexedServer):
    """One `SimulationServer` per node (own port, own sysfs tree) and the cluster's JSON index."""

    def __init__(
        self,
        cluster: SimulatedCluster,
        host: str = "127.0.0.1",
        port: int = 0,
        sysfs_out: str | None = None,
        realtime: bool = True,
    ) -> None:
        self.cluster = cluster
        self.nodes = [
            SimulationServer(
                node, host, 0, os.path.join(sysfs_out, node.hostname) if sysfs_out else None, realtime=realtime
            )
            for node in cluster.nodes
        ]
        super().__init__(host, port)
        self._thread: threading.Thread | None = None

    def write_sysfs(self) -> None:
        for server in self.nodes:
            server.write_sysfs()

    def start(self) -> ClusterServer:
        for server in self.nodes:
            server.start()
        self._thread = threading.Thread(target=self._http.serve_forever, name="sim-cluster-index", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for a serve_forever that never ran otherwise
            self._http.shutdown()
        self._http.server_close()
        for server in self.nodes:
            server.stop()

    def index(self) -> dict[str, Any]:
        first = self.cluster.nodes[0]
        return {
            **index_head(self.cluster.scenario, first.now, first.phase),
            "nodes": [server.node_entry() for server in self.nodes],
        }
