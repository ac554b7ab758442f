"""A simulated replica restarting mid-scenario, served live and read by a real `serve` (issue #45):
the restarting replica has a process of its own that binds its port and answers nothing while it
loads (exporter/simulate/replica_process.py), so the exporter reads it `loading` (its process's
start time from the host, its metrics silent), then `warming_up` from its first request for
`health.warmup_seconds`, then `up`; no engine reads a bottleneck through it.

The built-in `replica-restart` scenario, with its restart moved RESTART_AFTER_SECONDS into the live
run and the exporter's cold regime shortened (WARMUP_SECONDS) to keep the test short.
"""

from __future__ import annotations

import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
import requests
import yaml

from exporter.simulate import load_scenario
from exporter.simulate.dcgm_text import pod_name
from exporter.simulate.exporter_view import exporter_settings
from exporter.simulate.node import SimulatedNode
from tests.support import REPO, REQUEST_BOUND_SECONDS, answers, free_port, log_tail, stop_group, wait_until_serving

pytestmark = pytest.mark.integration

SCENARIO = "replica-restart"
RESTART_AFTER_SECONDS = 25.0
WARMUP_SECONDS = 20.0
INTERVAL_SECONDS = 2.0
POLL_SECONDS = 1.0
#: after the replica has loaded: its first request, its cold regime, and rounds to see it end
AFTER_LOAD_SECONDS = WARMUP_SECONDS + 30.0


def scenario_text() -> tuple[str, float]:
    """The scenario with its restart RESTART_AFTER_SECONDS after the live clock starts; and the
    replica's load time."""
    data = yaml.safe_load(resources.files("exporter.simulate").joinpath("scenarios", f"{SCENARIO}.yaml").read_text())
    restart = data["phases"][1]
    data["warmup_seconds"] = float(restart["start_seconds"]) - RESTART_AFTER_SECONDS
    return yaml.safe_dump(data, sort_keys=False), float(restart["restart"]["load_seconds"])


def engine_urls(index: dict, base_url: str) -> list[str]:
    """The replicas' URLs as the simulator's index lists them (a path on it, or a port of their own)."""
    return [e["url"] if e["url"].startswith("http") else base_url + e["url"] for e in index["engines"]]


def test_a_restarting_replica_reads_loading_then_warming_up_then_up(tmp_path: Path) -> None:
    text, load_seconds = scenario_text()
    scenario_file = tmp_path / f"{SCENARIO}.yaml"
    scenario_file.write_text(text)
    node = SimulatedNode(load_scenario(str(scenario_file)))
    restarted = next(p.restart for p in node.scenario.phases if p.restart is not None)
    name = pod_name(node, restarted.replica)
    sim_port, exporter_port = free_port(), free_port()
    sim_url, exporter_url = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{exporter_port}"
    logs = {role: tmp_path / f"{role}.log" for role in ("simulate", "serve")}
    popen = {"cwd": REPO, "stdout": subprocess.DEVNULL, "start_new_session": True}
    sim = exporter = None
    states: list[tuple[float, str, str]] = []  # (seconds since the restart, state, message)
    bottlenecks: list[tuple[str, str]] = []
    try:
        sim = subprocess.Popen(
            [sys.executable, "-m", "exporter", "simulate", "--scenario", str(scenario_file)]
            + ["--listen", f"127.0.0.1:{sim_port}"],
            stderr=logs["simulate"].open("w"),
            **popen,
        )
        wait_until_serving(sim, lambda: answers(sim_url + "/"), "simulate", lambda: log_tail(logs["simulate"]))
        index = requests.get(sim_url + "/", timeout=REQUEST_BOUND_SECONDS).json()
        urls = engine_urls(index, sim_url)
        assert not urls[restarted.replica].startswith(sim_url), "the restarting replica has no port of its own"
        settings = exporter_settings(node, sim_url, None, INTERVAL_SECONDS, urls)
        settings["health"] = {"refresh_seconds": INTERVAL_SECONDS, "warmup_seconds": WARMUP_SECONDS}
        config = tmp_path / "exporter.yaml"
        config.write_text(yaml.safe_dump(settings))
        exporter = subprocess.Popen(
            [sys.executable, "-m", "exporter", "serve", "--config", str(config)]
            + ["--listen", f"127.0.0.1:{exporter_port}"],
            stderr=logs["serve"].open("w"),
            **popen,
        )
        serving = lambda: answers(exporter_url + "/healthz")  # noqa: E731
        wait_until_serving(exporter, serving, "serve", lambda: log_tail(logs["serve"]))
        restart_at = float(index["phases"][1]["start_seconds"])
        end = restart_at + load_seconds + AFTER_LOAD_SECONDS
        deadline = time.monotonic() + (end - float(index["simulated_seconds"])) + 60.0
        now = float(index["simulated_seconds"])
        while now < end and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            try:
                now = float(requests.get(sim_url + "/", timeout=REQUEST_BOUND_SECONDS).json()["simulated_seconds"])
                report = requests.get(exporter_url + "/diagnosis", timeout=REQUEST_BOUND_SECONDS).json()
            except requests.RequestException:
                continue  # a read lost to a busy host is not a state
            for engine in report["engines"]:
                if engine["engine"] == name:
                    states.append((round(now - restart_at, 1), engine["state"], engine.get("state_message") or ""))
                elif engine.get("primary") not in (None, "none"):
                    bottlenecks.append((engine["engine"], engine["primary"]))
    finally:
        for process in (exporter, sim):
            if process is not None:
                stop_group(process)
    seen = [state for _, state, _ in states]
    order = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    context = f"{order}\n{states}\nserve: {log_tail(logs['serve'], 1500)}"
    assert order[:1] == ["up"], context
    assert "loading" in order and "warming_up" in order, context
    assert order.index("loading") < order.index("warming_up") < len(order) - 1 - order[::-1].index("up"), context
    assert "down" not in order[order.index("loading") :], context  # loading is not read as down
    loading = [(t, message) for t, state, message in states if state == "loading"]
    assert loading[0][0] < load_seconds / 2, f"loading seen late: {loading[:3]}"
    assert all(t < load_seconds + 2 * INTERVAL_SECONDS + 5 for t, _ in loading), context
    assert all("its process has run" in message for _, message in loading), loading
    assert order[-1] == "up", context
    assert bottlenecks == [], bottlenecks
