"""Network — grafanalib entry point over exporter/dashboards/network.py (configuration defaults).

`generate-dashboard -o dashboards/generated/network.json dashboards/network.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.monitoring.config import load_config
from exporter.monitoring.dashboards import network

dashboard = network.board(load_config(None)).build()
