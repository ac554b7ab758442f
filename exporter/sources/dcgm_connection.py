"""Reach a DCGM host engine: import pydcgm, parse `dcgm_address`, open a handle, probe for `auto`.

pydcgm is not on PyPI; it ships with DCGM under /usr/share/datacenter-gpu-manager-4/bindings/python3
(DCGM 4) or /usr/local/dcgm/bindings/python3 (DCGM 3), and it is imported only when DCGM is used.
An address is `host`, `host:port`, `[v6]:port`, `unix:///path` or `embedded` (a host engine inside
this process).
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from exporter.sources.base import SourceError
from exporter.sources.gpu_common import quietly

BINDINGS_PATHS = (
    "/usr/share/datacenter-gpu-manager-4/bindings/python3",
    "/usr/local/dcgm/bindings/python3",
)
DEFAULT_PORT = 5555  # DCGM_HE_PORT_NUMBER
EMBEDDED = "embedded"
CONNECT_TIMEOUT_MS = 2000


@dataclass(frozen=True)
class DcgmModules:
    """The two pydcgm modules the DCGM source uses, imported together (or injected by tests)."""

    pydcgm: ModuleType
    structs: ModuleType


def load_dcgm() -> DcgmModules:
    """Import pydcgm from the path, else from where the DCGM packages install it."""
    for attempt in range(2):
        try:
            return DcgmModules(importlib.import_module("pydcgm"), importlib.import_module("dcgm_structs"))
        except ImportError as exc:
            if attempt == 1:
                raise SourceError("unavailable", f"pydcgm is not importable (install DCGM): {exc}") from exc
            for path in BINDINGS_PATHS:
                if os.path.isdir(path) and path not in sys.path:
                    sys.path.append(path)
    raise AssertionError("unreachable")


def host_and_port(address: str) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]:port` → (host, port), the port defaulting to 5555."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    return host or "localhost", int(port) if port.isdigit() else DEFAULT_PORT


def host_engine_listening(address: str, timeout: float = 0.5) -> bool:
    """Cheap first check for `--gpu auto`: is anything accepting connections at the address?"""
    if address == EMBEDDED:
        return False
    if address.startswith("unix://"):
        return os.path.exists(address[len("unix://") :])
    try:
        with socket.create_connection(host_and_port(address), timeout=timeout):
            return True
    except OSError:
        return False


def open_handle(modules: DcgmModules, address: str) -> Any:
    """A DcgmHandle: embedded host engine, Unix socket, or TCP (with a connect timeout)."""
    mode = modules.structs.DCGM_OPERATION_MODE_AUTO
    if address == EMBEDDED:
        return modules.pydcgm.DcgmHandle(ipAddress=None, opMode=mode)
    if address.startswith("unix://"):
        return modules.pydcgm.DcgmHandle(
            unixSocketPath=address[len("unix://") :], opMode=mode, timeoutMs=CONNECT_TIMEOUT_MS
        )
    return modules.pydcgm.DcgmHandle(ipAddress=address, opMode=mode, timeoutMs=CONNECT_TIMEOUT_MS)


def dcgm_answers(address: str) -> tuple[bool, str]:
    """For `--gpu auto`: does a DCGM host engine answer at `address`? (and why not)."""
    if address != EMBEDDED and not host_engine_listening(address):
        return False, f"no DCGM host engine listening at {address}"
    try:
        modules = load_dcgm()
    except SourceError as exc:
        return False, str(exc)
    try:
        handle = open_handle(modules, address)
        count = len(list(handle.GetSystem().discovery.GetAllSupportedGpuIds()))
        quietly(handle.Shutdown)
    except modules.structs.DCGMError as exc:
        return False, f"DCGM at {address}: {exc}"
    return count > 0, f"DCGM host engine at {address} sees {count} GPU(s)"
