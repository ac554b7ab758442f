"""Automatic captures (exporter/profile/auto.py and their composition in exporter/app.py): when one
starts, what holds one back, what is recorded, shown in /diagnosis and exported, and the stage
alerts that name its trace. A fake capture function stands in for the engine; the clock is the
test's; each capture's thread is joined, never waited for by time."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.app import Exporter, Pipeline
from exporter.model import Metric, Sample
from exporter.profile.auto import AutoProfiler
from exporter.profile.capture import INDEX, Capture, ProfilingOff
from exporter.profile.summary import TraceSummary
from exporter.settings import Config, EngineTarget, GpuSettings, ProfileSettings
from exporter.sources.base import Source
from tests.support import REPO

TARGETS = (EngineTarget("http://127.0.0.1:8000/metrics", "e0", "vllm"),)
ON = ProfileSettings(auto=True, after_seconds=300.0, min_interval_seconds=3600.0, seconds=5.0)


class FakeCapture:
    """take()'s signature: records each call; answers with `outcome` (a Capture made in `directory`,
    or an exception raised); `gate`, when given, holds the capture until the test opens it."""

    def __init__(self, directory: Path, outcome: Exception | None = None, gate: threading.Event | None = None):
        self.directory, self.outcome, self.gate = directory, outcome, gate
        self.calls: list[tuple[str, float, str | None]] = []
        self.held_around: list[bool] = []

    def __call__(self, target: EngineTarget, seconds: float, directory: str | None, around: Any, sleep: Any) -> Capture:
        self.calls.append((target.name, seconds, directory))
        with around():
            if self.gate is not None:
                self.gate.wait(10)
            if self.outcome is not None:
                raise self.outcome
        trace = self.directory / "rank0.pt.trace.json.gz"
        summary = TraceSummary(str(trace), 12, "gpu kernels", 0.004, [("gemm", 0.003), ("nccl:all_reduce", 0.001)])
        return Capture(target.name, 1_700_000_000.0, seconds, str(self.directory), [str(trace)], summary)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def profiler(settings: ProfileSettings, capture: FakeCapture, clock: Clock, **kwargs: Any) -> AutoProfiler:
    return AutoProfiler(settings, capture=capture, clock=clock, wall_clock=lambda: 1_700_000_000.0, **kwargs)


def hold(auto: AutoProfiler, clock: Clock, stage: str, until: float, step: float = 5.0) -> None:
    """Rounds every `step` seconds up to `until`, e0's primary stage `stage` throughout."""
    while clock.now <= until:
        auto.observe([("e0", stage)], lambda: TARGETS)
        auto.join(10)
        clock.now += step


def test_off_by_default_nothing_is_captured(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    auto = profiler(ProfileSettings(), capture, clock)
    hold(auto, clock, "kv_cache_capacity", until=10_000)
    assert capture.calls == [] and auto.metrics() == [] and auto.record_of("e0") is None


def test_a_capture_starts_once_a_stage_has_held_for_after_seconds(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    auto = profiler(ON, capture, clock)
    hold(auto, clock, "queueing", until=295)
    assert capture.calls == []
    hold(auto, clock, "queueing", until=300)
    assert capture.calls == [("e0", 5.0, None)]


def test_a_new_primary_stage_starts_its_own_wait(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    auto = profiler(ON, capture, clock)
    hold(auto, clock, "queueing", until=200)
    hold(auto, clock, "kv_cache_capacity", until=450)  # from 205: 245 s so far
    hold(auto, clock, "none", until=460)
    hold(auto, clock, "kv_cache_capacity", until=755)  # from 465: 290 s
    assert capture.calls == []
    hold(auto, clock, "kv_cache_capacity", until=765)
    assert len(capture.calls) == 1 and auto.record_of("e0").stage == "kv_cache_capacity"


def test_only_the_configured_stages_start_one(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    auto = profiler(ProfileSettings(auto=True, after_seconds=0.0, stages=("decode_memory_bandwidth",)), capture, clock)
    hold(auto, clock, "queueing", until=600)
    assert capture.calls == []
    hold(auto, clock, "decode_memory_bandwidth", until=605)
    assert len(capture.calls) == 1


def test_one_capture_in_flight_per_engine(tmp_path: Path) -> None:
    gate = threading.Event()
    capture, clock = FakeCapture(tmp_path, gate=gate), Clock()
    auto = profiler(ProfileSettings(auto=True, after_seconds=0.0, min_interval_seconds=60.0), capture, clock)
    for _ in range(40):  # 200 s of rounds, past the interval, while the first capture runs
        auto.observe([("e0", "queueing")], lambda: TARGETS)
        clock.now += 5.0
    assert len(capture.calls) == 1
    gate.set()
    auto.join(10)
    auto.observe([("e0", "queueing")], lambda: TARGETS)
    auto.join(10)
    assert len(capture.calls) == 2


@pytest.mark.parametrize(
    "outcome, result",
    [(None, "ok"), (ProfilingOff("e0: /start_profile answers 404: launch vLLM with --profiler-config"), "off"),
     (ConnectionError("refused"), "failed")],
)  # fmt: skip
def test_none_again_within_the_interval_whatever_the_outcome(tmp_path: Path, outcome, result) -> None:
    capture, clock = FakeCapture(tmp_path, outcome), Clock()
    auto = profiler(ON, capture, clock)
    hold(auto, clock, "queueing", until=3_895)  # the capture at 300; the interval ends at 3,900
    assert len(capture.calls) == 1 and auto.record_of("e0").result == result
    hold(auto, clock, "queueing", until=3_900)
    assert len(capture.calls) == 2


def test_profiling_off_is_recorded_with_its_message_and_counted(tmp_path: Path) -> None:
    off = ProfilingOff(
        "e0: http://127.0.0.1:8000/start_profile answers 404: the engine was not launched with profiling on"
    )
    capture, clock = FakeCapture(tmp_path, off), Clock()
    auto = profiler(ON, capture, clock)
    hold(auto, clock, "kv_cache_capacity", until=1_000)
    document = auto.record_of("e0").as_json()
    assert document["result"] == "off" and document["message"] == str(off)
    assert document["directory"] is None and document["traces"] == []
    counts = {m.labels["result"]: m.value for m in auto.metrics() if m.name == "llm_engine_profile_captures_total"}
    assert counts == {"ok": 0.0, "off": 1.0, "failed": 0.0}
    assert not [m for m in auto.metrics() if m.name == "llm_engine_profile_info"]  # no trace to name
    assert not (tmp_path / INDEX).exists()


def test_a_capture_is_recorded_indexed_and_named_by_its_info_series(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    auto = profiler(ON, capture, clock)
    hold(auto, clock, "decode_memory_bandwidth", until=300)
    document = auto.record_of("e0").as_json()
    trace = str(tmp_path / "rank0.pt.trace.json.gz")
    assert document["result"] == "ok" and document["stage"] == "decode_memory_bandwidth"
    assert document["started_at"] == "2023-11-14T22:13:20+00:00"
    assert (document["directory"], document["traces"], document["trace"]) == (str(tmp_path), [trace], trace)
    assert document["summary"][0].startswith(f"{trace}: 12 events") and "gemm" in document["summary"][1]
    (indexed,) = (json.loads(line) for line in (tmp_path / INDEX).read_text().splitlines())
    assert (indexed["trigger"], indexed["stage"], indexed["traces"]) == ("auto", "decode_memory_bandwidth", [trace])
    (info,) = [m for m in auto.metrics() if m.name == "llm_engine_profile_info"]
    assert info.labels == {
        "engine": "e0",
        "stage": "decode_memory_bandwidth",
        "directory": str(tmp_path),
        "trace": trace,
    }


def test_the_capture_is_taken_inside_the_hold(tmp_path: Path) -> None:
    capture, clock = FakeCapture(tmp_path), Clock()
    events: list[str] = []

    class Hold:
        def __enter__(self) -> None:
            events.append("paused")

        def __exit__(self, *exc: object) -> None:
            events.append("resumed")

    auto = profiler(ProfileSettings(auto=True, after_seconds=0.0), capture, clock, around=Hold)
    hold(auto, clock, "queueing", until=0)
    assert events == ["paused", "resumed"] and len(capture.calls) == 1


def test_stopping_cuts_a_captures_wait_short_and_starts_no_other(tmp_path: Path) -> None:
    waiting = threading.Event()

    def capture(target: EngineTarget, seconds: float, directory: str | None, around: Any, sleep: Any) -> Capture:
        waiting.set()
        sleep(3600.0)  # the engine profiling: only the stop ends this
        raise AssertionError("not reached")

    clock = Clock()
    auto = AutoProfiler(ProfileSettings(auto=True, after_seconds=0.0), capture=capture, clock=clock)
    auto.observe([("e0", "queueing")], lambda: TARGETS)
    assert waiting.wait(10)
    auto.stop()
    auto.join(10)
    record = auto.record_of("e0")
    assert record is not None and record.result == "failed" and "stopping" in record.message
    clock.now = 1e6
    auto.observe([("e1", "queueing")], lambda: (EngineTarget("http://127.0.0.1:8001/metrics", "e1", "vllm"),))
    assert auto.record_of("e1") is None


# -- composition: Exporter.publish feeds it, /diagnosis and /metrics show it ----------------------

ENGINE = {"engine": "e0", "engine_type": "vllm", "model": "m"}


class SaturatedKvSource(Source):
    """An engine whose KV cache is full and preempting: kv_cache_capacity, round after round."""

    name = "engine"
    target = "e0"
    timeout_seconds = 5.0

    def __init__(self) -> None:
        self.rounds = 0

    def collect(self, now: float) -> list[Metric]:
        self.rounds += 1
        return [
            Sample("llm_engine_up", ENGINE, 1.0),
            Sample("llm_engine_requests_running", ENGINE, 4.0),
            Sample("llm_engine_requests_waiting", ENGINE, 20.0),
            Sample("llm_engine_kv_cache_usage_ratio", ENGINE, 0.97),
            Sample("llm_engine_preemptions_total", ENGINE, 2.0 * self.rounds),
        ]


def run_exporter(settings: ProfileSettings, capture: Callable[..., Capture], seconds: float) -> Exporter:
    clock = Clock()
    config = Config(gpu=GpuSettings("none"), interval_seconds=5.0, window_seconds=60.0, profile=settings)
    pipeline = Pipeline([SaturatedKvSource()], [], lambda: TARGETS)
    exporter = Exporter(config, pipeline=pipeline, clock=clock, profile_capture=capture)
    try:
        while clock.now <= seconds:
            exporter.collect_once()
            exporter.profiler.join(10)
            clock.now += 5.0
    finally:
        exporter.stop()
    return exporter


def test_the_exporter_captures_a_held_stage_and_shows_it_beside_the_verdict(tmp_path: Path) -> None:
    capture = FakeCapture(tmp_path)
    exporter = run_exporter(ProfileSettings(auto=True, after_seconds=60.0), capture, seconds=200)
    assert capture.calls == [("e0", 10.0, None)]
    (engine,) = exporter.diagnosis()["engines"]
    assert engine["primary"] == "kv_cache_capacity"
    assert engine["profile"]["stage"] == "kv_cache_capacity" and engine["profile"]["result"] == "ok"
    body = exporter.rendered.body(openmetrics=False, gzipped=False)[0].decode()
    assert 'llm_engine_profile_captures_total{engine="e0",result="ok"} 1' in body
    (info,) = [line for line in body.splitlines() if line.startswith("llm_engine_profile_info{")]
    assert f'directory="{tmp_path}",engine="e0",stage="kv_cache_capacity",trace="{tmp_path}/rank0' in info


def test_the_exporter_captures_nothing_by_default(tmp_path: Path) -> None:
    capture = FakeCapture(tmp_path)
    exporter = run_exporter(ProfileSettings(), capture, seconds=600)
    assert capture.calls == []
    (engine,) = exporter.diagnosis()["engines"]
    assert engine["primary"] == "kv_cache_capacity" and "profile" not in engine
    assert b"llm_engine_profile" not in exporter.rendered.body(openmetrics=False, gzipped=False)[0]


def test_every_engine_stage_alert_names_the_last_profile() -> None:
    rules = yaml.safe_load((REPO / "alerts/generated/llm-bottleneck.rules.yaml").read_text(encoding="utf-8"))
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    staged = [rule for rule in alerts if "stage" in rule["labels"]]
    assert staged
    for rule in staged:
        description = rule["annotations"]["description"]
        assert "llm_engine_profile_info{" in description and "engine=%q}` " in description, rule["alert"]
        assert 'label "trace"' in description, rule["alert"]
    gateway = [rule for rule in alerts if rule["alert"] == "LLMIngressLatencyHigh"]
    assert gateway and "llm_engine_profile_info" not in gateway[0]["annotations"]["description"]
