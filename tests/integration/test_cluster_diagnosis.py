"""The cluster rules on simulated clusters: the imbalance, the straggler and the congested link, named.

Each cluster scenario runs offline (faster than real time) with one in-process exporter per node
(`ClusterView`, the exporter's ordinary sources over loopback). Every 30 simulated seconds each
node's /metrics is read; the families the cluster rules read become promtool input series
(`instance` = the node's hostname), and real `promtool test rules` evaluates the generated rules
on them. The rules are generated from the same code with the time scaled down — `rate_interval`
1m and `for:` 1m instead of 5m and 30m/15m/10m — so a few simulated minutes are enough; their
expressions and thresholds are the committed ones. Annotations are dropped (their figures come
from the simulation and cannot be known beforehand); the alert labels must match exactly, so
every alert that fires is named, and no other fires. Samples come from each exporter's snapshot
as /metrics renders it (`snapshot_metrics`), without a text round trip.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.exposition import snapshot_metrics
from exporter.model import Metric, QuantileSummary
from exporter.monitoring.alerts import rule_groups
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.rule_files import groups_data
from exporter.simulate.cluster import SimulatedCluster
from exporter.simulate.cluster_view import ClusterView
from exporter.simulate.scenario import load_scenario
from tests.integration.monitoring_stack import require_binary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

STEP_SECONDS = 30
JOB = "llm-bottleneck-exporter"
CLUSTER_ALERTS = ("LLMLoadImbalance", "LLMStragglerNode", "LLMRDMALinkCongested")
# What the cluster rules read (exporter/monitoring/cluster.py and LLMLoadImbalance's GPU floor).
FAMILIES = {
    "llm_engine_generation_tokens_total",
    "llm_engine_inter_token_latency_seconds",
    "llm_engine_requests_running",
    "llm_engine_up",
    "llm_gpu_up",
    "llm_gpu_utilization_ratio",
    "llm_rdma_port_transmit_utilization_ratio",
    "llm_rdma_port_transmit_wait_total",
}


def fast_config() -> MonitoringConfig:
    base = MonitoringConfig()
    policies = {name: replace(policy, for_="1m") for name, policy in base.alerts.items()}
    return replace(base, rate_interval="1m", alerts=policies)


def rules_without_annotations(config: MonitoringConfig) -> dict[str, Any]:
    """The rules as generated, less annotations and the replica-scope imbalance rule: a straggler
    holds more requests than its peers, which that rule (promtool-tested on its own) rightly flags."""
    groups = groups_data(rule_groups(config), config)
    for group in groups:
        group["rules"] = [r for r in group["rules"] if r.get("labels", {}).get("scope") != "replicas"]
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return {"groups": groups}


def samples(metrics: list[Metric]) -> list[tuple[str, dict[str, str], float]]:
    """The exported samples of FAMILIES (a summary's median only), as /metrics would carry them."""
    found = []
    for metric in metrics:
        if metric.name not in FAMILIES:
            continue
        if isinstance(metric, QuantileSummary):
            found += [(metric.name, {**metric.labels, "quantile": "0.5"}, v) for q, v in metric.quantiles if q == 0.5]
        else:
            found.append((metric.name, dict(metric.labels), metric.value))
    return found


def record_series(scenario: str, seconds: int) -> tuple[dict[str, list[float | None]], int]:
    """Promtool series text -> values at every step, from one exporter per simulated node."""
    cluster = SimulatedCluster(load_scenario(scenario))
    view = ClusterView(cluster, interval=STEP_SECONDS)
    steps = seconds // STEP_SECONDS
    found: dict[str, list[float | None]] = {}
    try:
        for step in range(steps):
            cluster.advance(cluster.scenario.warmup_seconds + (step + 1) * STEP_SECONDS)
            for hostname, snapshot in view.collect().items():
                for name, sample_labels, value in samples(snapshot_metrics(snapshot)):
                    labels = {"job": JOB, **sample_labels, "instance": f"{hostname}:9477"}
                    key = name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                    found.setdefault(key, [None] * steps)[step] = value
    finally:
        view.close()
    return found, steps


def promtool_case(series: dict[str, list[float | None]], steps: int, expected: dict[str, list[dict[str, str]]]):
    def values(points: list[float | None]) -> str:
        return " ".join("_" if v is None else repr(float(v)) for v in points)

    end = f"{(steps - 1) * STEP_SECONDS}s"
    return {
        "name": "simulated cluster",
        "interval": f"{STEP_SECONDS}s",
        "input_series": [{"series": key, "values": values(points)} for key, points in sorted(series.items())],
        "alert_rule_test": [
            {"eval_time": end, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in expected[name]]}
            for name in CLUSTER_ALERTS
        ],
    }


def run_promtool(tmp_path: Path, case: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    promtool = require_binary("promtool")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules_without_annotations(fast_config())))
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": f"{STEP_SECONDS}s", "tests": [case]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, width=1_000_000))
    return subprocess.run(
        [promtool, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def node(hostname: str, **labels: str) -> dict[str, str]:
    return {"severity": "warning", "instance": f"{hostname}:9477", **labels}


CASES = {
    # Nodes 0 and 1 take the share nodes 2 and 3 should have had: a 35 % spread, the hot two named.
    "load-imbalance": {
        "LLMLoadImbalance": [node("sim-node-0", scope="nodes"), node("sim-node-1", scope="nodes")],
        "LLMStragglerNode": [],
        "LLMRDMALinkCongested": [],
    },
    # The same cluster routed evenly: no cluster alert at all.
    "cluster-balanced": {name: [] for name in CLUSTER_ALERTS},
    # Node 2 throttles to 60 % clocks: slower tokens at the same load.
    "straggler-node": {
        "LLMLoadImbalance": [],
        "LLMStragglerNode": [node("sim-node-2")],
        "LLMRDMALinkCongested": [],
    },
    # One rail of node 1 congested: the link named by node, device and port; node 1 is its straggler.
    "congested-link": {
        "LLMLoadImbalance": [],
        "LLMStragglerNode": [node("sim-node-1")],
        "LLMRDMALinkCongested": [node("sim-node-1", job=JOB, device="mlx5_3", port="1")],
    },
}


@pytest.mark.parametrize("scenario", sorted(CASES))
def test_the_cluster_alerts_name_what_the_scenario_built(tmp_path: Path, scenario: str):
    series, steps = record_series(scenario, seconds=180)
    assert any(k.startswith("llm_engine_generation_tokens_total") for k in series), sorted(series)[:5]
    done = run_promtool(tmp_path, promtool_case(series, steps, CASES[scenario]))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
