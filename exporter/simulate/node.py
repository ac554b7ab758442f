"""One simulated node: its GPUs and RDMA NICs, the engine replicas on them, the router, the phases.

Time is simulated seconds from the scenario's start. `advance(t)` moves everything to `t` in
short chunks: arrivals up to the chunk's end are routed first, then each replica runs its steps,
then the NICs carry their background traffic and the GPUs record a sample every second (the
windows that DCGM-style ratios are averaged over).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass, replace
from functools import partial

from exporter.simulate.closedloop import ClosedPopulation
from exporter.simulate.engine import EngineReplica
from exporter.simulate.gpu import HISTORY_SECONDS, GpuDevice
from exporter.simulate.network import NetworkCondition, RdmaPort
from exporter.simulate.pd_node import PdRouter
from exporter.simulate.restarts import ReplicaRestart
from exporter.simulate.roofline import LinkState, Parallelism
from exporter.simulate.scenario import Phase, Scenario
from exporter.simulate.workload import ArrivalProcess, Request, WorkloadSpec

CHUNK_SECONDS = 0.25
#: how long the engines had been serving when the scenario begins: a scenario is their steady
#: state, not their start, so the exporter must not read them as warming up (health.warmup_seconds)
ENGINE_UPTIME_SECONDS = 3600.0
SAMPLE_SECONDS = 1.0


@dataclass(frozen=True)
class ReplicaPlacement:
    index: int
    group: int  # index into scenario.replicas
    gpus: tuple[int, ...]


class SimulatedNode:
    def __init__(self, scenario: Scenario, seed: int | None = None, record_requests: bool = False) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        rng = random.Random(self.seed)
        node = scenario.node
        self.gpus = [GpuDevice(i, node.gpu, rng) for i in range(node.gpus)]
        self.ports = [RdmaPort(f"{node.nic_device_prefix}{i}", node.nic) for i in range(node.nics)]
        for fault in node.nic_faults:  # a port at another rate carries its traffic at that rate
            port = self.ports[fault.nic]
            port.spec = replace(port.spec, rate_gbps=fault.rate_gbps or port.spec.rate_gbps)
            port.pcie_width, port.ecn_enabled = fault.pcie_width, fault.ecn
        self.now = 0.0
        self.phase = scenario.phases[0]
        self.placements: list[ReplicaPlacement] = []
        self.replicas: list[EngineReplica] = []
        self._record_requests = record_requests
        #: replica index -> the simulated time its model has loaded by, after a restart
        self.loading_until: dict[int, float] = {}
        boundaries = tuple(p.start_seconds for p in scenario.phases[1:])
        arrivals_rng = random.Random(rng.getrandbits(64))
        self._arrivals: ArrivalProcess | ClosedPopulation = (
            ClosedPopulation(self._workload_at, boundaries, arrivals_rng)
            if scenario.phases[0].workload.arrival == "closed"
            else ArrivalProcess(self._workload_at, boundaries, arrivals_rng)
        )
        #: the P/D proxy of a disaggregated scenario (pd_node.py), None for monolithic replicas
        self.pd = PdRouter(self) if scenario.disaggregation else None
        self.build_replicas(started_at=-ENGINE_UPTIME_SECONDS)
        self._router_rng = random.Random(rng.getrandbits(64))
        self._round_robin = itertools.cycle(range(len(self.replicas)))
        self.nic_history: list[deque[tuple[float, float]]] = [deque() for _ in self.ports]
        self._next_sample = 0.0
        self._apply_phase(self.phase)
        self._sample()

    def build_replicas(self, started_at: float | None = None) -> None:
        """Place the scenario's replica groups on the GPUs; fresh engine processes, as after a restart
        (started now, unless `started_at` says when).

        Requests the old processes held are lost; a closed population's clients get their error and
        think before they ask again.
        """
        self._lose_requests(getattr(self, "replicas", []))
        self.placements, self.replicas = [], []
        if self.pd is not None:
            self.pd.reset()
        next_gpu = 0
        for group_index, group in enumerate(self.scenario.replicas):
            for _ in range(group.count):
                width = Parallelism(group.tensor_parallel, group.nodes).gpus_per_node
                placement = ReplicaPlacement(len(self.replicas), group_index, tuple(range(next_gpu, next_gpu + width)))
                next_gpu += width
                self.placements.append(placement)
                self.replicas.append(self._new_replica(placement, self.now if started_at is None else started_at))

    def _new_replica(self, placement: ReplicaPlacement, started_at: float) -> EngineReplica:
        """Replica `placement.index`'s engine process, started at `started_at`."""
        group, gpus = self.scenario.replicas[placement.group], placement.gpus
        parallel = Parallelism(group.tensor_parallel, group.nodes)
        make = partial(self.pd.replica, group.role, list(gpus)) if self.pd and group.role else EngineReplica
        replica = make(
            placement.index,
            group.model,
            self.scenario.node.gpu,
            parallel,
            group.engine,
            [self.gpus[g] for g in gpus],
            [self.ports[g % len(self.ports)] for g in gpus] if parallel.cross_node and self.ports else [],
            self._link_state,
            record=self._record_requests,
            engine_type=group.engine_type,
        )
        replica.now, replica.started_at = self.now, started_at
        if isinstance(self._arrivals, ClosedPopulation):
            replica.on_close = self._arrivals.left
        return replica

    def restart_replica(self, restart: ReplicaRestart) -> None:
        """A fresh process for one replica, loading for `restart.load_seconds` (restarts.py): the
        requests the old one held are lost, the router leaves it out until it has loaded."""
        self._lose_requests([self.replicas[restart.replica]])
        self.replicas[restart.replica] = self._new_replica(self.placements[restart.replica], self.now)
        self.loading_until[restart.replica] = self.now + restart.load_seconds

    def _lose_requests(self, replicas: list[EngineReplica]) -> None:
        """The requests these replicas' processes held end with them (a closed population's clients
        get their error and think before they ask again)."""
        if isinstance(self._arrivals, ClosedPopulation):
            for replica in replicas:
                for request in [*replica.inbox, *replica.waiting, *replica.running]:
                    self._arrivals.left(request, self.now)

    def loading(self, index: int) -> bool:
        """Whether replica `index` is loading its model after a restart: out of the pool, silent."""
        return self.now < self.loading_until.get(index, float("-inf"))

    def unavailable(self, endpoint: str) -> str | None:
        """Why `endpoint` ("engine" or "gpu") does not answer now; None while it does (a cluster
        node answers 503 while it is down or its engines load)."""
        return None

    # --------------------------------------------------------------------------------- time
    def advance(self, until: float) -> None:
        while self.now < until:
            end = min(until, self.now + CHUNK_SECONDS)
            phase = self.scenario.phase_at(self.now)
            if phase is not self.phase:
                self._apply_phase(phase)
            for request in self._arrivals.until(end):
                self._route(request)
            for replica in self.replicas:
                replica.run_until(end)
            for port in self.ports:
                port.background(end - self.now, self.phase.network)
            self.now = end
            if self.now >= self._next_sample:
                self._sample()

    def drain(self, limit_seconds: float = 3600.0) -> None:
        """Stop arrivals and run until every admitted request has left (or the limit passes)."""
        self._arrivals.stopped = True
        deadline = self.now + limit_seconds
        while self.now < deadline and any(r.load for r in self.replicas):
            self.advance(self.now + CHUNK_SECONDS)

    def _sample(self) -> None:
        for gpu in self.gpus:
            gpu.sample(self.now)
        for port, history in zip(self.ports, self.nic_history):
            history.append((self.now, port.values["port_xmit_data"]))
            while history and history[0][0] < self.now - HISTORY_SECONDS:
                history.popleft()
        self._next_sample = self.now + SAMPLE_SECONDS

    # ------------------------------------------------------------------------------ phases
    def _apply_phase(self, phase: Phase) -> None:
        self.phase = phase
        if phase.restart is not None:  # before the changes: the phase's are all those made so far
            self.restart_replica(phase.restart)
        for placement, replica in zip(self.placements, self.replicas):
            changes = phase.engine_changes.get(placement.group) or phase.engine_changes.get(-1)
            if changes:
                replica.reconfigure(**changes)

    def _workload_at(self, t: float) -> WorkloadSpec:
        return self.scenario.phase_at(t).workload

    def _link_state(self) -> tuple[LinkState, NetworkCondition]:
        condition = self.phase.network
        nic = self.scenario.node.nic
        # A tensor-parallel all-reduce runs at the pace of its slowest link: a congested port's share.
        available = min(
            [condition.available_fraction] + [p.override.available_fraction for p in self.ports if p.override]
        )
        link = LinkState(nic.rate_bytes_per_second, available, nic.latency_seconds)
        return link, condition

    # ------------------------------------------------------------------------------ routing
    def _route(self, request: Request) -> None:
        """To a replica that is awake: a router (the EPP, a Kubernetes Service) sends nothing to a
        sleeping engine, which is out of the pool until it wakes, nor to one loading its model. A
        disaggregated node routes through its pair (pd_node.py)."""
        if self.pd is not None:
            self.pd.route(request)
            return
        routing = self.scenario.routing
        awake = [r for r in self.replicas if self._in_pool(r)] or self.replicas
        if routing.policy == "least_loaded":
            target = min(awake, key=lambda r: (r.load, r.index))
        elif routing.policy == "weighted":
            weights = [w for r, w in zip(self.replicas, routing.weights) if r in awake]
            target = self._router_rng.choices(awake, weights=weights)[0]
        else:
            target = self.replicas[next(self._round_robin)]
            for _ in range(len(self.replicas) - 1):  # past the sleeping ones, if any is awake
                if self._in_pool(target):
                    break
                target = self.replicas[next(self._round_robin)]
        target.submit(request)

    def _in_pool(self, replica: EngineReplica) -> bool:
        return not replica.asleep and not self.loading(replica.index)

    # ------------------------------------------------------------------------------ queries
    def finished_requests(self) -> list[Request]:
        return [r for replica in self.replicas for r in (replica.finished or [])]

    def open_requests(self) -> list[Request]:
        """Requests still queued or running (for censored latency percentiles)."""
        result: list[Request] = []
        for replica in self.replicas:
            result.extend(replica.inbox)
            result.extend(replica.waiting)
            result.extend(replica.running)
        return result
