"""Gateway mappings, one module per gateway, and detection from the metric names."""

from __future__ import annotations

from types import MappingProxyType

from exporter.sources.gateways.common import GatewayMapping
from exporter.sources.gateways.dynamo_frontend import DynamoFrontendMapping
from exporter.sources.gateways.envoy_ai_gateway import EnvoyAiGatewayMapping
from exporter.sources.gateways.epp import EppMapping
from exporter.sources.gateways.haproxy import HaproxyMapping
from exporter.sources.gateways.ingress_nginx import IngressNginxMapping
from exporter.sources.gateways.litellm import LitellmMapping
from exporter.sources.gateways.llmd_coordinator import LlmdCoordinatorMapping

MAPPINGS = MappingProxyType(
    {
        m.gateway_type: m
        for m in (
            EppMapping(),
            EnvoyAiGatewayMapping(),
            LitellmMapping(),
            HaproxyMapping(),
            IngressNginxMapping(),
            DynamoFrontendMapping(),
            LlmdCoordinatorMapping(),
        )
    }
)


def detect(names: set[str]) -> GatewayMapping | None:
    """The first mapping whose names the payload has; EPP before the AI Gateway that fronts it."""
    for mapping in MAPPINGS.values():
        if mapping.matches(names):
            return mapping
    return None
