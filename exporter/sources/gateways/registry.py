"""The gateway types: each mapping module in this package registers its mapping here when imported.

`MAPPINGS.register(HaproxyMapping(), order=...)` at the bottom of exporter/sources/gateways/haproxy.py
is the only place the type `haproxy` is named; the package imports every module of itself, so the
configuration's `type:`, `--gateway TYPE=URL`, detection and the docs' checks all read `MAPPINGS`.
Detection tries the mappings in `order` (lower first), which matters only where one gateway's
families can appear beside another's.
"""

from __future__ import annotations

from exporter.registry import Registry
from exporter.sources.gateways.common import GatewayMapping

MAPPINGS: Registry[GatewayMapping] = Registry("gateway type", lambda mapping: mapping.gateway_type)
