"""GPU and node — grafanalib entry point over exporter/monitoring/dashboards/gpu_node.py.

`generate-dashboard -o dashboards/generated/gpu-node.json dashboards/gpu-node.dashboard.py`
writes the same file as `llm-bottleneck-exporter generate`: both build from the monitoring
configuration's defaults and the diagnosis thresholds of deploy/kubernetes/configmap.yaml
(`generate` also honours `--config FILE` and `--exporter-config FILE`).
"""

from pathlib import Path

from exporter.generate import monitoring_config
from exporter.monitoring.dashboards import gpu_node

# The repository root, whose deploy/kubernetes/configmap.yaml holds the deployed thresholds.
REPOSITORY = Path(__file__).resolve().parent.parent
dashboard = gpu_node.board(monitoring_config(REPOSITORY)).build()
