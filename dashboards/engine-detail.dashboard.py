"""Engine detail — grafanalib entry point over exporter/dashboards/engine_detail.py (configuration defaults).

`generate-dashboard -o dashboards/generated/engine-detail.json dashboards/engine-detail.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.monitoring.config import load_config
from exporter.monitoring.dashboards import engine_detail

dashboard = engine_detail.board(load_config(None)).build()
