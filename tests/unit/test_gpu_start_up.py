"""A vendor library's start-up (load, initialise, find the GPUs) gets its own deadline: on a loaded
node it takes seconds, and a `once` run or the first round must not report the GPUs down for it;
once the library is up, a read is bounded by the source's `timeout_seconds` again."""

from __future__ import annotations

import time

from exporter.app import Exporter, Pipeline
from exporter.model import Metric, Sample
from exporter.settings import Config, GpuSettings
from exporter.sources.gpu_common import START_UP_TIMEOUT_SECONDS, LibraryGpuSource

#: far past the test source's timeout (plus the loop's grace), far inside the start-up deadline
SLOW_SECONDS = 0.5


class SlowLibrary:
    """A reader whose every call takes SLOW_SECONDS; `started` after the first returns."""

    def __init__(self) -> None:
        self.started = False

    def read(self) -> list[Metric]:
        time.sleep(SLOW_SECONDS)
        self.started = True
        return [Sample("llm_gpu_utilization_ratio", {"gpu": "0"}, 0.5)]


class SlowLibrarySource(LibraryGpuSource[SlowLibrary]):
    name = "nvml"

    def __init__(self) -> None:
        self._reader = SlowLibrary()
        self.timeout_seconds = 0.05

    def collect(self, now: float) -> list[Metric]:
        return self._reader.read()


def test_a_slow_start_up_is_waited_for_and_a_slow_read_afterwards_is_not() -> None:
    assert START_UP_TIMEOUT_SECONDS > 10 * SLOW_SECONDS
    source = SlowLibrarySource()
    assert source.deadline_seconds() == START_UP_TIMEOUT_SECONDS
    config = Config(gpu=GpuSettings("none"), interval_seconds=60.0, window_seconds=60.0)
    exporter = Exporter(config, pipeline=Pipeline([source], []))
    try:
        first = exporter.collect_once()
        (status,) = first.statuses
        assert status.up, status.error
        assert any(m.name == "llm_gpu_utilization_ratio" for m in first.metrics)
        assert source.deadline_seconds() == source.timeout_seconds
        second = exporter.collect_once()
        (status,) = second.statuses
        assert not status.up and status.error == "timeout"
        assert status.message == "still running after 0.05s"
    finally:
        exporter.stop()
