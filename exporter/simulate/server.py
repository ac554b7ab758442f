"""The simulated node on the wire: vLLM, dcgm-exporter and sysfs, advancing in real time.

Routes: `/engine/<i>/metrics` (replica i in vLLM V1 text), `/gpu/metrics` (dcgm-exporter text, AMD
device-metrics-exporter text on a node of AMD GPUs),
`/` (a JSON index: scenario, current phase and its expected stage, the engine URLs), `/healthz`.
The scenario is fast-forwarded by its `warmup_seconds` before the first request is answered, so
queues and caches are already in their steady state; after that a ticker advances the model to
the wall clock every 100 ms and rewrites the sysfs tree every second; a replica that a phase
restarts is served by a process of its own (replica_process.py, `engine_url`). With `realtime=False` the
caller advances the node itself (offline mode serves the same routes to the exporter's sources).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any

from exporter.simulate.amd_text import render_amd
from exporter.simulate.dcgm_text import pod_name, render_dcgm
from exporter.simulate.http_serving import TEXT_TYPE, base_url, http_server
from exporter.simulate.node import SimulatedNode
from exporter.simulate.pd_engine import DecodeReplica, PrefillReplica
from exporter.simulate.pd_sglang_text import render_sglang as render_sglang_pd
from exporter.simulate.replica_process import ReplicaProcess
from exporter.simulate.sglang_text import render_sglang
from exporter.simulate.sysfs import SysfsWriter
from exporter.simulate.vllm_text import render_vllm

log = logging.getLogger(__name__)
#: the exporter whose text `/gpu/metrics` speaks, by GPU vendor (also the `--gpu` mode that reads it)
GPU_TEXT_FORMATS = {"nvidia": "dcgm-exporter", "amd": "amd-exporter"}
TICK_SECONDS = 0.1
SYSFS_SECONDS = 1.0
_ENGINE_PATH = re.compile(r"^/engine/(\d+)/metrics$")


INDEX_PATHS = ("/", "/index.json")


class IndexedServer:
    """What a node's and the cluster's simulator servers share: an HTTP server on (host, port)
    that answers through `respond`, its URL, and the routes every one of them has: the JSON
    `index()` at `/` and `/index.json`, `/healthz`, and 404 for anything else."""

    def __init__(self, host: str, port: int) -> None:
        self._http = http_server(host, port, self)
        self.host, self.port = host, self._http.server_address[1]

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def index(self) -> dict[str, Any]:
        raise NotImplementedError

    def respond(self, path: str) -> tuple[int, str, bytes]:
        if path in INDEX_PATHS:
            return 200, "application/json", (json.dumps(self.index(), indent=2) + "\n").encode()
        if path == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        return 404, "text/plain; charset=utf-8", b"not found\n"


def index_head(scenario: Any, now: float, phase: Any, seed: int | None = None) -> dict[str, Any]:
    """The keys a node's and the cluster's index begin with: the scenario, the time, the phases
    (and a node's seed, in its place after the description)."""
    return {
        "scenario": scenario.name,
        "description": " ".join(scenario.description.split()),
        **({} if seed is None else {"seed": seed}),
        "simulated_seconds": round(now, 3),
        "phase": _phase_json(phase),
        "phases": [_phase_json(p) for p in scenario.phases],
    }


class SimulationServer(IndexedServer):
    def __init__(
        self,
        node: SimulatedNode,
        host: str = "127.0.0.1",
        port: int = 0,
        sysfs_out: str | None = None,
        realtime: bool = True,
        gpu_window_seconds: float = 5.0,
    ) -> None:
        self.node = node
        self.realtime = realtime
        self.gpu_window_seconds = gpu_window_seconds
        self.lock = threading.Lock()
        self.sysfs_out = sysfs_out
        self._sysfs = SysfsWriter(sysfs_out) if sysfs_out else None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: replica index -> its own process, for the replicas a phase restarts (served live only)
        self._processes: dict[int, ReplicaProcess] = {}
        #: (monotonic, simulated) seconds at which the live clock started; None until `start`
        self._origin: tuple[float, float] | None = None
        super().__init__(host, port)
        self.started_wall = time.time()

    def start(self) -> SimulationServer:
        if self.realtime:
            with self.lock:
                self.node.advance(self.node.scenario.warmup_seconds)
                self.write_sysfs()
        # The Unix time of simulated 0: the engines' `_created` and process start times count from it.
        self.started_wall = time.time() - self.node.now
        if self.realtime:
            self._origin = (time.monotonic(), self.node.now)
            restarted = {p.restart.replica for p in self.node.scenario.phases if p.restart is not None}
            self._processes = {i: ReplicaProcess(self.host, f"{self.url}/engine/{i}/metrics") for i in restarted}
            self._follow_restarts()
        self._spawn(self._http.serve_forever, "sim-http")
        if self.realtime:
            self._spawn(self._tick, "sim-clock")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._http.shutdown()
        self._http.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        for process in self._processes.values():
            process.stop()

    def engine_url(self, index: int) -> str:
        """Where the exporter scrapes replica `index`: its own process's port for a replica that
        restarts, else its path on this server."""
        process = self._processes.get(index)
        return process.url if process is not None else f"{self.url}/engine/{index}/metrics"

    def _follow_restarts(self) -> None:
        """A replica restarted by the model gets a fresh process, loading as long as it has left."""
        for index, process in self._processes.items():
            replica = self.node.replicas[index]
            if process.started_at != replica.started_at:
                loading = self.node.loading_until.get(index, self.node.now) - self.node.now
                process.start(replica.started_at, max(0.0, loading))

    def write_sysfs(self) -> None:
        if self._sysfs is not None:
            self._sysfs.write(self.node.ports)

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _catch_up(self) -> None:
        """Advance the node to the wall clock (under the lock; nothing before `start`, nor offline)."""
        if self._origin is not None:
            origin_wall, origin_sim = self._origin
            self.node.advance(origin_sim + (time.monotonic() - origin_wall))

    def _tick(self) -> None:
        next_sysfs = 0.0
        while not self._stop.wait(TICK_SECONDS):
            try:
                with self.lock:
                    self._catch_up()
                    self._follow_restarts()
                    if time.monotonic() >= next_sysfs:
                        self.write_sysfs()
                        next_sysfs = time.monotonic() + SYSFS_SECONDS
            except Exception:  # keep serving the last state rather than die silently
                log.exception("simulation step failed")

    # ------------------------------------------------------------------------------ responses
    def respond(self, path: str) -> tuple[int, str, bytes]:
        match = _ENGINE_PATH.match(path)
        with self.lock:
            # An engine's counters are current when it answers. The ticker alone left them as old
            # as its last tick, and on a starved host that was seconds: the answer then carried a
            # stale counter with a current time, and the host-bound engine's CPU rate read 0.76
            # cores where it ran at 0.84 (a fresh-clone CI, the vLLM tier beside it).
            try:
                self._catch_up()
            except Exception:  # as the ticker does: serve the last state
                log.exception("simulation step failed")
            refusal = self.node.unavailable("engine" if match else "gpu") if match or path == "/gpu/metrics" else None
            if match and self.node.loading(int(match.group(1))):
                refusal = "loading its model after a restart"
            if refusal:
                return 503, "text/plain; charset=utf-8", (refusal + "\n").encode()
            if match and int(match.group(1)) < len(self.node.replicas):
                replica = self.node.replicas[int(match.group(1))]
                if isinstance(replica, (PrefillReplica, DecodeReplica)) and replica.engine_type == "sglang":
                    text = render_sglang_pd(replica)
                elif replica.engine_type == "sglang":
                    text = render_sglang(replica)
                else:
                    text = render_vllm(replica, self.started_wall)
                return 200, TEXT_TYPE, text.encode()
            if path == "/gpu/metrics":
                render = render_amd if self.node.scenario.node.gpu.vendor == "amd" else render_dcgm
                return 200, TEXT_TYPE, render(self.node, self.gpu_window_seconds).encode()
            if path in INDEX_PATHS:  # the index reads the node: under the lock
                return super().respond(path)
        return super().respond(path)

    def _role(self, replica: Any) -> dict[str, str]:
        return {"role": replica.role} if replica.role else {}

    def index(self) -> dict[str, Any]:
        node = self.node
        scenario = node.scenario
        return {
            **index_head(scenario, node.now, node.phase, node.seed),
            "engines": [
                {
                    "index": r.index,
                    "url": self.engine_url(r.index).removeprefix(self.url),  # a path here, else its own
                    "engine_type": r.engine_type,
                    **self._role(r),
                    "model": r.model.served_name,
                    "pod": pod_name(node, r.index),
                    "gpus": list(p.gpus),
                    "tensor_parallel": r.parallel.tensor_parallel,
                    "nodes": r.parallel.nodes,
                }
                for r, p in zip(node.replicas, node.placements)
            ],
            "gpu": {
                "url": "/gpu/metrics",
                "format": GPU_TEXT_FORMATS[scenario.node.gpu.vendor],
                "model": scenario.node.gpu.model_name,
                "count": len(node.gpus),
            },
            "sysfs": self.sysfs_out,
            "rdma_devices": [port.device for port in node.ports],
            "hostname": scenario.node.hostname,
            "nodes": [self.node_entry()],
        }

    def node_entry(self) -> dict[str, Any]:
        """This node as the cluster index lists it: absolute URLs, so one exporter per node can read it."""
        node = self.node
        return {
            "hostname": node.scenario.node.hostname,
            "url": self.url + "/",
            "state": "down" if node.unavailable("gpu") else "loading" if node.unavailable("engine") else "up",
            "engines": [
                {
                    "index": r.index,
                    "url": self.engine_url(r.index),
                    "engine_type": r.engine_type,
                    **self._role(r),
                    "model": r.model.served_name,
                    "pod": pod_name(node, r.index),
                    "gpus": list(p.gpus),
                }
                for r, p in zip(node.replicas, node.placements)
            ],
            "gpu": {"url": f"{self.url}/gpu/metrics", "format": "dcgm-exporter", "count": len(node.gpus)},
            "sysfs": self.sysfs_out,
            "rdma_devices": [port.device for port in node.ports],
        }


def _phase_json(phase: Any) -> dict[str, Any]:
    return {
        "name": phase.name,
        "start_seconds": phase.start_seconds,
        "expected_stage": phase.expected_stage,
        "secondary_stages": list(phase.secondary_stages),
        "expected_findings": [finding.as_json() for finding in phase.expected_findings],
        "note": phase.note,
    }
