"""The host source (psutil): CPU per core and overall, memory, and each engine's process tree.

These are the inputs of the host-overhead stage: an engine whose GPU idles while its process burns
one core is CPU-bound in Python, not GPU-bound. The engine's process is the one listening on the
port of its configured URL, when that socket is in this network namespace and psutil may see its
owner (root, or the same user); otherwise the process families are left out for that engine, since
a guess at another process would be worse than nothing.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import psutil

from exporter.model import Metric, Sample
from exporter.sources.base import Source
from exporter.sources.engine import EngineTarget
from exporter.window import DeltaWindow

log = logging.getLogger(__name__)

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})

LabelsFor = Callable[[EngineTarget], list[dict[str, str]]]


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


def default_labels(target: EngineTarget) -> list[dict[str, str]]:
    return [{"engine": target.name, "engine_type": target.type or "unknown", "model": target.model or ""}]


@dataclass
class ProcessTree:
    """CPU and threads of a process and all its descendants, as a counter that never goes down:
    the CPU of a child that exited stays in the total (its parent's `children_*` times would only
    hold it once reaped, and only for waited-for children)."""

    root: psutil.Process
    live: dict[tuple[int, float], float] = field(default_factory=dict)
    retired_cpu_seconds: float = 0.0

    def sample(self) -> tuple[float, int] | None:
        """(cpu seconds, threads); None when the root is gone (its pid may be reused) or hidden from us."""
        if not self.root.is_running():
            return None
        try:
            processes = [self.root, *self.root.children(recursive=True)]
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


def local_addresses() -> set[str]:
    """Every address of this network namespace's interfaces."""
    addresses = set()
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                addresses.add(_normal_ip(entry.address))
    return addresses


def target_endpoint(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def resolve_local(host: str, local: set[str]) -> set[str] | None:
    """The target's addresses when it is served from this network namespace; None when remote
    (or unresolvable), where a local listener on the same port would be some other process."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return None
    addresses = {_normal_ip(str(info[4][0])) for info in infos}
    if any(ipaddress.ip_address(a).is_loopback or a in local for a in addresses):
        return addresses
    return None


def listening_pids(wanted: dict[str, tuple[set[str], int]]) -> dict[str, int]:
    """name -> pid of the process listening on (one of the addresses, port). One pass over the
    socket table for all names; a socket whose owner psutil may not see has no pid and is skipped."""
    found: dict[str, int] = {}
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.pid is None:
            continue
        ip, port = _normal_ip(conn.laddr.ip), conn.laddr.port
        for name, (addresses, wanted_port) in wanted.items():
            if name not in found and port == wanted_port and (ip in _WILDCARDS or ip in addresses):
                found[name] = conn.pid
    return found


def _ratio(window: DeltaWindow) -> float | None:
    totals = window.total()
    if totals is None or totals[1] <= 0:
        return None
    return min(1.0, max(0.0, totals[0] / totals[1]))


def _normal_ip(text: str) -> str:
    text = text.split("%", 1)[0]  # IPv6 zone index
    return text[len("::ffff:") :] if text.startswith("::ffff:") and "." in text else text


@dataclass
class _EngineProcess:
    target: EngineTarget
    reported_remote: bool = False
    tree: ProcessTree | None = None
    next_lookup: float = 0.0


class HostSource(Source):
    name = "host"

    def __init__(
        self,
        engines: Sequence[EngineTarget],
        window_seconds: float,
        lifetime_baseline: bool = False,
        labels_for: LabelsFor = default_labels,
        cpu_times: Callable[[], list[CpuTimes]] = read_cpu_times,
        rescan_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_seconds = window_seconds
        # `once` has no earlier reading: report the average since boot instead of nothing.
        self._lifetime_baseline = lifetime_baseline
        self._labels_for = labels_for
        self._cpu_times = cpu_times
        # Finding a listener scans every process' file descriptors: not every collection.
        self._rescan_seconds = rescan_seconds
        self._clock = clock
        self._engines = [_EngineProcess(target) for target in engines]
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
        self._find_trees()
        out = []
        for engine in self._engines:
            if engine.tree is None:
                continue
            usage = engine.tree.sample()
            if usage is None:
                log.info("host: engine %s process %d is gone or hidden", engine.target.name, engine.tree.root.pid)
                engine.tree = None
                continue
            cpu_seconds, threads = usage
            for labels in self._labels_for(engine.target):
                out.append(Sample("llm_engine_process_cpu_seconds_total", labels, cpu_seconds))
                out.append(Sample("llm_engine_process_threads", labels, float(threads)))
        return out

    def _find_trees(self) -> None:
        now = self._clock()
        due = [e for e in self._engines if e.tree is None and now >= e.next_lookup]
        if not due:
            return
        local = local_addresses()
        wanted: dict[str, tuple[set[str], int]] = {}
        for engine in due:
            engine.next_lookup = now + self._rescan_seconds
            host, port = target_endpoint(engine.target.url)
            addresses = resolve_local(host, local)
            if addresses is None:
                if not engine.reported_remote:
                    log.info(
                        "host: engine %s (%s) is not served from this network namespace; its process is not measured",
                        engine.target.name,
                        host,
                    )
                engine.reported_remote = True
                continue
            wanted[engine.target.name] = (addresses, port)
        if not wanted:
            return
        try:
            pids = listening_pids(wanted)
        except psutil.Error as exc:
            log.info("host: cannot list sockets (%s); engine processes are not measured", exc)
            return
        for engine in due:
            pid = pids.get(engine.target.name)
            if pid is None:
                continue
            try:
                engine.tree = ProcessTree(psutil.Process(pid))
            except psutil.Error:
                continue
            log.info("host: engine %s is process %d", engine.target.name, pid)
