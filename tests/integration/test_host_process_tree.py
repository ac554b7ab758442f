"""The host source on a real engine process tree, found from the port the engine listens on: a
listening process with a real child, started by the test (the in-process host source tests are
tests/unit/test_host_source.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from exporter.app import build_pipeline, join_process_samples
from exporter.model import Sample
from exporter.settings import Config, EngineTarget, GpuSettings
from exporter.sources.host import HostSource
from tests.support import CONDITION_BOUND_SECONDS, free_port, sample_value, stop_group, wait_until

pytestmark = pytest.mark.integration

# The host source labels process samples by engine alone; the composition root joins them.
ENGINE_LABELS = {"engine": "e1"}

# A stand-in engine: listens on a port, runs two idle threads and a thread that reaps its child,
# and starts a child that burns 0.6 s of CPU, then idles (the assertions ask for half a second:
# /proc counts CPU in clock ticks, which can read a hundredth below what the child measured). It
# reports the child's pid and when the burn is done through files in `workdir`.
_ENGINE_SCRIPT = textwrap.dedent("""
    import socket, subprocess, sys, threading, time
    port, workdir = int(sys.argv[1]), sys.argv[2]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    for _ in range(2):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    child = subprocess.Popen([sys.executable, "-c",
        "import time, sys\\n"
        "while time.process_time() < 0.6: pass\\n"
        "open(sys.argv[1] + '/burned', 'w').close()\\n"
        "time.sleep(3600)\\n", workdir])
    open(workdir + "/child_pid", "w").write(str(child.pid))
    threading.Thread(target=child.wait, daemon=True).start()
    time.sleep(3600)
""")


# The child's CPU, plus two interpreters starting, took over 20 s of wall time
# once in a CI run with the main and vLLM tiers side by side; what is waited for is the CPU.
def _wait_for(path: Path) -> None:
    wait_until(path.exists, f"{path} to appear")


def _start_engine(port: int, workdir: Path) -> subprocess.Popen:
    """The stand-in in a session of its own: stop_group ends its child too, a failed test included."""
    return subprocess.Popen([sys.executable, "-c", _ENGINE_SCRIPT, str(port), str(workdir)], start_new_session=True)


def _wait_listening(process: subprocess.Popen, port: int) -> None:
    def listening() -> bool:
        connections = psutil.Process(process.pid).net_connections()
        return any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in connections)

    wait_until(listening, "the stand-in engine listening")


@pytest.fixture
def engine_process(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen, Path]]:
    port = free_port()
    process = _start_engine(port, tmp_path)
    try:
        _wait_for(tmp_path / "burned")
        _wait_listening(process, port)
        yield port, process, tmp_path
    finally:
        stop_group(process)


def _target(port: int, host: str = "127.0.0.1") -> EngineTarget:
    return EngineTarget(url=f"http://{host}:{port}/metrics", name="e1")


# --- engine process trees ----------------------------------------------------------------------


def test_engine_process_tree_cpu_and_threads(engine_process: tuple[int, subprocess.Popen, Path]) -> None:
    port, _, _ = engine_process
    metrics = HostSource([_target(port)], window_seconds=60).collect(0.0)
    cpu = sample_value(metrics, "llm_engine_process_cpu_seconds_total", **ENGINE_LABELS)
    assert cpu is not None and cpu >= 0.5  # the child burned half a second
    # main + 2 idle + 1 reaper thread in the listener, 1 in the child
    assert sample_value(metrics, "llm_engine_process_threads", **ENGINE_LABELS) == 5


def test_cpu_of_an_exited_child_stays_counted(engine_process: tuple[int, subprocess.Popen, Path]) -> None:
    port, _, workdir = engine_process
    source = HostSource([_target(port)], window_seconds=60)
    before = sample_value(source.collect(0.0), "llm_engine_process_cpu_seconds_total", **ENGINE_LABELS)
    child = psutil.Process(int((workdir / "child_pid").read_text()))
    child.kill()
    child.wait(timeout=CONDITION_BOUND_SECONDS)  # the listener's reaper thread collects it
    deadline = time.monotonic() + CONDITION_BOUND_SECONDS
    while True:
        after = source.collect(1.0)
        if sample_value(after, "llm_engine_process_threads", **ENGINE_LABELS) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert sample_value(after, "llm_engine_process_threads", **ENGINE_LABELS) == 3
    assert sample_value(after, "llm_engine_process_cpu_seconds_total", **ENGINE_LABELS) >= before >= 0.5


def test_engine_process_gone_is_omitted(engine_process: tuple[int, subprocess.Popen, Path]) -> None:
    port, process, _ = engine_process
    source = HostSource([_target(port)], window_seconds=60, rescan_seconds=0)
    assert sample_value(source.collect(0.0), "llm_engine_process_threads", **ENGINE_LABELS) is not None
    process.kill()
    process.wait()
    metrics = source.collect(1.0)
    assert not [m for m in metrics if m.name.startswith("llm_engine_process_")]
    assert sample_value(metrics, "llm_host_memory_total_bytes") is not None


def test_an_engine_nobody_listens_for_yet_is_found_on_a_later_lookup(tmp_path: Path) -> None:
    port = free_port()
    clock = [0.0]
    source = HostSource([_target(port)], window_seconds=60, rescan_seconds=30, clock=lambda: clock[0])
    assert not [m for m in source.collect(0.0) if m.name.startswith("llm_engine_process_")]
    process = _start_engine(port, tmp_path)
    try:
        _wait_listening(process, port)  # a lookup now would find it
        clock[0] = 10.0  # inside the rescan interval: not looked up again
        assert sample_value(source.collect(10.0), "llm_engine_process_threads", **ENGINE_LABELS) is None
        clock[0] = 31.0
        deadline = time.monotonic() + CONDITION_BOUND_SECONDS
        while sample_value(metrics := source.collect(31.0), "llm_engine_process_threads", **ENGINE_LABELS) is None:
            assert time.monotonic() < deadline, "engine process never found"
            clock[0] += 31.0
            time.sleep(0.1)
        assert sample_value(metrics, "llm_engine_process_cpu_seconds_total", **ENGINE_LABELS) is not None
    finally:
        stop_group(process)


def test_an_owner_psutil_cannot_see_is_omitted(engine_process: tuple[int, subprocess.Popen, Path]) -> None:
    """The lookup runs as `nobody` in a forked child; the listener belongs to the test's user."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the lookup as another user")
    port, _, _ = engine_process
    source = HostSource([_target(port)], window_seconds=60)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            names = sorted({m.name for m in source.collect(0.0)})
            os.write(write_fd, json.dumps({"euid": os.geteuid(), "names": names}).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        result = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert result["euid"] == 65534
    assert "llm_host_memory_total_bytes" in result["names"]
    assert not [n for n in result["names"] if n.startswith("llm_engine_process_")]


def test_process_series_get_the_engine_sources_labels_and_yield_to_its_own(
    engine_process: tuple[int, subprocess.Popen, Path],
) -> None:
    port, _, _ = engine_process
    target = EngineTarget(url=f"http://127.0.0.1:{port}/metrics", name="e1", type="vllm", model="tiny")
    sources = build_pipeline(Config(gpu=GpuSettings("none"), sysfs="/nonexistent", engines=(target,))).sources
    host = [s for s in sources if s.name == "host"]
    assert len(host) == 1
    metrics = host[0].collect(0.0)
    up = [Sample("llm_engine_up", {"engine": "e1", "engine_type": "vllm", "model": m}, 1.0) for m in ("a", "b")]
    joined = join_process_samples([*up, *metrics])
    for model in ("a", "b"):
        assert sample_value(joined, "llm_engine_process_threads", engine="e1", engine_type="vllm", model=model) == 5
    assert sample_value(joined, "llm_engine_process_threads", **ENGINE_LABELS) is None
    own = Sample("llm_engine_process_cpu_seconds_total", {**up[0].labels}, 7.0)
    joined = join_process_samples([*up, own, *metrics])
    assert [m.value for m in joined if m.name == "llm_engine_process_cpu_seconds_total"] == [7.0]


def test_every_host_sample_is_in_the_catalogue_with_its_labels(
    engine_process: tuple[int, subprocess.Popen, Path],
) -> None:
    from exporter.catalogue import CATALOGUE

    port, _, _ = engine_process
    metrics = join_process_samples(HostSource([_target(port)], window_seconds=60, lifetime_baseline=True).collect(0.0))
    assert len({m.name for m in metrics}) == 6
    for metric in metrics:
        assert set(metric.labels) == set(CATALOGUE[metric.name].labels), metric.name


def test_one_process_table_walk_finds_what_psutil_children_finds(
    engine_process: tuple[int, subprocess.Popen, Path],
) -> None:
    """Several engines share one walk of the process table per collection (children_index); it
    finds the same descendants as psutil's own per-process walk."""
    from exporter.sources.host import children_index, descendants

    _, process, workdir = engine_process
    _wait_for(workdir / "child_pid")
    root = psutil.Process(process.pid)
    assert {p.pid for p in descendants(root, children_index())} == {p.pid for p in root.children(recursive=True)}
    assert int((workdir / "child_pid").read_text()) in {p.pid for p in descendants(root, children_index())}
