"""The monitoring configuration object: defaults, YAML overrides, and errors that name the key."""

from __future__ import annotations

import re
from dataclasses import fields, replace

import pytest

from exporter.catalogue import CATALOGUE
from exporter.config import ConfigError
from exporter.monitoring.alerts import alert_rules
from exporter.monitoring.config import YAML_KEYS, MonitoringConfig, default_policies, from_mapping, load_config
from exporter.monitoring.promql import metric_names, template_queries
from exporter.monitoring.records import recording_rules
from exporter.settings import Thresholds
from tests.support import REPO


def test_defaults_hold_the_diagnosis_lines_the_exporter_uses():
    config = MonitoringConfig()
    assert config.diagnosis.kv_usage_warning == 0.8
    assert config.diagnosis.dram_active_saturated == 0.8
    assert config.policy("LLMKVCacheSaturated").severity == "critical"
    assert config.runbook_url("LLMGPUDown").endswith("/docs/runbooks/LLMGPUDown.md")


def test_no_file_means_the_defaults():
    assert load_config(None) == MonitoringConfig()


def test_overrides_merge_over_the_defaults(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        'selectors: {exporter: \'job="llm", namespace="gpu"\'}\n'
        "labels: {node: node}\n"
        "alerts: {LLMGPUDown: {severity: warning}}\n"
        "rule_interval: 10s\n",
        encoding="utf-8",
    )
    config = replace(load_config(str(path)), diagnosis=Thresholds(kv_usage_warning=0.85))
    assert config.selectors.exporter == 'job="llm", namespace="gpu"'
    assert config.labels.node == "node" and config.labels.cluster == "cluster"
    assert config.diagnosis.kv_usage_warning == 0.85 and config.diagnosis.kv_usage_critical == 0.95
    assert config.policy("LLMGPUDown").severity == "warning"
    assert config.policy("LLMGPUDown").for_ == default_policies()["LLMGPUDown"].for_
    assert config.rule_interval == "10s"


def test_the_diagnosis_lines_default_to_the_exporters_defaults():
    assert load_config(None).diagnosis == Thresholds()


def test_the_diagnosis_lines_are_not_a_monitoring_key_and_the_error_names_their_home():
    with pytest.raises(ConfigError) as error:
        from_mapping({"diagnosis": {"kv_usage_warning": 0.85}})
    assert str(error.value) == (
        "diagnosis: set the thresholds in the exporter configuration's diagnosis: section "
        "(deploy/kubernetes/configmap.yaml), which generate reads"
    )


def test_the_selector_and_lines_reach_every_rule():
    config = replace(
        from_mapping({"selectors": {"exporter": 'job="llm", namespace="gpu"'}, "labels": {"node": "node"}}),
        diagnosis=Thresholds(kv_usage_warning=0.85),
    )
    selected = 0
    for rule in alert_rules(config) + recording_rules(config):
        texts = [rule.expr] + [q for text in getattr(rule, "annotations", {}).values() for q in template_queries(text)]
        for text in texts:
            for name in metric_names(text) & set(CATALOGUE) | ({"up"} & metric_names(text)):
                # Every read of one of the exporter's families carries the selector.
                for match in re.finditer(rf"(?<![\w:]){re.escape(name)}(?![\w:])", text):
                    assert text[match.end() :].startswith('{job="llm", namespace="gpu"'), (rule, text)
                    selected += 1
    assert selected > 50
    kv = next(r for r in alert_rules(config) if r.alert == "LLMKVCacheSaturated")
    assert ">= 0.85" in kv.expr and "(line 85%)" in kv.annotations["description"]
    assert "$labels.node" in kv.annotations["description"]
    node_busy = next(r for r in recording_rules(config) if r.record == "node:llm_gpu_utilization_ratio:avg")
    assert "by (cluster, node)" in node_busy.expr


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"threshold": {}}, "threshold"),
        ({"thresholds": {"ttft_p99": 1}}, "thresholds.ttft_p99"),
        ({"diagnosis": {"kv_usage": 0.9}}, "diagnosis"),
        ({"alerts": {"LLMKVCacheFull": {"for": "1m"}}}, "alerts.LLMKVCacheFull"),
        ({"alerts": {"LLMKVCacheSaturated": {"duration": "1m"}}}, "alerts.LLMKVCacheSaturated.duration"),
        ({"alerts": {"LLMKVCacheSaturated": {"for": "5 minutes"}}}, "alerts.LLMKVCacheSaturated.for"),
        ({"alerts": {"LLMKVCacheSaturated": {"severity": "page"}}}, "alerts.LLMKVCacheSaturated.severity"),
        ({"labels": {"node": "node-name"}}, "labels.node"),
        ({"selectors": {"exporter": '{job="x"}'}}, "selectors.exporter"),
        ({"thresholds": {"load_imbalance_cv": -1}}, "thresholds.load_imbalance_cv"),
        ({"rate_interval": 300}, "rate_interval"),
        ({"prometheus_rule": {"labels": {"release": 3}}}, "prometheus_rule.labels.release"),
        ({"windows": {"xid_errors": "ten minutes"}}, "windows.xid_errors"),
        ({"runbook_url_base": ""}, "runbook_url_base"),
        ([], "the configuration"),
    ],
)
def test_a_mistake_names_its_key(data, where):
    with pytest.raises(ConfigError) as error:
        from_mapping(data)
    assert error.value.where == where


def test_unknown_key_error_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown key \(known: .*ttft_p99_seconds"):
        from_mapping({"thresholds": {"ttft": 2}})


def test_a_prometheus_rule_label_set_to_null_is_removed():
    config = from_mapping({"prometheus_rule": {"labels": {"release": None, "team": "ml"}}})
    assert "release" not in config.prometheus_rule.labels
    assert config.prometheus_rule.labels["team"] == "ml"
    assert config.prometheus_rule.labels["app.kubernetes.io/name"] == "llm-bottleneck-exporter"


def test_a_file_that_is_not_yaml_is_named(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("alerts: [\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert error.value.where.startswith(str(path) + ":"), "names the file and the line"


def test_the_alerts_readme_documents_every_configuration_key():
    text = (REPO / "alerts" / "README.md").read_text(encoding="utf-8")
    config = MonitoringConfig()
    for section in YAML_KEYS:
        assert f"\n{section}:" in text, section
        value = getattr(config, section)
        if section != "alerts" and hasattr(value, "__dataclass_fields__"):
            for key in fields(value):
                assert f"{key.name}:" in text, f"{section}.{key.name}"
