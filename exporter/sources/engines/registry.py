"""The engine types: each mapping module in this package registers its mapping here when imported.

`MAPPINGS.register(VllmMapping(), order=...)` at the bottom of exporter/sources/engines/vllm.py is
the only place the type `vllm` is named; the package imports every module of itself, so the
configuration's `type:`, `--engine TYPE=URL`, the discovery annotation and detection all read
`MAPPINGS`. Detection tries the mappings in `order` (lower first): the order matters only where
two engines' families can appear in one payload, and each mapping's `order` says why it sits where
it does.
"""

from __future__ import annotations

from exporter.registry import Registry
from exporter.sources.engines.common import EngineMapping

MAPPINGS: Registry[EngineMapping] = Registry("engine type", lambda mapping: mapping.engine_type)
