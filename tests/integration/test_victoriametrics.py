"""Past one Prometheus: the same alert fires from VictoriaMetrics' rule evaluation as from Prometheus'.

A simulated `load-imbalance` cluster (four nodes, a 35 % spread) advances in real time, each node
collected by its own in-process exporter and served on its own loopback port (`LiveClusterView`). A real Prometheus,
configured from deploy/victoriametrics/prometheus.yml (external label `cluster`, remote write with
recording-rule results dropped), scrapes the four nodes, evaluates the generated rules itself and
remote-writes into a real VictoriaMetrics; a real vmalert evaluates the same rule file over
VictoriaMetrics, writing its records back. The rules are generated with their time scaled down
(rate_interval 1m, every `for:` 30s, groups every 2s) so that the alert fires within about two
minutes; annotations and expressions are otherwise the generated ones, templates included
(vmalert validates them at start). Both must fire LLMLoadImbalance{scope="nodes"} for exactly the
two hot nodes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.rule_files import rules_file
from exporter.simulate.cluster import SimulatedCluster
from exporter.simulate.cluster_view import LiveClusterView
from exporter.simulate.scenario import load_scenario
from tests.integration.monitoring_stack import ManagedProcess, Prometheus, require_binary
from tests.support import REPO, REQUEST_BOUND_SECONDS, free_port

pytestmark = pytest.mark.integration

DEPLOY = REPO / "deploy" / "victoriametrics"
SCRAPE_SECONDS = 2
FIRE_WITHIN_SECONDS = 300  # generous: a loaded two-core machine runs all of this at once
HOT = {"sim-node-0", "sim-node-1"}


def fast_rules() -> str:
    base = MonitoringConfig()
    policies = {name: replace(policy, for_="30s") for name, policy in base.alerts.items()}
    return rules_file(replace(base, rate_interval="1m", rule_interval=f"{SCRAPE_SECONDS}s", alerts=policies))


def prometheus_config(targets: dict[str, str], vm_url: str, rules: Path) -> dict[str, Any]:
    """deploy/victoriametrics/prometheus.yml pointed at this test's ports, nodes and rules."""
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text(encoding="utf-8"))
    config["global"].update(scrape_interval=f"{SCRAPE_SECONDS}s", evaluation_interval=f"{SCRAPE_SECONDS}s")
    config["remote_write"][0]["url"] = f"{vm_url}/api/v1/write"
    config["remote_write"][0]["queue_config"] = {"batch_send_deadline": "1s"}
    config["rule_files"] = [str(rules)]
    job = config["scrape_configs"][0]
    # The node's hostname as its instance, as a Kubernetes relabeling of the pod's node name does.
    job["static_configs"] = [{"targets": [t], "labels": {"instance": f"{h}:9477"}} for h, t in targets.items()]
    return config


def start_victoriametrics(workdir: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = ManagedProcess(
        "victoria-metrics",
        [
            require_binary("victoria-metrics"),
            f"-storageDataPath={workdir / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            # Queries see samples a second after they land, not the default 30 s.
            "-search.latencyOffset=1s",
        ],
        workdir,
        f"{url}/health",
    )
    return process, url


def start_vmalert(workdir: Path, vm_url: str, rules: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = [line for line in (DEPLOY / "vmalert.flags").read_text().splitlines() if line and not line[0] == "#"]
    overrides = {
        "-rule": str(rules),
        "-datasource.url": vm_url,
        "-remoteWrite.url": vm_url,
        "-remoteRead.url": vm_url,
        # Nothing listens there: delivery is Alertmanager's business, tested elsewhere.
        "-notifier.url": f"http://127.0.0.1:{free_port()}",
        "-evaluationInterval": f"{SCRAPE_SECONDS}s",
    }
    args = [f"{key}={overrides.get(key, value)}" for key, _, value in (flag.partition("=") for flag in flags)]
    process = ManagedProcess(
        "vmalert", [require_binary("vmalert"), *args, f"-httpListenAddr=127.0.0.1:{port}"], workdir, f"{url}/health"
    )
    return process, url


def firing_hot_nodes(alerts: list[dict[str, Any]]) -> set[str]:
    return {
        a["labels"]["instance"].split(":")[0]
        for a in alerts
        if a["labels"].get("alertname", a.get("name")) == "LLMLoadImbalance"
        and a["labels"].get("scope") == "nodes"
        and a.get("state") == "firing"
    }


def prometheus_alerts(url: str) -> list[dict[str, Any]]:
    return requests.get(f"{url}/api/v1/alerts", timeout=REQUEST_BOUND_SECONDS).json()["data"]["alerts"]


def vmalert_alerts(url: str) -> list[dict[str, Any]]:
    alerts = (
        requests.get(f"{url}/api/v1/alerts", timeout=REQUEST_BOUND_SECONDS).json()["data"]["alerts"] or []
    )  # null when none
    return [{**a, "labels": {"alertname": a.get("name"), **a.get("labels", {})}} for a in alerts]


def test_the_imbalance_alert_fires_from_vmalert_over_victoriametrics_as_from_prometheus(tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(fast_rules(), encoding="utf-8")
    processes: list[ManagedProcess] = []
    cluster = SimulatedCluster(load_scenario("load-imbalance"))
    cluster.advance(cluster.scenario.warmup_seconds)
    live = LiveClusterView(cluster, interval=SCRAPE_SECONDS)
    try:
        vm, vm_url = start_victoriametrics(tmp_path)
        processes.append(vm)
        prometheus = Prometheus(prometheus_config(live.targets(), vm_url, rules), tmp_path)
        processes.append(prometheus)
        vmalert, vmalert_url = start_vmalert(tmp_path, vm_url, rules)
        processes.append(vmalert)
        deadline = time.monotonic() + FIRE_WITHIN_SECONDS
        from_prometheus: set[str] = set()
        from_vmalert: set[str] = set()
        while time.monotonic() < deadline and not (from_prometheus == HOT and from_vmalert == HOT):
            time.sleep(3)
            from_prometheus = firing_hot_nodes(prometheus_alerts(prometheus.url))
            from_vmalert = firing_hot_nodes(vmalert_alerts(vmalert_url))
        assert from_prometheus == HOT, f"Prometheus fires for {from_prometheus}\n{prometheus.log()}"
        assert from_vmalert == HOT, f"vmalert fires for {from_vmalert}\n{vmalert.log()}"
        # The remote-written series carry the external label; vmalert's alerts group by it.
        labelled = [
            a
            for a in vmalert_alerts(vmalert_url)
            if a["labels"].get("alertname") == "LLMLoadImbalance" and a["labels"].get("scope") == "nodes"
        ]
        assert {a["labels"].get("cluster") for a in labelled} == {"local"}, labelled
        descriptions = [a.get("annotations", {}).get("description", "") for a in labelled]
        # Its annotation templates ran their evidence queries against VictoriaMetrics.
        assert all("tokens/s" in d and "n/a" not in d for d in descriptions), descriptions
    finally:
        for process in reversed(processes):
            process.close()
        live.close()
