"""Which processes make up each engine: its listening port → PID (psutil) → process tree.

vLLM, SGLang and TensorRT-LLM serve HTTP from one process and run the GPU work in children
(EngineCore, TP workers, schedulers), so the GPU PIDs NVML reports are the listener's descendants,
not the listener itself. Only engines whose URL host is this machine can be matched; seeing other
users' sockets and the host's PIDs needs root and `hostPID: true` in a pod.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from exporter.sources.engine import EngineTarget

log = logging.getLogger(__name__)

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class EngineEndpoint:
    name: str
    host: str
    port: int


def endpoint(target: EngineTarget) -> EngineEndpoint | None:
    parts = urlsplit(target.url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return EngineEndpoint(target.name, parts.hostname, port)


def local_addresses() -> set[str]:
    addresses = {"127.0.0.1", "::1"}
    try:
        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    addresses.add(entry.address.split("%")[0])
    except OSError:
        pass
    return addresses


def resolve(host: str) -> set[str]:
    try:
        return {info[4][0].split("%")[0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return set()


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def listener_matches(listen_ip: str, engine_ips: set[str]) -> bool:
    """Does a socket listening on `listen_ip` serve requests sent to one of `engine_ips`?"""
    if listen_ip in _WILDCARDS or listen_ip in engine_ips:
        return True
    if listen_ip.startswith("::ffff:") and listen_ip[7:] in engine_ips:
        return True
    return _is_loopback(listen_ip) and any(_is_loopback(ip) for ip in engine_ips)


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


def process_tree(pid: int) -> set[int]:
    """The PID and all its descendants (empty when the process is gone)."""
    try:
        process = psutil.Process(pid)
        return {pid, *(child.pid for child in process.children(recursive=True))}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return set()


def pod_name_of(pid: int) -> str | None:
    """A pod's containers see HOSTNAME = the pod name (Kubernetes sets it unless hostNetwork)."""
    try:
        return psutil.Process(pid).environ().get("HOSTNAME") or None
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None


class EngineProcesses:
    """Engine name → (listener PIDs, PIDs of their process trees), looked up on demand."""

    def __init__(self, engines: Sequence[EngineTarget]) -> None:
        self._endpoints = [e for e in (endpoint(target) for target in engines) if e is not None]

    def lookup(self) -> dict[str, tuple[frozenset[int], frozenset[int]]]:
        if not self._endpoints:
            return {}
        local = local_addresses()
        wanted: list[tuple[EngineEndpoint, set[str]]] = []
        for item in self._endpoints:
            ips = {item.host} if _is_ip(item.host) else resolve(item.host)
            if ips & local:
                wanted.append((item, ips & local))
            else:
                log.debug("engine %s at %s is not on this host; no process attribution", item.name, item.host)
        if not wanted:
            return {}
        try:
            connections = psutil.net_connections(kind="tcp")
        except (psutil.AccessDenied, OSError) as exc:
            log.warning("cannot list listening sockets for GPU attribution (%s); run as root", exc)
            return {}
        result: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        for item, ips in wanted:
            listeners = listening_pids(connections, item.port, ips)
            tree: set[int] = set()
            for pid in listeners:
                tree |= process_tree(pid)
            if listeners:
                result[item.name] = (frozenset(listeners), frozenset(tree))
        return result


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
