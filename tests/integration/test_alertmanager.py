"""deploy/local/alertmanager.yml in a real Alertmanager: critical pages per cluster and engine,
warnings open tickets, and the inhibitions silence what the issue says they silence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.monitoring_stack import Alertmanager, WebhookReceiver, alertmanager_config
from tests.support import CONDITION_BOUND_SECONDS

pytestmark = pytest.mark.integration


def _alert(name: str, severity: str, **labels: str) -> dict:
    return {
        "labels": {"alertname": name, "severity": severity, "cluster": "prod-a", **labels},
        "annotations": {"summary": name, "runbook_url": f"https://example.invalid/docs/runbooks/{name}.md"},
    }


@pytest.fixture(scope="module")
def delivered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WebhookReceiver, Alertmanager]]:
    webhook = WebhookReceiver()
    manager = Alertmanager(alertmanager_config(webhook.url), tmp_path_factory.mktemp("alertmanager"))
    try:
        manager.post_alerts(
            [
                # node-1: engine e1 is down, so its KV page is inhibited; e2's is not.
                _alert("LLMEngineDown", "critical", instance="node-1:9477", engine="e1"),
                _alert(
                    "LLMKVCacheSaturated", "critical", instance="node-1:9477", engine="e1", stage="kv_cache_capacity"
                ),
                _alert(
                    "LLMKVCacheSaturated", "critical", instance="node-1:9477", engine="e2", stage="kv_cache_capacity"
                ),
                # node-2: the exporter is absent, so node-2's GPU page is inhibited; node-3's is not.
                _alert("LLMExporterAbsent", "warning", instance="node-2:9477"),
                _alert("LLMGPUDown", "critical", instance="node-2:9477", gpu="0"),
                _alert("LLMGPUDown", "critical", instance="node-3:9477", gpu="0"),
                _alert("LLMRDMAPortErrors", "warning", instance="node-3:9477", device="mlx5_0", port="1"),
            ]
        )
        # Every page expected below has arrived once node-3's GPU page has (grouped and sent together).
        expected = [("LLMEngineDown", "e1"), ("LLMKVCacheSaturated", "e2"), ("LLMGPUDown", "node-3:9477")]
        for name, key in expected:
            webhook.wait_for(
                lambda a, n=name, k=key: (
                    a["labels"]["alertname"] == n and k in (a["labels"].get("engine"), a["labels"].get("instance"))
                ),
                timeout=CONDITION_BOUND_SECONDS,
            )
        # The tickets are grouped per instance, so node-2's and node-3's come in notifications of
        # their own: each is waited for (one CI run read the tickets between the two).
        for name, instance in (("LLMRDMAPortErrors", "node-3:9477"), ("LLMExporterAbsent", "node-2:9477")):
            webhook.wait_for(
                lambda a, n=name, i=instance: a["labels"]["alertname"] == n and a["labels"].get("instance") == i,
                timeout=CONDITION_BOUND_SECONDS,
            )
        yield webhook, manager
    finally:
        manager.close()
        webhook.close()


def _keys(alerts: list[dict]) -> set[tuple[str, str]]:
    return {(a["labels"]["alertname"], a["labels"].get("engine") or a["labels"]["instance"]) for a in alerts}


def test_critical_alerts_page_and_inhibited_ones_do_not(delivered):
    webhook, _ = delivered
    pages = _keys(webhook.alerts("/pager"))
    assert pages == {("LLMEngineDown", "e1"), ("LLMKVCacheSaturated", "e2"), ("LLMGPUDown", "node-3:9477")}


def test_warnings_open_tickets(delivered):
    webhook, _ = delivered
    tickets = _keys(webhook.alerts("/ticket"))
    assert tickets == {("LLMExporterAbsent", "node-2:9477"), ("LLMRDMAPortErrors", "node-3:9477")}


def test_pages_are_grouped_by_cluster_and_engine(delivered):
    webhook, _ = delivered
    groups = {tuple(sorted(a["group_labels"].items())) for a in webhook.alerts("/pager")}
    assert (("cluster", "prod-a"), ("engine", "e1")) in groups
    assert (("cluster", "prod-a"), ("engine", "e2")) in groups
    for alert in webhook.alerts("/pager"):
        assert alert["annotations"]["runbook_url"].endswith(f"/docs/runbooks/{alert['labels']['alertname']}.md")


def test_alertmanager_reports_who_inhibited_what(delivered):
    _, manager = delivered
    suppressed = {}
    for alert in manager.alerts():
        if alert["status"]["state"] == "suppressed":
            suppressed[
                (alert["labels"]["alertname"], alert["labels"]["instance"], alert["labels"].get("engine", ""))
            ] = alert
    assert set(suppressed) == {("LLMKVCacheSaturated", "node-1:9477", "e1"), ("LLMGPUDown", "node-2:9477", "")}
    assert all(alert["status"]["inhibitedBy"] for alert in suppressed.values())
