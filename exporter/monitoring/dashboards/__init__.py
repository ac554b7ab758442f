"""Grafana dashboards generated with grafanalib from the monitoring configuration.

The definitions live in this package, so `llm-bottleneck-exporter generate` works from an
installed package (no repository checkout needed): one module per dashboard with a
`board(config) -> Board`, built from the panel factories (exporter/stages/panels.py and
evidence.py), the layout and variables (`board`) and the selectors (`queries`), rendered by
`panels`. The repository's `dashboards/*.dashboard.py` are thin
grafanalib entry points over the same modules (for grafanalib's own `generate-dashboard`);
`render` writes the JSON, the Grafana-sidecar ConfigMap and dashboards/README.md.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards import (
    bottleneck_diagnosis,
    cluster_overview,
    disaggregated,
    engine_detail,
    gpu_node,
    network,
    slo,
)
from exporter.monitoring.dashboards.board import Board

# File stem -> the dashboard's definition, in the order the README lists them.
DASHBOARDS: dict[str, Callable[[MonitoringConfig], Board]] = {
    "cluster-overview": cluster_overview.board,
    "bottleneck-diagnosis": bottleneck_diagnosis.board,
    "engine-detail": engine_detail.board,
    "disaggregated": disaggregated.board,
    "gpu-node": gpu_node.board,
    "network": network.board,
    "slo": slo.board,
}


def boards(config: MonitoringConfig) -> dict[str, Board]:
    return {name: build(config) for name, build in DASHBOARDS.items()}


__all__ = ["DASHBOARDS", "Board", "boards"]
