"""Cluster overview — grafanalib entry point over exporter/dashboards/cluster_overview.py (configuration defaults).

`generate-dashboard -o dashboards/generated/cluster-overview.json dashboards/cluster-overview.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.monitoring.config import load_config
from exporter.monitoring.dashboards import cluster_overview

dashboard = cluster_overview.board(load_config(None)).build()
