"""A simulated replica restarting mid-scenario, served live and read by a real `serve` (issue #45):
the restarting replica has a process of its own that binds its port and answers nothing while it
loads (exporter/simulate/replica_process.py), so the exporter reads it `loading` (its process's
start time from the host, its metrics silent), then `warming_up` from its first request for
`health.warmup_seconds`, then `up`; no engine reads a bottleneck through it.

The built-in `replica-restart` scenario, with its restart moved RESTART_AFTER_SECONDS into the live
run (the exporter starts after the simulator, since it scrapes the replica's own port, and must
read the replica up before the restart even on a loaded host) and the exporter's cold regime
shortened (WARMUP_SECONDS). Times are the exporter's (its report's `generated_at`), not the
moment of the read: on a loaded host the exporter's rounds run seconds behind.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import NamedTuple

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
RESTART_AFTER_SECONDS = 60.0
WARMUP_SECONDS = 20.0
INTERVAL_SECONDS = 2.0
POLL_SECONDS = 1.0
#: past the restart, load and warm-up: how long the test waits for the replica to read up again
PATIENCE_SECONDS = 120.0
#: the share of the other engines' reads that may name a stage (a starved simulator's catch-up)
STRAY_VERDICTS = 0.05


class Read(NamedTuple):
    """One read of the restarting replica: the exporter's seconds since the restart, its state, and
    the reason and message its source gave."""

    at: float
    state: str
    reason: str
    message: str


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
    states: list[Read] = []
    others: list[tuple[str, str]] = []  # (engine, primary) of every other engine at every read
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
        # The simulator's clock is the wall clock from its start: the restart's Unix time.
        restart_wall = time.time() - float(index["simulated_seconds"]) + float(index["phases"][1]["start_seconds"])
        deadline = time.monotonic() + (restart_wall - time.time()) + load_seconds + WARMUP_SECONDS + PATIENCE_SECONDS
        while not _came_back(states) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            try:
                report = requests.get(exporter_url + "/diagnosis", timeout=REQUEST_BOUND_SECONDS).json()
            except requests.RequestException:
                continue  # a read lost to a busy host is not a state
            at = round(datetime.fromisoformat(report["generated_at"]).timestamp() - restart_wall, 1)
            for engine in report["engines"]:
                if engine["engine"] == name:
                    states.append(
                        Read(at, engine["state"], engine.get("state_reason") or "", engine.get("state_message") or "")
                    )
                else:
                    others.append((engine["engine"], engine.get("primary") or "none"))
    finally:
        for process in (exporter, sim):
            if process is not None:
                stop_group(process)
    order = _order(states)
    context = f"{order}\n{states}\nserve: {log_tail(logs['serve'], 1500)}"
    assert order[:1] == ["up"], context
    assert _came_back(states), context
    loaded = order.index("warming_up", order.index("loading"))
    assert "down" not in order[order.index("loading") : loaded], context  # loading is not read as down
    # Once it has served, a replica whose scrape times out is down, not loading: on a starved host
    # the two hops to the simulator can outlast the scrape's timeout. Nothing else may read it down.
    served = states.index(next(r for r in states if r.state == "warming_up"))
    assert all(r.reason == "timeout" for r in states[served:] if r.state == "down"), context
    loading = [(r.at, r.message) for r in states if r.state == "loading"]
    # A round's time is its start: a round begun just before the restart may read it.
    assert -INTERVAL_SECONDS <= loading[0][0] < load_seconds / 2, f"loading seen late: {loading[:3]}"
    assert all("its process has run" in message for _, message in loading), loading
    warming = [r.at for r in states if r.state == "warming_up"]
    assert warming[0] >= load_seconds - INTERVAL_SECONDS, f"warming up before it had loaded: {states}"
    stray = [read for read in others if read[1] != "none"]
    assert len(stray) <= STRAY_VERDICTS * len(others), stray


def _order(states: list[Read]) -> list[str]:
    """The states in the order read, each run of one state once."""
    seen = [r.state for r in states]
    return [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]


def _came_back(states: list[Read]) -> bool:
    """Loading, then warming up, then up: the whole restart read."""
    order = _order(states)
    for step in ("loading", "warming_up", "up"):
        if step not in order:
            return False
        order = order[order.index(step) + 1 :]
    return True
