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


def test_the_node_s_cpu_wait_is_read_from_its_pressure_file_every_collection(tmp_path) -> None:
    pressure = tmp_path / "pressure"
    pressure.mkdir()
    cpu = pressure / "cpu"
    source = HostPressureSource([], refresh_seconds=30.0, proc=str(tmp_path))

    def waited(now: float) -> list[float]:
        return [m.value for m in source.collect(now) if m.name == "llm_host_cpu_waiting_seconds_total"]

    cpu.write_text(
        "some avg10=0.02 avg60=0.77 avg300=0.37 total=1617198\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert waited(0.0) == [1.617198]
    cpu.write_text(
        "some avg10=1.00 avg60=0.90 avg300=0.50 total=2617198\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert waited(1.0) == [2.617198], "read each collection, not every refresh_seconds"
    cpu.write_text("some avg10=garbage\n")
    assert waited(2.0) == []
    cpu.unlink()
    assert waited(3.0) == [], "a kernel without PSI: no series"
