"""The autoscaler example in deploy/autoscaling/ reads a series the generated rules record."""

from __future__ import annotations

import yaml

from exporter.generate import monitoring_config
from exporter.monitoring.lint import counter_names, known_names, lint
from exporter.monitoring.promql import metric_names
from tests.support import REPO


def test_keda_scaled_object_scales_on_recorded_headroom_not_gpu_utilization() -> None:
    document = yaml.safe_load((REPO / "deploy" / "autoscaling" / "keda-scaledobject.yaml").read_text("utf-8"))
    assert document["kind"] == "ScaledObject" and document["apiVersion"] == "keda.sh/v1alpha1"
    (trigger,) = document["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    config = monitoring_config(REPO)
    assert lint(query, known_names(config), counter_names()) == []
    assert metric_names(query) == {"slo_model:llm_capacity_headroom:ratio"}
    assert 0 < float(trigger["metadata"]["threshold"]) < 1 and trigger["metricType"] == "Value"
