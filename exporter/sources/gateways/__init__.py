"""Gateway mappings, one module per gateway, each registered by itself (registry.py), and detection
from the metric names. Importing this package imports every module in it, so adding a gateway type
is adding its module (docs/contributing.md)."""

from __future__ import annotations

from exporter.registry import import_modules
from exporter.sources.gateways.common import GatewayMapping
from exporter.sources.gateways.registry import MAPPINGS

import_modules(__name__, __path__)


def detect(names: set[str]) -> GatewayMapping | None:
    """The first mapping whose names the payload has, in the registered order."""
    for mapping in MAPPINGS.values():
        if mapping.matches(names):
            return mapping
    return None


__all__ = ["MAPPINGS", "GatewayMapping", "detect"]
