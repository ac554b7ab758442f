"""The monitoring mixin (kubernetes-mixin style): Prometheus rules and Grafana dashboards from Python.

One package, one configuration: `config` holds the MonitoringConfig every part reads; `promql` the
selector and template helpers and the parser-based metric-name reader; `records` the recording
rules; `alerts` the alerting rules; `rule_files` the rule file and the PrometheusRule manifest;
`dashboards` the grafanalib dashboards; `lint` the PromQL lint over rules and panels. Alerts and
dashboards are siblings: both import the config and the records, never each other. The generated
files and the promtool tests live in the repository's `alerts/` and `dashboards/` folders.
"""

from exporter.monitoring.config import MonitoringConfig, load_config

__all__ = ["MonitoringConfig", "load_config"]
