"""Parity with the real node_exporter on the same sysfs trees, and the `once` / `serve` acceptance.

node_exporter (Debian `prometheus-node-exporter`) reads each tree with only its infiniband collector;
`python -m exporter once` reads the same tree. For every device/port, the byte and packet counters
and the link rate agree exactly where both export a value. CI installs the binary; without it these
tests fail (not skip), because a silent skip would hide the parity check.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support import (
    REPO,
    REQUEST_BOUND_SECONDS,
    START_BOUND_SECONDS,
    ExporterProcess,
    answers,
    free_port,
    log_tail,
    stop_group,
    wait_until_serving,
)
from tests.sysfs_trees import (
    FIXTURE_DEVICES,
    ROCE_COUNTERS,
    ROCE_HW_COUNTERS,
    LiveTree,
    build_fixture_tree,
    roce_mlx5_tree,
    write_port,
)

pytestmark = pytest.mark.integration

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"

TREES: dict[str, Callable[[Path], Path]] = {
    "procfs": lambda root: build_fixture_tree(root, "procfs"),
    "node_exporter": lambda root: build_fixture_tree(root, "node_exporter"),
    "roce": roce_mlx5_tree,
}
# our family -> node_exporter's, then its legacy (counters_ext) stand-in
COUNTER_PAIRS = {
    "llm_rdma_port_transmit_bytes_total": (
        "node_infiniband_port_data_transmitted_bytes_total",
        "node_infiniband_legacy_data_transmitted_bytes_total",
    ),
    "llm_rdma_port_receive_bytes_total": (
        "node_infiniband_port_data_received_bytes_total",
        "node_infiniband_legacy_data_received_bytes_total",
    ),
    "llm_rdma_port_transmit_packets_total": (
        "node_infiniband_port_packets_transmitted_total",
        "node_infiniband_legacy_packets_transmitted_total",
    ),
    "llm_rdma_port_receive_packets_total": (
        "node_infiniband_port_packets_received_total",
        "node_infiniband_legacy_packets_received_total",
    ),
    "llm_rdma_port_link_rate_bytes_per_second": ("node_infiniband_rate_bytes_per_second",),
    "llm_rdma_port_transmit_wait_total": ("node_infiniband_port_transmit_wait_total",),
}

Port = tuple[str, str]


def by_port(text: str) -> dict[str, dict[Port, float]]:
    """family sample name -> (device, port) -> value, for samples labelled with device and port."""
    out: dict[str, dict[Port, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "device" in sample.labels and "port" in sample.labels:
                out.setdefault(sample.name, {})[(sample.labels["device"], sample.labels["port"])] = sample.value
    return out


def node_exporter_scrape(sysfs: Path) -> str:
    """Start the real node_exporter on `sysfs`, scrape it once, stop it."""
    if not os.access(NODE_EXPORTER, os.X_OK):
        pytest.fail(
            f"{NODE_EXPORTER} is missing: install it with "
            "`apt-get install -y --no-install-recommends prometheus-node-exporter` (CI does)"
        )
    with NodeExporter(sysfs) as node:
        return node.scrape()


class NodeExporter:
    def __init__(self, sysfs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.log_path = sysfs.with_name(sysfs.name + "-node-exporter.log")
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    NODE_EXPORTER,
                    f"--path.sysfs={sysfs}",
                    "--collector.disable-defaults",
                    "--collector.infiniband",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_until_serving(
                self.process, lambda: answers(self.url), "node_exporter", lambda: log_tail(self.log_path)
            )
        except BaseException:
            self.close()
            raise

    def scrape(self) -> str:
        response = requests.get(self.url, timeout=REQUEST_BOUND_SECONDS)
        response.raise_for_status()
        return response.text

    def close(self) -> None:
        stop_group(self.process)

    def __enter__(self) -> NodeExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_once(sysfs: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--sysfs", str(sysfs), "--gpu", "none"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_BOUND_SECONDS,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


@pytest.fixture(params=sorted(TREES))
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return TREES[request.param](tmp_path / request.param)


def test_counters_and_link_rate_equal_node_exporters(tree: Path) -> None:
    node = by_port(node_exporter_scrape(tree))
    ours = by_port(run_once(tree))
    node_ports = set(node["node_infiniband_state_id"])
    assert node_ports, "node_exporter exported no port: the tree or the collector is broken"
    assert set(ours["llm_rdma_port_info"]) == node_ports
    compared = 0
    for family, node_families in COUNTER_PAIRS.items():
        for port in sorted(node_ports):
            expected = next((node[f][port] for f in node_families if port in node.get(f, {})), None)
            if expected is None:
                continue
            assert ours.get(family, {}).get(port) == expected, f"{family} {port}: ours differ from node_exporter"
            compared += 1
    assert compared >= len(node_ports)  # at least the link rate of every port
    for port in node_ports:
        assert ours["llm_rdma_port_up"][port] == (1.0 if node["node_infiniband_state_id"][port] == 4 else 0.0)


@pytest.mark.parametrize("source", sorted(FIXTURE_DEVICES))
def test_once_prints_rdma_series_for_every_port_of_the_real_trees(tmp_path: Path, source: str) -> None:
    ours = by_port(run_once(build_fixture_tree(tmp_path, source)))
    expected_ports = {
        "procfs": {("hfi1_0", "1"), ("mlx4_0", "1"), ("mlx4_0", "2"), ("mlx5_0", "1")},
        "node_exporter": {("i40iw0", "1"), ("mlx4_0", "1"), ("mlx4_0", "2")},
    }[source]
    for family in ("llm_rdma_port_info", "llm_rdma_port_up", "llm_rdma_port_link_rate_bytes_per_second"):
        assert set(ours[family]) == expected_ports, family
    with_data = expected_ports - {("i40iw0", "1")}  # i40iw0 answers "N/A (no PMA)" for every counter
    assert set(ours["llm_rdma_port_transmit_bytes_total"]) == with_data


@pytest.fixture
def served_live_tree(tmp_path: Path) -> Iterator[tuple[LiveTree, ExporterProcess]]:
    roce_mlx5_tree(tmp_path)
    for index in (1, 2):
        write_port(
            tmp_path,
            f"mlx5_{index}",
            counters=ROCE_COUNTERS,
            hw_counters=ROCE_HW_COUNTERS,
            netdev=f"ens1f{index}np{index}",
        )
    with ExporterProcess("--sysfs", str(tmp_path), interval=0.3) as exporter:
        yield LiveTree(tmp_path), exporter


def test_serve_keeps_every_other_series_through_the_failure_cases(
    served_live_tree: tuple[LiveTree, ExporterProcess],
) -> None:
    tree, exporter = served_live_tree
    exporter.wait_for(lambda text: 'llm_rdma_port_transmit_utilization_ratio{device="mlx5_2"' in text)
    tree.remove_device("mlx5_1")
    tree.set("mlx5_2", "state", "1: DOWN")
    tree.make_unreadable("mlx5_0", "counters/port_xmit_data")
    tree.set("mlx5_0", "hw_counters/np_cnp_sent", "N/A (no PMA)")
    text = exporter.wait_for(
        lambda t: 'device="mlx5_1"' not in t and 'llm_rdma_port_up{device="mlx5_2",port="1"} 0.0' in t
    )
    ours = by_port(text)
    assert ("mlx5_0", "1") not in ours["llm_rdma_port_transmit_bytes_total"]
    assert ("mlx5_0", "1") not in ours.get("llm_rdma_port_cnp_sent_total", {})
    assert ours["llm_rdma_port_receive_bytes_total"][("mlx5_0", "1")] == 500_000_000
    assert ours["llm_rdma_port_cnp_handled_total"][("mlx5_0", "1")] == 3400
    assert ours["llm_rdma_port_transmit_bytes_total"][("mlx5_2", "1")] == 1_000_000_000
    assert 'llm_exporter_source_up{source="rdma",target=""} 1.0' in text
