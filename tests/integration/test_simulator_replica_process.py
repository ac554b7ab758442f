"""A restarting replica's own process, served live (exporter/simulate/replica_process.py): it binds
the replica's port at once and answers nothing while it loads, a restart is a new process on the
same port, and the simulator stops the processes it started."""

from __future__ import annotations

import socket

import psutil
import pytest
import requests

from exporter.simulate import load_scenario
from exporter.simulate.node import SimulatedNode
from exporter.simulate.replica_process import ReplicaProcess
from exporter.simulate.server import SimulationServer
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def restart():
    scenario = load_scenario("replica-restart")
    return scenario, next(p for p in scenario.phases if p.restart is not None)


def test_its_own_process_binds_the_port_answers_nothing_while_loading_then_forwards(restart) -> None:
    scenario, _ = restart
    server = SimulationServer(SimulatedNode(scenario), realtime=False).start()
    process = ReplicaProcess("127.0.0.1", f"{server.url}/engine/0/metrics")
    try:
        process.start(0.0, load_seconds=300.0)
        listening = lambda: [  # noqa: E731
            c.pid for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == process.port
        ]
        wait_until(lambda: listening() != [], "the replica process listening")
        assert process.process is not None and listening() == [process.process.pid]
        with socket.create_connection(("127.0.0.1", process.port), timeout=5) as loading:  # the backlog takes it
            loading.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            loading.settimeout(0.5)
            with pytest.raises(TimeoutError):
                loading.recv(1)
        first_pid = process.process.pid
        process.start(1.0, load_seconds=0.0)  # a restart: a new process on the same port
        assert process.process.pid != first_pid and not psutil.pid_exists(first_pid)
        wait_until(lambda: _answers(process.url), "the restarted replica process answering")
        answer = requests.get(process.url, timeout=10)
        assert answer.status_code == 200 and "vllm:num_requests_running" in answer.text
    finally:
        process.stop()
        server.stop()
    assert process.process is None


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_the_simulator_stops_the_processes_it_started(restart) -> None:
    scenario, phase = restart
    server = SimulationServer(SimulatedNode(scenario), realtime=True).start()
    try:
        url = server.engine_url(phase.restart.replica)
        assert not url.startswith(server.url), url
        wait_until(lambda: _answers(url), "the replica process answering")
        children = psutil.Process().children()
        assert children
    finally:
        server.stop()
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
