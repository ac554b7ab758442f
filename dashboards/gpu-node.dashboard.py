"""GPU and node — grafanalib entry point over exporter/dashboards/gpu_node.py (configuration defaults).

`generate-dashboard -o dashboards/generated/gpu-node.json dashboards/gpu-node.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.monitoring.config import load_config
from exporter.monitoring.dashboards import gpu_node

dashboard = gpu_node.board(load_config(None)).build()
