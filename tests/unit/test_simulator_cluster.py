"""Cluster scenarios (`nodes:`): parsing and its errors, the router's shares, events, the index,
and the demo's cluster view at 80x24. Running clusters through the rules is
tests/integration/test_cluster_diagnosis.py."""

from __future__ import annotations

import math

import pytest

from exporter.simulate.cli import list_scenarios
from exporter.simulate.cluster import ClusterServer, SimulatedCluster, node_hostnames
from exporter.simulate.cluster_frame import NodeReading, node_rows, render_cluster
from exporter.simulate.scenario import cluster_names, load_scenario, parse_scenario
from exporter.validation import ConfigError

CLUSTER = ("cluster-balanced", "congested-link", "load-imbalance", "node-lost", "straggler-node")
BASE = """
name: tiny-cluster
node: {{gpu: h100-sxm, gpus: 2, nics: 2}}
replicas: [{{model: llama-3.1-8b, count: 2}}]
workload: {{rate_per_second: 4, prompt_tokens: {{mean: 200}}, output_tokens: {{mean: 50}}}}
nodes: {nodes}
"""


def tiny(nodes: str):
    return parse_scenario(BASE.format(nodes=nodes), "test")


def test_the_cluster_scenarios_exist_and_are_listed_apart_from_the_single_node_ones():
    assert tuple(cluster_names()) == CLUSTER
    listing = list_scenarios()
    assert "cluster scenarios" in listing and "load-imbalance" in listing and "finds load_imbalance" in listing


@pytest.mark.parametrize(
    ("nodes", "key"),
    [
        ("{count: 0}", "nodes.count"),
        ("{count: 2, load_weights: [1]}", "nodes.load_weights"),
        ("{count: 2, events: [{node: 2, kind: node_down}]}", "nodes.events[0].node"),
        ("{count: 2, events: [{node: 0, kind: melt}]}", "nodes.events[0].kind"),
        ("{count: 2, events: [{node: 0, kind: link_congestion, port: 5}]}", "nodes.events[0].port"),
        (
            "{count: 2, events: [{node: 0, kind: node_down, start_seconds: 9, end_seconds: 3}]}",
            "nodes.events[0].end_seconds",
        ),
        ("{count: 2, surprise: 1}", "nodes.surprise"),
    ],
)
def test_a_wrong_nodes_key_is_named(nodes, key):
    with pytest.raises(ConfigError) as caught:
        tiny(nodes)
    assert key in str(caught.value)


def test_skewed_weights_share_the_load_and_a_down_node_s_share_goes_to_the_others():
    spec = tiny(
        "{count: 3, load_weights: [2, 1, 1], events: [{node: 2, kind: node_down, start_seconds: 10, "
        "end_seconds: 20, restart_seconds: 5}]}"
    ).cluster
    assert spec is not None
    assert [round(spec.load_share(i, 0), 3) for i in range(3)] == [1.5, 0.75, 0.75]
    assert [round(spec.load_share(i, 22), 3) for i in range(3)] == [2.0, 1.0, 0.0]  # still loading
    assert spec.load_share(2, 25) == pytest.approx(0.75)
    assert sum(spec.load_share(i, 12) for i in range(3)) == pytest.approx(3)


def test_each_node_has_its_own_hostname_seed_and_state_and_a_lost_node_answers_503():
    scenario = tiny("{count: 2, events: [{node: 1, kind: node_down, start_seconds: 5, end_seconds: 8}]}")
    assert node_hostnames(scenario) == ["sim-node-0", "sim-node-1"]
    cluster = SimulatedCluster(scenario)
    assert cluster.nodes[0].gpus[0].uuid != cluster.nodes[1].gpus[0].uuid
    server = ClusterServer(cluster, realtime=False).start()
    try:
        cluster.advance(6)
        assert server.nodes[1].respond("/engine/0/metrics")[0] == 503
        assert server.nodes[0].respond("/engine/0/metrics")[0] == 200
        index = server.index()
        assert [n["hostname"] for n in index["nodes"]] == ["sim-node-0", "sim-node-1"]
        assert [n["state"] for n in index["nodes"]] == ["up", "down"]
        entry = index["nodes"][0]
        assert entry["engines"][0]["url"].startswith(entry["url"]) and entry["gpu"]["url"].endswith("/gpu/metrics")
        cluster.advance(9)
        assert server.nodes[1].respond("/engine/0/metrics")[0] == 200
        assert (
            cluster.nodes[1].replicas[0].stats.generation_tokens < cluster.nodes[0].replicas[0].stats.generation_tokens
        )
    finally:
        server.stop()


def test_throttling_lowers_the_clock_and_heats_the_gpus_and_congestion_marks_one_port():
    scenario = tiny(
        "{count: 2, events: [{node: 0, kind: thermal_throttle, clock_fraction: 0.5, heat_celsius: 20}, "
        "{node: 1, kind: link_congestion, port: 1, background_utilization: 0.7, ecn_mark_fraction: 0.1}]}"
    )
    cluster = SimulatedCluster(scenario)
    cluster.advance(3)
    hot, other = cluster.nodes
    assert hot.gpus[0].spec.sm_clock_mhz == round(other.gpus[0].spec.sm_clock_mhz * 0.5)
    assert hot.gpus[0].heat_celsius == 20 and hot.replicas[0].config.mbu == pytest.approx(0.85 * 0.5)
    assert other.ports[1].override is not None and other.ports[0].override is None
    assert other.ports[1].values["port_xmit_wait"] > other.ports[0].values["port_xmit_wait"]


def test_every_builtin_cluster_scenario_loads_with_its_finding():
    findings = {name: load_scenario(name).cluster.expect for name in CLUSTER}  # type: ignore[union-attr]
    assert findings == {
        "cluster-balanced": "none",
        "congested-link": "congested_link",
        "load-imbalance": "load_imbalance",
        "node-lost": "node_recovery",
        "straggler-node": "straggler",
    }
    assert not math.isinf(load_scenario("node-lost").cluster.events[0].end_seconds)  # type: ignore[union-attr]


def _reading(host: str, at: float, tokens: float, itl: float = 0.02) -> NodeReading:
    reading = NodeReading(host, at, answered=True, engines=8, engines_up=8, running=30)
    reading.tokens = {f"e{i}": tokens / 8 for i in range(8)}
    reading.itl_p50 = [itl]
    reading.sm_clock_mhz = [1980.0]
    reading.temperature = [60.0]
    return reading


def test_the_cluster_view_names_hot_nodes_and_the_straggler_within_80x24():
    before = [_reading(f"sim-node-{i}", 0, 0) for i in range(8)]
    rates = [1000, 1000, 650, 650, 650, 650, 650, 650]
    now = [_reading(f"sim-node-{i}", 10, r * 10, 0.04 if i == 5 else 0.02) for i, r in enumerate(rates)]
    lines = render_cluster(["load-imbalance t=100s", "  note"], node_rows(before, now), ["LLMLoadImbalance"], 80, 24)
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert "spread 35%" in text and "hot: sim-node-0, sim-node-1" in text
    assert "sim-node-5 2.00x median ITL" in text
