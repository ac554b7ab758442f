"""The composition root: one Exporter builds, enriches, serves and reloads."""

from __future__ import annotations

import threading
import time

import pytest

from exporter.app import Exporter, Pipeline
from exporter.model import Metric, Sample
from exporter.settings import Config, GpuSettings
from exporter.sources.base import Source, collect_now

ENGINE = {"engine": "e1", "engine_type": "vllm", "model": "m"}


class GatedSource(Source):
    """An engine-like source whose first collection waits until the test opens the gate."""

    name = "engine"
    target = "e1"
    timeout_seconds = 5.0

    def __init__(self) -> None:
        self.gate = threading.Event()

    def collect(self, now: float) -> list[Metric]:
        self.gate.wait(timeout=5)
        return [
            Sample("llm_engine_up", ENGINE, 1.0),
            Sample("llm_engine_requests_running", ENGINE, 3.0),
            Sample("llm_engine_process_cpu_seconds_total", {"engine": "e1"}, 12.0),  # as the host source says it
        ]


def exporter_with(source: Source) -> Exporter:
    config = Config(gpu=GpuSettings("none"), interval_seconds=60.0, window_seconds=60.0)
    return Exporter(config, pipeline=Pipeline([source], []))


def test_not_ready_until_the_first_collection_completed() -> None:
    source = GatedSource()
    exporter = exporter_with(source)
    exporter.start()
    try:
        ready, why = exporter.health()
        assert not ready and "first collection" in why
        source.gate.set()
        deadline = time.monotonic() + 5
        while not exporter.health()[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert exporter.health() == (True, "ok")
    finally:
        exporter.stop()
    assert exporter.health() == (False, "collection loop not running")


def test_publish_joins_process_samples_and_adds_reloads_and_the_diagnosis() -> None:
    source = GatedSource()
    source.gate.set()
    clock = [0.0]
    config = Config(gpu=GpuSettings("none"), interval_seconds=60.0, window_seconds=60.0)
    exporter = Exporter(config, pipeline=Pipeline([source], []), clock=lambda: clock[0])
    try:
        while clock[0] <= config.thresholds.level_seconds:  # an engine is judged after a level window
            snapshot = exporter.collect_once()
            clock[0] += 5.0
    finally:
        exporter.stop()
    by_name: dict[str, list[Metric]] = {}
    for metric in snapshot.metrics:
        by_name.setdefault(metric.name, []).append(metric)
    (cpu,) = by_name["llm_engine_process_cpu_seconds_total"]
    assert dict(cpu.labels) == ENGINE
    assert {m.labels["result"] for m in by_name["llm_exporter_config_reloads_total"]} == {"success", "failure"}
    assert by_name["llm_bottleneck_primary"]
    assert exporter.diagnosis()["engines"][0]["engine"] == "e1"
    assert exporter.rendered.body(openmetrics=False, gzipped=False)[0].count(b"llm_engine_up{") == 1


def test_engines_found_after_start_get_process_cpu_and_gpu_attribution() -> None:
    """The host source and attribution ask for the engines through one callable (configured and
    discovered alike), so an engine that appears later is measured like a configured one. The
    'engine' here is a socket this test process listens on."""
    import os
    import socket

    from exporter.attribution import Attributor, GpuRef
    from exporter.settings import EngineTarget, GpuAttribution
    from exporter.sources.host import HostSource

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        found: list[EngineTarget] = []
        host = HostSource(lambda: found, window_seconds=60, rescan_seconds=0)
        clock = [0.0]
        attributor = Attributor(GpuAttribution(pod_resources_socket=""), lambda: found, clock=lambda: clock[0])
        gpu = GpuRef("0", "GPU-0", frozenset({os.getpid()}))
        assert not [m for m in host.collect(0.0) if m.name.startswith("llm_engine_process_")]
        assert attributor.attribute([gpu]) == [{}]

        found.append(EngineTarget(url=f"http://127.0.0.1:{port}/metrics", name="ns/discovered"))
        clock[0] += GpuAttribution().refresh_seconds  # its lookups are cached that long
        threads = [m for m in host.collect(5.0) if m.name == "llm_engine_process_threads"]
        assert [dict(m.labels) for m in threads] == [{"engine": "ns/discovered"}]
        assert attributor.attribute([gpu]) == [{"engine": "ns/discovered"}]


def test_an_engine_that_reports_its_own_process_cpu_has_its_tree_left_unwalked() -> None:
    """The host source skips the process tree of an engine whose last scrape carried its own
    process CPU (publish would drop the host's series for it anyway), and walks it again once
    the engine no longer says so (an answered scrape without prometheus_client's collector)."""
    import socket

    from exporter.settings import EngineTarget
    from exporter.sources.host import HostSource

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        target = EngineTarget(url=f"http://127.0.0.1:{listener.getsockname()[1]}/metrics", name="e1")
        reporting: set[str] = {"e1"}
        host = HostSource([target], window_seconds=60, rescan_seconds=0, reporting_own_cpu=lambda: set(reporting))
        assert not [m for m in host.collect(0.0) if m.name.startswith("llm_engine_process_")]
        reporting.clear()
        threads = [m for m in host.collect(5.0) if m.name == "llm_engine_process_threads"]
        assert [dict(m.labels) for m in threads] == [{"engine": "e1"}]
        reporting.add("e1")
        assert not [m for m in host.collect(10.0) if m.name.startswith("llm_engine_process_")]


def test_an_engine_source_that_fails_keeps_its_process_cpu_claim() -> None:
    """One series, one counter: a timed-out scrape must not hand the engine's process-CPU series to
    the host's tree reading (another counter) for a round, which read as two resets a gap."""
    from exporter.settings import EngineTarget
    from exporter.sources.base import SourceError
    from exporter.sources.engine import EngineSource

    source = EngineSource(EngineTarget(url="http://127.0.0.1:9/metrics", name="e1", type="vllm"), 60.0)
    source.reports_process_cpu = True  # as after a scrape that carried it
    try:
        with pytest.raises(SourceError):
            collect_now(source, 0.0)
    finally:
        source.close()
    assert source.reports_process_cpu is True


class AnsweringSource(GatedSource):
    """A GatedSource that says when its collection has returned its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = threading.Event()

    def collect(self, now: float) -> list[Metric]:
        try:
            return super().collect(now)
        finally:
            self.answered.set()


class SlowSource(Source):
    """A node-wide source that returns only when the test lets it (within its 30 s timeout)."""

    name = "rdma"
    timeout_seconds = 30.0

    def __init__(self) -> None:
        self.gate = threading.Event()

    def collect(self, now: float) -> list[Metric]:
        self.gate.wait(timeout=30)
        return [Sample("llm_rdma_port_up", {"device": "mlx5_0", "port": "1"}, 1.0)]


def test_the_first_snapshot_does_not_wait_for_the_slowest_source() -> None:
    """#17.10: an engine that answers at once is served while a slow source still runs; readiness
    still waits for the first complete collection."""
    fast, slow = GatedSource(), SlowSource()
    fast.gate.set()
    config = Config(gpu=GpuSettings("none"), interval_seconds=60.0, window_seconds=60.0)
    exporter = Exporter(config, pipeline=Pipeline([fast, slow], []))
    exporter.start()
    try:
        deadline = time.monotonic() + 20
        body = b""
        while b"llm_engine_up{" not in body and time.monotonic() < deadline:
            time.sleep(0.02)
            body = exporter.rendered.body(openmetrics=False, gzipped=False)[0]
        assert b"llm_engine_up{" in body, "no engine series while the slow source runs"
        assert b'llm_exporter_source_up{source="engine",target="e1"} 1.0' in body
        assert b"llm_rdma_port_up" not in body and b'source="rdma"' not in body  # pending: absent
        assert exporter.latest is not None and exporter.latest.pending == (("rdma", ""),)
        assert exporter.health() == (False, "first collection in progress")
        slow.gate.set()
        while not exporter.health()[0] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert exporter.health() == (True, "ok")
        body = exporter.rendered.body(openmetrics=False, gzipped=False)[0]
        assert b"llm_rdma_port_up" in body and b"llm_engine_up{" in body
        assert exporter.latest.complete and exporter.latest.statuses[1].up
        assert exporter.latest.error_counts == {}
    finally:
        slow.gate.set()
        exporter.stop()


def test_each_engine_is_diagnosed_at_the_time_it_answered_not_when_the_round_ended() -> None:
    """A round lasts as long as its slowest source: the snapshot keeps when each source answered,
    and the engine's point in the diagnosis carries that time, so its counter rates are not off
    by the wait for the others (exporter.diagnosis.Diagnoser.update)."""
    fast, slow = AnsweringSource(), SlowSource()
    fast.gate.set()
    config = Config(gpu=GpuSettings("none"), interval_seconds=60.0, window_seconds=60.0)
    exporter = Exporter(config, pipeline=Pipeline([fast, slow], []))
    opened: list[float] = []

    def open_after_the_engine_answered() -> None:
        # Well after the engine's answer: the loop stamps it as its collect returns.
        fast.answered.wait(timeout=30)
        time.sleep(1.0)
        opened.append(time.monotonic())
        slow.gate.set()

    opener = threading.Thread(target=open_after_the_engine_answered, daemon=True)
    opener.start()
    try:
        snapshot = exporter.collect_once()
        after = time.monotonic()
    finally:
        slow.gate.set()
        exporter.stop()
        opener.join(timeout=30)
    engine_at, rdma_at = snapshot.answered_at[("engine", "e1")], snapshot.answered_at[("rdma", "")]
    assert engine_at < opened[0] <= rdma_at <= after
    (stamped,) = exporter.diagnoser._histories[("e1", "vllm", "m")].times
    assert stamped == engine_at
