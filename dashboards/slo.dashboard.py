"""SLOs — grafanalib entry point over exporter/monitoring/dashboards/slo.py.

`generate-dashboard -o dashboards/generated/slo.json dashboards/slo.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`: both build from the monitoring configuration's
defaults and the diagnosis thresholds and SLOs of deploy/kubernetes/configmap.yaml (`generate`
also honours `--config FILE` and `--exporter-config FILE`).
"""

from pathlib import Path

from exporter.generate import monitoring_config
from exporter.monitoring.dashboards import slo

# The repository root, whose deploy/kubernetes/configmap.yaml holds the deployed SLOs.
REPOSITORY = Path(__file__).resolve().parent.parent
dashboard = slo.board(monitoring_config(REPOSITORY)).build()
