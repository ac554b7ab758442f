"""The one catalogue of metric families this project exports, a module per part of the node.

Exposition takes HELP and TYPE from here; dashboards, alert rules and their lints check every
query against it, so a family that is not listed here cannot be referenced anywhere. The order
below is the exposition's and docs/metrics.md's.
"""

from __future__ import annotations

from exporter.catalogue.derived import (
    BOTTLENECK_FAMILIES,
    CAPACITY_FAMILIES,
    COST_FAMILIES,
    PLANNER_FAMILIES,
    REQUEST_FAMILIES,
    SLO_FAMILIES,
)
from exporter.catalogue.disagg import PD_FAMILIES
from exporter.catalogue.engines import (
    ENGINE_FAMILIES,
    ENGINE_SETTINGS,
    ENGINE_SUMMARIES,
    LATENCY_FAMILIES,
    SLICE_LABELS,
)
from exporter.catalogue.gpus import GPU_FAMILIES
from exporter.catalogue.health import HEALTH_FAMILIES
from exporter.catalogue.node import HOST_FAMILIES, RDMA_FAMILIES
from exporter.catalogue.own import EXPORTER_FAMILIES, PROFILE_FAMILIES
from exporter.catalogue.path import GATEWAY_FAMILIES, PROBE_FAMILIES
from exporter.catalogue.spec import MetricSpec, MetricType

__all__ = [
    "CATALOGUE",
    "ENGINE_SETTINGS",
    "ENGINE_SUMMARIES",
    "LATENCY_FAMILIES",
    "QUANTILES",
    "SLICE_LABELS",
    "MetricSpec",
    "MetricType",
]

# The quantiles every summary family exports.
QUANTILES = (0.5, 0.95, 0.99)

CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        ENGINE_FAMILIES
        + PD_FAMILIES
        + GPU_FAMILIES
        + RDMA_FAMILIES
        + HOST_FAMILIES
        + HEALTH_FAMILIES
        + BOTTLENECK_FAMILIES
        + GATEWAY_FAMILIES
        + PROBE_FAMILIES
        + SLO_FAMILIES
        + REQUEST_FAMILIES
        + CAPACITY_FAMILIES
        + COST_FAMILIES
        + PLANNER_FAMILIES
        + EXPORTER_FAMILIES
        + PROFILE_FAMILIES
    )
}
