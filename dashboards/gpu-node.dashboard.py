"""GPU and node — grafanalib entry point over exporter/dashboards/gpu_node.py (configuration defaults).

`generate-dashboard -o dashboards/generated/gpu-node.json dashboards/gpu-node.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.alerts.config import load_config
from exporter.dashboards import gpu_node

dashboard = gpu_node.board(load_config(None)).build()
