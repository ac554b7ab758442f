"""Prometheus recording and alerting rules generated from Python (kubernetes-mixin style).

`config` holds the one configuration object (also read by the dashboards), `records` the
recording rules, `rules` the alerts, `render` the rule file and the PrometheusRule manifest.
The generated files and the promtool tests live in the repository's `alerts/` folder.
"""

from exporter.alerts.config import MonitoringConfig, load_config

__all__ = ["MonitoringConfig", "load_config"]
