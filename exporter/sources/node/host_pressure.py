"""The host's pressure on the engines: CPU stolen from the node by the hypervisor, the time the
node's runnable tasks waited for a CPU (PSI, `/proc/pressure/cpu`), the CPU quota throttling of
each engine's cgroup (cgroup v2 `cpu.stat`: `nr_periods`, `nr_throttled`, `throttled_usec`), and
each engine's listening process' start time, which says an engine is loading while its metrics do
not answer yet (vLLM binds its port before it loads the model).

Engine processes are found as the host source finds them (exporter/engine_processes.py: the
process listening on the engine URL's port); their samples carry the `engine` label alone and are
joined to the engine's label sets by the composition root, which drops the start time where the
engine exports its own. A process listening for several engines (a simulator serving a node's
replicas at paths of one port, a proxy) is none of theirs: its start and its cgroup say nothing of
any one engine, so those engines get neither from the host. The CPU wait is read every
collection (one small file: the diagnosis takes its rate over its own window); the rest every
`refresh_seconds` (the socket table is the cost).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import psutil

from exporter.engine_processes import EngineProcesses
from exporter.model import Metric, Sample
from exporter.settings import EngineTarget
from exporter.sources.base import Source
from exporter.sources.node.registry import NODE_SOURCES, NodeContext, NodeSource

log = logging.getLogger(__name__)

#: cpu.stat key -> (family, scale)
CPU_STAT = {
    "nr_periods": ("llm_engine_cgroup_cpu_periods_total", 1.0),
    "nr_throttled": ("llm_engine_cgroup_cpu_throttled_periods_total", 1.0),
    "throttled_usec": ("llm_engine_cgroup_cpu_throttled_seconds_total", 1e-6),
}


def cgroup_path(pid: int, proc: str = "/proc") -> str | None:
    """The process' cgroup v2 path ("0::/kubepods/…"), None on a v1-only host or a gone process."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup"), encoding="ascii", errors="replace") as handle:
            for line in handle:
                hierarchy, _, rest = line.strip().partition(":")
                controllers, _, path = rest.partition(":")
                if hierarchy == "0" and controllers == "":
                    return path
    except OSError:
        return None
    return None


def read_cpu_waiting_seconds(proc: str = "/proc") -> float | None:
    """The `some` line's `total` of the kernel's CPU pressure (microseconds in which at least one
    runnable task waited for a CPU), in seconds; None where the kernel keeps no pressure figures."""
    try:
        with open(os.path.join(proc, "pressure", "cpu"), encoding="ascii") as handle:
            for line in handle:
                kind, *fields = line.split()
                if kind == "some":
                    totals = [f.partition("=")[2] for f in fields if f.startswith("total=")]
                    return int(totals[0]) / 1e6 if totals else None
    except (OSError, ValueError):
        return None
    return None


def read_cpu_stat(cgroup_root: str, path: str) -> dict[str, float]:
    found: dict[str, float] = {}
    try:
        with open(os.path.join(cgroup_root, path.lstrip("/"), "cpu.stat"), encoding="ascii") as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key in CPU_STAT:
                    found[key] = float(value)
    except (OSError, ValueError):
        return {}
    return found


class HostPressureSource(Source):
    name = "host_pressure"
    timeout_seconds = 5.0

    def __init__(
        self,
        targets: Callable[[], Sequence[EngineTarget]] | Sequence[EngineTarget],
        sysfs: str = "/sys",
        refresh_seconds: float = 30.0,
        proc: str = "/proc",
    ) -> None:
        self._processes = EngineProcesses(targets)
        self._cgroup_root = os.path.join(sysfs, "fs", "cgroup")
        self._proc = proc
        self._refresh_seconds = refresh_seconds
        self._read_at: float | None = None
        self._samples: list[Metric] = []
        self._steal: tuple[float, float] | None = None

    def collect(self, now: float) -> list[Metric]:
        if self._read_at is None or now - self._read_at >= self._refresh_seconds:
            self._samples = [*self._node(), *self._engines()]
            self._read_at = now
        waiting = read_cpu_waiting_seconds(self._proc)
        if waiting is None:
            return self._samples
        return [*self._samples, Sample("llm_host_cpu_waiting_seconds_total", {}, waiting)]

    def _node(self) -> Iterator[Sample]:
        times = psutil.cpu_times()
        steal = getattr(times, "steal", None)
        if steal is None:
            return
        total = sum(times._asdict().values()) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
        before, self._steal = self._steal, (steal, total)
        if before is not None and total > before[1]:
            yield Sample("llm_host_cpu_steal_ratio", {}, max(0.0, (steal - before[0]) / (total - before[1])))

    def _engines(self) -> Iterator[Sample]:
        engines = self._processes.lookup()
        serving = Counter(found.root for found in engines.values())
        for name, found in sorted(engines.items()):
            if serving[found.root] > 1:
                continue
            labels = {"engine": name}
            try:
                started = psutil.Process(found.root).create_time()
            except psutil.Error:
                continue
            yield Sample("llm_engine_process_start_time_seconds", labels, started)
            path = cgroup_path(found.root, self._proc)
            stats = read_cpu_stat(self._cgroup_root, path) if path is not None else {}
            for key, (family, scale) in CPU_STAT.items():
                if key in stats:
                    yield Sample(family, labels, stats[key] * scale)


def _build(node: NodeContext) -> Source:
    return HostPressureSource(node.targets, node.sysfs, node.health.refresh_seconds)


NODE_SOURCES.register(NodeSource(HostPressureSource.name, _build))
