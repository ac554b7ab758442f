"""The node's own sources: each module in this package registers itself here when imported.

A node source reads the machine rather than a configured target (the links' trained state and the
fabric's configuration, the host's pressure on the engines). `NODE_SOURCES.register(NodeSource(...))`
at the bottom of its module is the only place it is named; the package imports every module of
itself, and the composition root builds every registered one that has something to read here
(node_exporter's registerCollector: adding one is adding its file, docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exporter.registry import Registry
from exporter.settings import EngineTarget, HealthSettings
from exporter.sources.base import Source


@dataclass(frozen=True)
class NodeContext:
    """What a node source may be built from: the records it reads, never the whole configuration."""

    #: the sysfs root (a built tree in tests)
    sysfs: str
    health: HealthSettings
    #: every engine now, configured and discovered
    targets: Callable[[], Sequence[EngineTarget]]


@dataclass(frozen=True)
class NodeSource:
    """One node source: its name (the source's `source` label) and how to build it; `build`
    returns None where the node has nothing for it to read (no RDMA devices, say)."""

    name: str
    build: Callable[[NodeContext], Source | None]


NODE_SOURCES: Registry[NodeSource] = Registry("node source", lambda entry: entry.name)
