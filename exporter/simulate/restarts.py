"""A replica restarting mid-scenario: a phase's `restart: {replica: 7, load_seconds: 40}`.

At the phase's start the replica's process is replaced (the requests it held are lost, its
counters start again from zero, its process start time is the phase's start), then it loads its
model for `load_seconds`: out of the router's pool, its `/metrics` not answering. After that it
serves again, cold, which the exporter reads as warming up (issue #45, docs/health.md).

On the wire the exporter can only tell "loading" from "down" by a process of the replica's own
that has started and does not answer yet, as vLLM binds its port before it loads. A node served
live gives each restarting replica such a process (`exporter/simulate/replica_process.py`): the
host source finds it listening on the replica's port and reads its start time. Fast-forwarded,
the loading replica is only down (one process serves every replica).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter import validation as v
from exporter.validation import ConfigError

RESTART_KEYS = ("replica", "load_seconds")


@dataclass(frozen=True)
class ReplicaRestart:
    #: the replica's index on the node (replica groups in order, each `count` replicas)
    replica: int
    #: how long the new process loads before it answers
    load_seconds: float


def parse_restart(value: Any, where: str, replicas: int, phase: int, disaggregation: object) -> ReplicaRestart | None:
    """Phase number `phase`'s `restart`, checked against the node's `replicas` (None when the phase
    has none). The first phase is the node's steady state; a disaggregated pair restarts as a pair,
    which the P/D router does not model."""
    if value is None:
        return None
    if phase == 0 or disaggregation is not None:
        why = "the first phase is the node's steady state" if phase == 0 else "not in a disaggregated scenario"
        raise ConfigError(where, f"a replica restarts in a later phase of a monolithic node ({why})")
    data = v.section(value, where, RESTART_KEYS)
    replica = v.integer(v.required(data.get("replica"), f"{where}.replica"), f"{where}.replica", minimum=0)
    if replica >= replicas:
        raise ConfigError(f"{where}.replica", f"the node has {replicas} replicas (0 to {replicas - 1})")
    load = v.non_negative(data.get("load_seconds", 30.0), f"{where}.load_seconds")
    return ReplicaRestart(replica, load)
