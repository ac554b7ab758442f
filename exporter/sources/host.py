"""The host source (psutil): CPU per core and overall, memory, and each engine's process tree.

These are the inputs of the host-overhead stage: an engine whose GPU idles while its process burns
one core is CPU-bound in Python, not GPU-bound. The engine's process is the one listening on the
port of its configured URL, when that socket is in this network namespace and psutil may see its
owner (root, or the same user); otherwise the process families are left out for that engine, since
a guess at another process would be worse than nothing.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import psutil

from exporter.engine_processes import EngineProcesses
from exporter.model import Metric, Sample
from exporter.settings import EngineTarget
from exporter.sources.base import Source
from exporter.window import DeltaWindow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative seconds one CPU spent busy and in total (the parts of psutil's cpu_times)."""

    busy: float
    total: float


def read_cpu_times() -> list[CpuTimes]:
    """Per logical CPU. Busy is everything but idle and iowait; guest time is already inside user
    and nice on Linux, so it is taken out of the total (as psutil.cpu_percent does)."""
    result = []
    for times in psutil.cpu_times(percpu=True):
        fields = times._asdict()
        total = sum(fields.values()) - fields.get("guest", 0.0) - fields.get("guest_nice", 0.0)
        idle = fields.get("idle", 0.0) + fields.get("iowait", 0.0)
        result.append(CpuTimes(busy=total - idle, total=total))
    return result


@dataclass
class ProcessTree:
    """CPU and threads of a process and all its descendants, as a counter that never goes down:
    the CPU of a child that exited stays in the total (its parent's `children_*` times would only
    hold it once reaped, and only for waited-for children)."""

    root: psutil.Process
    live: dict[tuple[int, float], float] = field(default_factory=dict)
    retired_cpu_seconds: float = 0.0

    def sample(self, children: Mapping[int, list[int]] | None = None) -> tuple[float, int] | None:
        """(cpu seconds, threads); None when the root is gone (its pid may be reused) or hidden from us.

        `children` (pid -> child pids, from `children_index`) is the process table read once for
        every tree of a collection: psutil's `children()` reads all of /proc for each tree."""
        if not self.root.is_running():
            return None
        try:
            if children is None:
                processes = [self.root, *self.root.children(recursive=True)]
            else:
                processes = [self.root, *descendants(self.root, children)]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        live: dict[tuple[int, float], float] = {}
        threads = 0
        for process in processes:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    count = process.num_threads()
                    key = (process.pid, process.create_time())
            except psutil.AccessDenied:
                if process is self.root:
                    return None
                continue
            except psutil.NoSuchProcess:  # exited while we walked the tree
                continue
            live[key] = times.user + times.system
            threads += count
        for key, cpu in self.live.items():
            if key not in live:
                self.retired_cpu_seconds += cpu
        self.live = live
        return self.retired_cpu_seconds + sum(live.values()), threads


def children_index() -> dict[int, list[int]]:
    """pid -> child pids of every process, from one walk of the process table."""
    index: dict[int, list[int]] = defaultdict(list)
    for process in psutil.process_iter(["ppid"]):
        ppid = process.info["ppid"]
        if ppid is not None:
            index[ppid].append(process.pid)
    return index


def descendants(root: psutil.Process, children: Mapping[int, list[int]]) -> list[psutil.Process]:
    """What `root.children(recursive=True)` returns, from a shared `children_index` (the same walk:
    a child counts only if it started after the root, so a reused pid is not adopted)."""
    root_started = root.create_time()
    found: list[psutil.Process] = []
    seen: set[int] = set()
    stack = [root.pid]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for child_pid in children.get(pid, ()):
            try:
                child = psutil.Process(child_pid)
                if root_started <= child.create_time():
                    found.append(child)
                    stack.append(child_pid)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass
    return found


def _ratio(window: DeltaWindow) -> float | None:
    totals = window.total()
    if totals is None or totals[1] <= 0:
        return None
    return min(1.0, max(0.0, totals[0] / totals[1]))


@dataclass
class _Tracked:
    """An engine whose process tree is measured, and when to look for it again if not found."""

    tree: ProcessTree | None = None
    next_lookup: float = 0.0


class HostSource(Source):
    name = "host"

    def __init__(
        self,
        engines: Callable[[], Sequence[EngineTarget]] | Sequence[EngineTarget],
        window_seconds: float,
        lifetime_baseline: bool = False,
        cpu_times: Callable[[], list[CpuTimes]] = read_cpu_times,
        rescan_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        reporting_own_cpu: Callable[[], set[str]] = set,
    ) -> None:
        self.window_seconds = window_seconds
        # Engines whose own exposition carried their process CPU in their last collection: the
        # composition root would drop the host's samples for them (one series per engine), so
        # their process trees are not walked at all (issue #23: ~0.25 ms per target per round).
        self._reporting_own_cpu = reporting_own_cpu
        # `once` has no earlier reading: report the average since boot instead of nothing.
        self._lifetime_baseline = lifetime_baseline
        self._cpu_times = cpu_times
        # Finding a listener scans every process' file descriptors: not every collection.
        self._rescan_seconds = rescan_seconds
        self._clock = clock
        self._processes = EngineProcesses(engines)
        self._targets = self._processes.targets
        self._tracked: dict[str, _Tracked] = {}
        self._windows: dict[str, DeltaWindow] = {}

    def collect(self, now: float) -> list[Metric]:
        metrics: list[Metric] = []
        metrics.extend(self._cpu(now))
        memory = psutil.virtual_memory()
        metrics.append(Sample("llm_host_memory_total_bytes", {}, float(memory.total)))
        metrics.append(Sample("llm_host_memory_used_bytes", {}, float(memory.total - memory.available)))
        metrics.extend(self._engine_processes())
        return metrics

    def _cpu(self, now: float) -> Iterable[Sample]:
        times = self._cpu_times()
        overall = CpuTimes(sum(t.busy for t in times), sum(t.total for t in times))
        for key, family, labels, value in (
            *((str(i), "llm_host_cpu_utilization_ratio", {"cpu": str(i)}, t) for i, t in enumerate(times)),
            ("overall", "llm_host_cpu_overall_utilization_ratio", {}, overall),
        ):
            ratio = self._window_ratio(key, now, value)
            if ratio is not None:
                yield Sample(family, labels, ratio)

    def _window_ratio(self, key: str, now: float, times: CpuTimes) -> float | None:
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = DeltaWindow(self.window_seconds)
            if self._lifetime_baseline:
                window.seed_lifetime(now, (times.busy, times.total))
                return _ratio(window)
        window.observe(now, (times.busy, times.total))
        return _ratio(window)

    def _engine_processes(self) -> list[Sample]:
        """Process samples labelled by `engine` alone: the composition root gives them the
        engine's own labels (and drops them for an engine that reports its own process CPU)."""
        names = {target.name for target in self._targets()} - self._reporting_own_cpu()
        for name in [n for n in self._tracked if n not in names]:  # engine removed, pod deleted, reports its own
            del self._tracked[name]
        self._find_trees(names)
        out = []
        # One walk of the process table for every tree once there are several (psutil's own is
        # cheaper for one): it read all of /proc per engine per collection.
        index = children_index() if sum(t.tree is not None for t in self._tracked.values()) > 1 else None
        for name, tracked in sorted(self._tracked.items()):
            if tracked.tree is None:
                continue
            usage = tracked.tree.sample(index)
            if usage is None:
                log.info("host: engine %s process %d is gone or hidden", name, tracked.tree.root.pid)
                tracked.tree = None
                continue
            cpu_seconds, threads = usage
            out.append(Sample("llm_engine_process_cpu_seconds_total", {"engine": name}, cpu_seconds))
            out.append(Sample("llm_engine_process_threads", {"engine": name}, float(threads)))
        return out

    def _find_trees(self, names: set[str]) -> None:
        now = self._clock()
        due = []
        for name in names:
            tracked = self._tracked.setdefault(name, _Tracked())
            if tracked.tree is None and now >= tracked.next_lookup:
                tracked.next_lookup = now + self._rescan_seconds
                due.append(name)
        if not due:
            return
        for name, found in self._processes.lookup(due).items():
            try:
                self._tracked[name].tree = ProcessTree(psutil.Process(found.root))
            except psutil.Error:
                continue
            log.info("host: engine %s is process %d", name, found.root)
