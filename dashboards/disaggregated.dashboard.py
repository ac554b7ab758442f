"""Disaggregated serving — grafanalib entry point over exporter/monitoring/dashboards/disaggregated.py.

`generate-dashboard -o dashboards/generated/disaggregated.json dashboards/disaggregated.dashboard.py`
writes the same file as `llm-bottleneck-exporter generate`: both build from the monitoring
configuration's defaults and the diagnosis thresholds of deploy/kubernetes/configmap.yaml
(`generate` also honours `--config FILE` and `--exporter-config FILE`).
"""

from pathlib import Path

from exporter.generate import monitoring_config
from exporter.monitoring.dashboards import disaggregated

# The repository root, whose deploy/kubernetes/configmap.yaml holds the deployed thresholds.
REPOSITORY = Path(__file__).resolve().parent.parent
dashboard = disaggregated.board(monitoring_config(REPOSITORY)).build()
