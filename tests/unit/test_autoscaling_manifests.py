"""The autoscaling manifests of deploy/autoscaling/ validate against their schemas, offline, and read
a series the generated rules record.

- KEDA's ScaledObject against the CRD's own openAPIV3Schema (tests/fixtures/autoscaling/, with its
  provenance), every field known to the schema (the API server prunes an unknown field silently,
  so a misspelt `minReplicas` would be lost without an error), and its Prometheus trigger's
  metadata keys against the scaler's own list (the CRD types them as a string map);
- the HPA (autoscaling/v2) and the adapter's ConfigMap against the Kubernetes schemas
  (kubernetes-validate, strict), and the adapter's rules against a schema of its configuration;
- the HPA's external metric is the adapter's, and both read the recorded series the KEDA trigger
  reads, which the generated rules record.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from exporter.generate import monitoring_config
from exporter.monitoring.lint import counter_names, known_names, lint
from exporter.monitoring.promql import metric_names
from exporter.monitoring.slo_rules import SloRecordNames
from tests.support import REPO

AUTOSCALING = REPO / "deploy" / "autoscaling"
FIXTURES = REPO / "tests" / "fixtures" / "autoscaling"
RECORDED = SloRecordNames.desired_replicas


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((AUTOSCALING / name).read_text("utf-8"))


def keda_schema() -> dict[str, Any]:
    crd = yaml.safe_load((FIXTURES / "keda.sh_scaledobjects.yaml").read_text("utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def unknown_fields(document: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the structural schema does not declare (the API server would prune them)."""
    found: list[str] = []
    if isinstance(document, dict) and "properties" in schema:
        for key, value in document.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(document, list) and "items" in schema:
        for index, item in enumerate(document):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


def validate_scaled_object(document: dict[str, Any]) -> None:
    schema = keda_schema()
    jsonschema.validate(document, schema)
    assert unknown_fields(document, schema) == [], "fields the ScaledObject CRD does not have"
    scaler = json.loads((FIXTURES / "keda-prometheus-scaler.json").read_text("utf-8"))
    for trigger in document["spec"]["triggers"]:
        keys = set(trigger["metadata"])
        assert set(scaler["required"]) <= keys, "a required key of the Prometheus scaler is missing"
        assert keys <= {*scaler["required"], *scaler["optional"]}, f"unknown scaler keys {keys}"


def test_keda_scaled_object_validates_against_its_crd_and_scaler() -> None:
    validate_scaled_object(load("keda-scaledobject.yaml"))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["spec"].__setitem__("minReplicas", 2),  # the HPA's spelling, not KEDA's
        lambda d: d["spec"]["triggers"][0]["metadata"].__setitem__("treshold", "1"),
        lambda d: d["spec"]["fallback"].__setitem__("behavior", "holdReplicas"),  # not in the enum
        lambda d: d["spec"].__setitem__("maxReplicaCount", "16"),  # a string, not an integer
    ],
)
def test_the_validation_refuses_a_wrong_scaled_object(change: Any) -> None:
    document = copy.deepcopy(load("keda-scaledobject.yaml"))
    change(document)
    with pytest.raises((AssertionError, jsonschema.ValidationError)):
        validate_scaled_object(document)


def test_keda_scales_to_the_recorded_desired_replicas_and_holds_on_no_answer() -> None:
    (trigger,) = load("keda-scaledobject.yaml")["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    assert lint(query, known_names(monitoring_config(REPO)), counter_names()) == []
    assert metric_names(query) == {RECORDED}
    # AverageValue 1: the HPA wants ceil(metric) replicas; the fallback needs AverageValue, and an
    # empty answer must be an error for it to hold (ignoreNullValues "true" reads it as 0).
    assert trigger["metricType"] == "AverageValue" and float(trigger["metadata"]["threshold"]) == 1
    assert trigger["metadata"]["ignoreNullValues"] == "false"


@pytest.mark.parametrize("name", ["hpa.yaml", "prometheus-adapter-rules.yaml"])
def test_hpa_and_adapter_config_map_validate_against_the_kubernetes_schemas(name: str) -> None:
    kubernetes_validate.validate(load(name), kubernetes_validate.utils.latest_version(), strict=True)


def adapter_rules() -> dict[str, Any]:
    return yaml.safe_load(load("prometheus-adapter-rules.yaml")["data"]["config.yaml"])


def test_the_adapter_serves_the_hpa_metric_from_the_recorded_series() -> None:
    schema = json.loads((FIXTURES / "prometheus-adapter-config.schema.json").read_text("utf-8"))
    rules = adapter_rules()
    jsonschema.validate(rules, schema)
    (rule,) = rules["externalRules"]
    (metric,) = load("hpa.yaml")["spec"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == rule["name"]["as"]
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}
    config = monitoring_config(REPO)
    assert lint(rule["seriesQuery"], known_names(config), counter_names()) == []
    assert metric_names(rule["seriesQuery"]) == {RECORDED}
    # The HPA's matchLabels become matchers on the recorded series: labels it keeps.
    recorded_by = _recorded_grouping(RECORDED)
    assert set(metric["external"]["metric"]["selector"]["matchLabels"]) <= recorded_by


def test_the_adapter_schema_refuses_a_misspelt_key() -> None:
    schema = json.loads((FIXTURES / "prometheus-adapter-config.schema.json").read_text("utf-8"))
    rules = adapter_rules()
    rules["externalRules"][0]["metricQuery"] = rules["externalRules"][0].pop("metricsQuery")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rules, schema)


def _recorded_grouping(record: str) -> set[str]:
    rules = yaml.safe_load((REPO / "alerts" / "generated" / "llm-bottleneck.rules.yaml").read_text("utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == record:
                inside = rule["expr"].split("by (", 1)[1].split(")", 1)[0]
                return {label.strip() for label in inside.split(",")}
    raise AssertionError(f"{record} is not recorded by the generated rules")


def test_every_autoscaling_manifest_is_checked() -> None:
    assert {p.name for p in Path(AUTOSCALING).glob("*.yaml")} == {
        "keda-scaledobject.yaml",
        "hpa.yaml",
        "prometheus-adapter-rules.yaml",
    }
