"""The host source in-process: CPU and memory from psutil and scripted readings, and no process
series for an engine on another machine. The process tree of a real local engine (a listening
process with a child, started by the test) is tests/integration/test_host_process_tree.py."""

from __future__ import annotations

import psutil
import pytest

from exporter.settings import EngineTarget
from exporter.sources.host import CpuTimes, HostSource
from tests.support import sample_value

# --- CPU and memory ----------------------------------------------------------------------------


class FakeCpuTimes:
    """Readings a test scripts: psutil's real counters cannot be steered to exact values."""

    def __init__(self, *readings: list[tuple[float, float]]) -> None:
        self.readings = list(readings)

    def __call__(self) -> list[CpuTimes]:
        return [CpuTimes(busy, total) for busy, total in self.readings.pop(0)]


def test_cpu_utilization_is_the_busy_share_of_the_window() -> None:
    cpu = FakeCpuTimes([(100.0, 1000.0), (50.0, 1000.0)], [(104.0, 1005.0), (51.0, 1005.0)])
    source = HostSource([], window_seconds=60, cpu_times=cpu)
    first = source.collect(0.0)
    assert sample_value(first, "llm_host_cpu_utilization_ratio", cpu="0") is None  # no window yet
    second = source.collect(5.0)
    assert sample_value(second, "llm_host_cpu_utilization_ratio", cpu="0") == pytest.approx(4 / 5)
    assert sample_value(second, "llm_host_cpu_utilization_ratio", cpu="1") == pytest.approx(1 / 5)
    assert sample_value(second, "llm_host_cpu_overall_utilization_ratio") == pytest.approx(5 / 10)


def test_once_reports_the_average_since_boot() -> None:
    cpu = FakeCpuTimes([(250.0, 1000.0), (750.0, 1000.0)])
    metrics = HostSource([], window_seconds=60, lifetime_baseline=True, cpu_times=cpu).collect(0.0)
    assert sample_value(metrics, "llm_host_cpu_utilization_ratio", cpu="0") == pytest.approx(0.25)
    assert sample_value(metrics, "llm_host_cpu_utilization_ratio", cpu="1") == pytest.approx(0.75)
    assert sample_value(metrics, "llm_host_cpu_overall_utilization_ratio") == pytest.approx(0.5)


def test_real_cpu_and_memory_readings() -> None:
    metrics = HostSource([], window_seconds=60, lifetime_baseline=True).collect(0.0)
    per_cpu = [m for m in metrics if m.name == "llm_host_cpu_utilization_ratio"]
    assert len(per_cpu) == len(psutil.cpu_times(percpu=True))
    assert all(0.0 <= m.value <= 1.0 for m in per_cpu)
    total = sample_value(metrics, "llm_host_memory_total_bytes")
    used = sample_value(metrics, "llm_host_memory_used_bytes")
    assert total == psutil.virtual_memory().total
    assert used is not None and 0 < used < total


def test_a_remote_engine_has_no_process_series() -> None:
    # 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
    metrics = HostSource([EngineTarget(url="http://192.0.2.10:8000/metrics", name="e1")], window_seconds=60).collect(
        0.0
    )
    assert not [m for m in metrics if m.name.startswith("llm_engine_process_")]
