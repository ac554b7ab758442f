"""Bottleneck diagnosis — grafanalib entry point over exporter/dashboards/bottleneck_diagnosis.py (configuration defaults).

`generate-dashboard -o dashboards/generated/bottleneck-diagnosis.json dashboards/bottleneck-diagnosis.dashboard.py` writes the
same file as `llm-bottleneck-exporter generate`, which also honours `--config FILE`.
"""

from exporter.monitoring.config import load_config
from exporter.monitoring.dashboards import bottleneck_diagnosis

dashboard = bottleneck_diagnosis.board(load_config(None)).build()
