"""A replica restarting mid-scenario (exporter/simulate/restarts.py): the model replaces its process
at the phase's start and keeps it out of the pool while it loads; served live, its own process
binds its port and answers nothing until it has loaded (tests/integration/test_simulator_replica_process.py)."""

from __future__ import annotations

import pytest
import requests

from exporter.simulate import load_scenario
from exporter.simulate.node import SimulatedNode
from exporter.simulate.server import SimulationServer

SCENARIO = "replica-restart"


@pytest.fixture(scope="module")
def restart():
    scenario = load_scenario(SCENARIO)
    phase = next(p for p in scenario.phases if p.restart is not None)
    return scenario, phase


def test_the_restarted_replica_is_a_fresh_process_out_of_the_pool_while_it_loads(restart) -> None:
    scenario, phase = restart
    node = SimulatedNode(scenario)
    index, load = phase.restart.replica, phase.restart.load_seconds
    node.advance(phase.start_seconds - 1)
    before = node.replicas[index]
    assert before.started_at < 0 and before.load > 0 and not node.loading(index)
    node.advance(phase.start_seconds + load / 2)
    fresh = node.replicas[index]
    assert fresh is not before and fresh.started_at == phase.start_seconds
    assert node.loading(index) and fresh.load == 0 and sum(fresh.stats.finished.values()) == 0
    assert all(r.load > 0 for i, r in enumerate(node.replicas) if i != index)  # the others take its share
    node.advance(phase.start_seconds + load + 30)
    assert not node.loading(index) and sum(fresh.stats.finished.values()) > 0, "it serves once loaded"


def test_a_loading_replica_is_refused_on_its_path_and_its_page_starts_at_the_restart(restart) -> None:
    scenario, phase = restart
    node = SimulatedNode(scenario)
    server = SimulationServer(node, realtime=False).start()
    index = phase.restart.replica
    try:
        url = f"{server.url}/engine/{index}/metrics"
        node.advance(phase.start_seconds + 1)
        answer = requests.get(url, timeout=10)
        assert answer.status_code == 503 and "loading" in answer.text
        assert requests.get(f"{server.url}/engine/0/metrics", timeout=10).status_code == 200
        node.advance(phase.start_seconds + phase.restart.load_seconds + 1)
        text = requests.get(url, timeout=10).text
        start = next(float(line.split()[1]) for line in text.splitlines() if line.startswith("process_start_time_"))
        assert start == pytest.approx(server.started_wall + phase.start_seconds, abs=0.01)
    finally:
        server.stop()
