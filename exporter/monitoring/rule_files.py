"""Write the rule groups as a plain Prometheus rule file and as a PrometheusRule manifest."""

from __future__ import annotations

from typing import Any

from exporter.monitoring.alert_builder import RuleGroup
from exporter.monitoring.alerts import rule_groups
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.yaml_output import HEADER, dump

RULES_PATH = "alerts/generated/llm-bottleneck.rules.yaml"
PROMETHEUS_RULE_PATH = "deploy/kubernetes/prometheusrule.yaml"


def groups_data(groups: list[RuleGroup], config: MonitoringConfig) -> list[dict[str, Any]]:
    result = []
    for group in groups:
        data: dict[str, Any] = {"name": group.name}
        if config.rule_interval:
            data["interval"] = config.rule_interval
        data["rules"] = [rule.as_dict() for rule in group.rules]
        result.append(data)
    return result


def rules_file(config: MonitoringConfig) -> str:
    return HEADER + dump({"groups": groups_data(rule_groups(config), config)})


def prometheus_rule(config: MonitoringConfig) -> str:
    meta = config.prometheus_rule
    metadata: dict[str, Any] = {"name": meta.name}
    if meta.namespace:
        metadata["namespace"] = meta.namespace
    metadata["labels"] = dict(meta.labels)
    manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": {"groups": groups_data(rule_groups(config), config)},
    }
    return HEADER + dump(manifest)


def alert_files(config: MonitoringConfig) -> dict[str, str]:
    """The generated alerting files, by path relative to the repository root."""
    return {RULES_PATH: rules_file(config), PROMETHEUS_RULE_PATH: prometheus_rule(config)}
