"""One capture through the engine's endpoint (capture.take) against a loopback stand-in of vLLM's
routes: what is held around it, what is sent when its wait is cut short, and its index entry."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter.profile.capture import INDEX, ProfilingOff, record, take
from exporter.settings import EngineTarget
from tests.raw_server import RawServer, ok


def releasing(released: list[bool]):
    """A hold (what `take` is given as `around`) that notes its release in `released`."""

    @contextmanager
    def held():
        try:
            yield
        finally:
            released.append(True)

    return held


TRACE = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 1000, "tid": 1}]}


@pytest.fixture
def vllm():
    server = RawServer(lambda n: ok(b"{}"))
    yield server
    server.close()


def paths(server: RawServer) -> list[str]:
    return [path for head in server.heads for path in ("/start_profile", "/stop_profile") if path.encode() in head]


def test_the_hold_spans_the_capture_until_the_trace_is_written(vllm: RawServer, tmp_path: Path) -> None:
    events: list[str] = []

    @contextmanager
    def held():
        events.append("held")
        yield
        events.append(f"released after {paths(vllm)}")

    def sleep(seconds: float) -> None:
        if seconds == 3.0:  # the capture's own wait: the engine writes its trace after it
            events.append(f"profiling after {paths(vllm)}")
            (tmp_path / "rank0.pt.trace.json").write_text(json.dumps(TRACE))
        elif events[-1] != "waiting for the trace":  # wait_for_traces polls until its size holds
            events.append("waiting for the trace")

    target = EngineTarget(vllm.url(), "e0", "vllm")
    capture = take(target, 3.0, str(tmp_path), around=held, sleep=sleep)
    assert events == [
        "held",
        "profiling after ['/start_profile']",
        "waiting for the trace",
        "released after ['/start_profile', '/stop_profile']",
    ]
    assert capture.traces == [str(tmp_path / "rank0.pt.trace.json")]
    assert capture.summary is not None and capture.summary.top[0][0] == "gemm"


def test_a_wait_cut_short_still_stops_the_profiler_and_releases_the_hold(vllm: RawServer, tmp_path: Path) -> None:
    released: list[bool] = []
    held = releasing(released)

    def stopping(seconds: float) -> None:
        raise InterruptedError("the exporter is stopping")

    with pytest.raises(InterruptedError):
        take(EngineTarget(vllm.url(), "e0", "vllm"), 3.0, str(tmp_path), around=held, sleep=stopping)
    assert paths(vllm) == ["/start_profile", "/stop_profile"]
    assert released == [True]


def test_routes_absent_are_profiling_off_and_the_hold_is_released(tmp_path: Path) -> None:
    server = RawServer(lambda n: b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    released: list[bool] = []
    held = releasing(released)

    try:
        with pytest.raises(ProfilingOff, match="not launched with profiling on"):
            take(EngineTarget(server.url(), "e0", "vllm"), 3.0, str(tmp_path), around=held, sleep=lambda s: None)
    finally:
        server.close()
    assert released == [True]


def test_a_capture_is_indexed_beside_its_traces_with_its_context(vllm: RawServer, tmp_path: Path) -> None:
    def sleep(seconds: float) -> None:
        (tmp_path / "rank0.pt.trace.json").write_text(json.dumps(TRACE))

    capture = take(EngineTarget(vllm.url(), "e0", "vllm"), 1.0, str(tmp_path), sleep=sleep)
    record(capture)
    record(capture, trigger="auto", stage="queueing")
    first, second = (json.loads(line) for line in (tmp_path / INDEX).read_text().splitlines())
    assert first == capture.as_json()
    assert second == {**capture.as_json(), "trigger": "auto", "stage": "queueing"}
