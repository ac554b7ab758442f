"""The host's reading of engine processes: a listener's start time and cgroup are an engine's only
where the listener is that engine's alone; one serving several engines (the simulator serving a
node's replicas at paths of one port, a proxy) is none of theirs."""

from __future__ import annotations

import os

import psutil

from exporter.engine_processes import EngineProcess
from exporter.settings import EngineTarget
from exporter.sources.node.host_pressure import HostPressureSource


class Found:
    def __init__(self, processes: dict[str, EngineProcess]) -> None:
        self.processes = processes

    def lookup(self) -> dict[str, EngineProcess]:
        return self.processes


def starts(processes: dict[str, EngineProcess]) -> dict[str, float]:
    source = HostPressureSource([EngineTarget(name=n, url=f"http://127.0.0.1:1/{n}") for n in processes])
    source._processes = Found(processes)  # type: ignore[assignment]
    return {
        m.labels["engine"]: m.value for m in source.collect(0.0) if m.name == "llm_engine_process_start_time_seconds"
    }


def process(pid: int) -> EngineProcess:
    return EngineProcess(frozenset({pid}), frozenset({pid}))


def test_an_engine_s_own_listener_gives_its_start_and_a_shared_listener_gives_none() -> None:
    own, shared = os.getppid(), os.getpid()
    found = starts({"alone": process(own), "sim-0": process(shared), "sim-1": process(shared)})
    assert found == {"alone": psutil.Process(own).create_time()}
