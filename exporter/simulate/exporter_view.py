"""The exporter reading a simulated node through its ordinary sources (for offline mode and `demo`).

The sources are the ones `serve` builds from a configuration file: one engine source per replica
URL of the replica's engine type (vLLM or SGLang), `gpu: dcgm-exporter=URL`, and `sysfs: DIR` for
the RDMA tree. Each engine is named after the pod it runs in, and `gpu_attribution.engine_pods`
ties it to the GPUs dcgm-exporter labels with that pod — the attribution a Kubernetes deployment
gets from dcgm-exporter's pod labels. `plain_flags=True` reads the node as `serve --engine TYPE=URL
... --gpu dcgm-exporter=URL --sysfs DIR` does: unnamed engines and no attribution configured
(docs/diagnosis.md, "GPUs no engine is tied to"). Nothing here knows how the sources work; it only hands them URLs and a
directory.

The node's clock stands still while a round runs, so a fetch that the host's load slows is not a
slow engine: every source gets OFFLINE_TIMEOUT_SECONDS of real time, and a busy host changes how
long a round takes, not what it reads. (With the live timeouts a starved round lost a source, and
the loop, measuring its in-flight fetch on the node's clock, cut it short again the rounds after.)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from exporter.app import Exporter
from exporter.config import build
from exporter.loop import Snapshot
from exporter.simulate.dcgm_text import POD_NAMESPACE, pod_name
from exporter.simulate.node import SimulatedNode
from exporter.simulate.server import GPU_TEXT_FORMATS, SimulationServer

#: how long, in real time, an offline round waits for each source (a source that never answers
#: still ends the round: a simulator's pages answer in milliseconds)
OFFLINE_TIMEOUT_SECONDS = 60.0


def window_seconds(interval: float) -> float:
    """The quantile and level window the demo's exporter runs with: a minute, or four rounds."""
    return max(60.0, 4 * interval)


def _role(replica: Any) -> dict[str, str]:
    """A pool's role as a deployment's configuration (or its pods' labels) states it."""
    return {"role": replica.role} if replica.role else {}


def exporter_settings(
    node: SimulatedNode, base_url: str, sysfs_dir: str | None, interval: float, urls: Sequence[str] = ()
) -> dict[str, Any]:
    """Configuration-file data (the `--config` YAML) that points the exporter at a simulation;
    `urls`: the replicas' own where they differ from their paths on the simulator (a replica that
    restarts has a process and a port of its own: SimulationServer.engine_url)."""
    names = [pod_name(node, r.index) for r in node.replicas]
    urls = urls or [f"{base_url}/engine/{i}/metrics" for i in range(len(node.replicas))]
    settings: dict[str, Any] = {
        "engines": [
            {"name": name, "type": replica.engine_type, "url": url, **_role(replica)}
            for name, replica, url in zip(names, node.replicas, urls)
        ],
        "gpu": f"{GPU_TEXT_FORMATS[node.scenario.node.gpu.vendor]}={base_url}/gpu/metrics",
        "interval_seconds": interval,
        "window_seconds": window_seconds(interval),
        # The simulated pods exist only in dcgm-exporter's labels: no processes, no kubelet to ask.
        "gpu_attribution": {
            "engine_pods": {name: f"{POD_NAMESPACE}/{name}" for name in names},
            "processes": False,
            "pod_resources_socket": "",
        },
    }
    if sysfs_dir:
        settings["sysfs"] = sysfs_dir
    return settings


def plain_flag_settings(node: SimulatedNode, base_url: str, sysfs_dir: str | None) -> dict[str, Any]:
    """What `serve --engine vllm=URL ... --gpu FORMAT=URL --sysfs DIR` configures: every other key
    (names, interval, window, attribution) at its default."""
    settings: dict[str, Any] = {
        "engines": [
            {"type": replica.engine_type, "url": f"{base_url}/engine/{i}/metrics"}
            for i, replica in enumerate(node.replicas)
        ],
        "gpu": f"{GPU_TEXT_FORMATS[node.scenario.node.gpu.vendor]}={base_url}/gpu/metrics",
    }
    if sysfs_dir:
        settings["sysfs"] = sysfs_dir
    return settings


class ExporterView:
    """Serves `node` on loopback (not real time) and collects it with the exporter's sources; each
    snapshot carries the diagnosis gauges, as `serve` publishes them."""

    def __init__(
        self,
        node: SimulatedNode,
        interval: float = 5.0,
        extra_settings: Mapping[str, Any] | None = None,
        plain_flags: bool = False,
    ) -> None:
        self.node = node
        self._sysfs_dir = tempfile.mkdtemp(prefix="llm-sim-sysfs-")
        self.server = SimulationServer(
            node, "127.0.0.1", 0, self._sysfs_dir, realtime=False, gpu_window_seconds=interval
        ).start()
        self.server.write_sysfs()
        base = (
            plain_flag_settings(node, self.server.url, self._sysfs_dir)
            if plain_flags
            else exporter_settings(node, self.server.url, self._sysfs_dir, interval)
        )
        settings = {**base, **(extra_settings or {})}
        config = build(settings)
        # Unix time as the simulation tells it: its engines' start times are stated on this clock.
        self.exporter = Exporter(config, clock=lambda: node.now, wall_clock=lambda: self.server.started_wall + node.now)
        for source in self.exporter.loop.current_sources():
            source.timeout_seconds = OFFLINE_TIMEOUT_SECONDS

    def collect(self) -> Snapshot:
        self.server.write_sysfs()
        return self.exporter.collect_once()

    def run(self, until: float, step: float) -> Iterator[tuple[float, Snapshot]]:
        """Advance the node `step` seconds at a time while it is before `until`, collecting after
        each step: (simulated time, snapshot). The loop of `run_offline(exporter_view=True)`, for
        callers that want more of the view along the way (its diagnosis, its server)."""
        while self.node.now < until:
            self.node.advance(self.node.now + step)
            yield self.node.now, self.collect()

    def close(self) -> None:
        self.exporter.stop()
        self.server.stop()
        shutil.rmtree(self._sysfs_dir, ignore_errors=True)
