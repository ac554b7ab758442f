"""Engine URL → listening process → process tree: the one lookup the host source (engine process
CPU) and GPU attribution (GPU PIDs → engine) share.

vLLM, SGLang and TensorRT-LLM serve HTTP from one process and run the GPU work in children
(EngineCore, TP workers, schedulers), so the GPU PIDs NVML reports are the listener's descendants,
not the listener itself. Only engines whose URL host is served from this network namespace can be
matched (a local listener on the same port of a remote target would be some other process); seeing
other users' sockets and the host's PIDs needs root and `hostPID: true` in a pod.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from exporter.settings import EngineTarget

log = logging.getLogger(__name__)

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class EngineProcess:
    """The processes of one engine: those listening on its port, and their whole trees."""

    listeners: frozenset[int]
    tree: frozenset[int]

    @property
    def root(self) -> int:
        """The process to measure: the lowest listener PID (the parent of SO_REUSEPORT workers)."""
        return min(self.listeners)


def normal_ip(text: str) -> str:
    """Without an IPv6 zone index, and IPv4-mapped IPv6 as plain IPv4."""
    text = text.split("%", 1)[0]
    return text[len("::ffff:") :] if text.startswith("::ffff:") and "." in text else text


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def local_addresses() -> set[str]:
    """Every address of this network namespace's interfaces, loopback included."""
    addresses = {"127.0.0.1", "::1"}
    try:
        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    addresses.add(normal_ip(entry.address))
    except OSError:
        pass
    return addresses


def target_endpoint(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def resolve(host: str) -> set[str]:
    try:
        ipaddress.ip_address(host)
        return {normal_ip(host)}
    except ValueError:
        pass
    try:
        return {normal_ip(str(info[4][0])) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        return set()


def local_ips(host: str, local: set[str]) -> set[str]:
    """The target's addresses that this network namespace serves (empty when it is remote)."""
    return {ip for ip in resolve(host) if ip in local or is_loopback(ip)}


def listener_matches(listen_ip: str, engine_ips: set[str]) -> bool:
    """Does a socket listening on `listen_ip` serve requests sent to one of `engine_ips`?"""
    listen_ip = normal_ip(listen_ip)
    if listen_ip in _WILDCARDS or listen_ip in engine_ips:
        return True
    return is_loopback(listen_ip) and any(is_loopback(ip) for ip in engine_ips)


def listening_pids(connections: Iterable, port: int, engine_ips: set[str]) -> set[int]:
    return {
        conn.pid
        for conn in connections
        if conn.status == psutil.CONN_LISTEN
        and conn.pid
        and conn.laddr
        and conn.laddr.port == port
        and listener_matches(conn.laddr.ip, engine_ips)
    }


def children_by_parent() -> dict[int, list[int]]:
    """Each PID's children, from one pass over the process table: the engines' trees are walked
    in it, where `Process.children()` would read the whole table again for each engine."""
    children: dict[int, list[int]] = {}
    for process in psutil.process_iter(["ppid"]):
        parent = process.info["ppid"]
        if parent:
            children.setdefault(parent, []).append(process.pid)
    return children


def process_tree(pid: int, children: dict[int, list[int]]) -> set[int]:
    """The PID and all its descendants (empty when the process is gone)."""
    if not psutil.pid_exists(pid):
        return set()
    tree, unvisited = {pid}, [pid]
    while unvisited:
        for child in children.get(unvisited.pop(), ()):
            if child not in tree:
                tree.add(child)
                unvisited.append(child)
    return tree


def pod_name_of(pid: int) -> str | None:
    """A pod's containers see HOSTNAME = the pod name (Kubernetes sets it unless hostNetwork)."""
    try:
        return psutil.Process(pid).environ().get("HOSTNAME") or None
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None


class EngineProcesses:
    """Engine name → its processes, for the engines `targets()` names now (configured and
    discovered alike), looked up on demand in one pass over the socket table."""

    def __init__(self, targets: Callable[[], Sequence[EngineTarget]] | Sequence[EngineTarget]) -> None:
        if callable(targets):
            self._targets = targets
        else:
            fixed = tuple(targets)
            self._targets = lambda: fixed
        self._reported_remote: set[str] = set()

    def targets(self) -> Sequence[EngineTarget]:
        return self._targets()

    def lookup(self, names: Iterable[str] | None = None) -> dict[str, EngineProcess]:
        """Every engine's processes (or only those of `names`); engines not found are left out."""
        wanted_names = None if names is None else set(names)
        targets = [t for t in self._targets() if wanted_names is None or t.name in wanted_names]
        if not targets:
            return {}
        local = local_addresses()
        wanted: list[tuple[str, int, set[str]]] = []
        for target in targets:
            host, port = target_endpoint(target.url)
            ips = local_ips(host, local)
            if ips:
                wanted.append((target.name, port, ips))
            elif target.name not in self._reported_remote:
                self._reported_remote.add(target.name)
                log.info(
                    "engine %s (%s) is not served from this network namespace; its processes are not looked up",
                    target.name,
                    host,
                )
        if not wanted:
            return {}
        try:
            connections = psutil.net_connections(kind="tcp")
        except (psutil.Error, OSError) as exc:
            log.warning("cannot list listening sockets (%s); engine processes are unknown: run as root", exc)
            return {}
        result: dict[str, EngineProcess] = {}
        children: dict[int, list[int]] | None = None
        for name, port, ips in wanted:
            listeners = listening_pids(connections, port, ips)
            if not listeners:
                continue
            if children is None:
                children = children_by_parent()
            tree: set[int] = set()
            for pid in listeners:
                tree |= process_tree(pid, children)
            result[name] = EngineProcess(frozenset(listeners), frozenset(tree))
        return result
