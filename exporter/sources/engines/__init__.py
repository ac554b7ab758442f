"""Engine schemas: each maps one engine's exposition into `EngineReading`s.

Each module here holds one engine's mapping and registers it (registry.py); importing this package
imports every module in it, so adding an engine type is adding its module (docs/contributing.md).
"""

from __future__ import annotations

from exporter.registry import import_modules
from exporter.sources.engines.common import EngineMapping
from exporter.sources.engines.registry import MAPPINGS

import_modules(__name__, __path__)


def detect(names: set[str]) -> EngineMapping | None:
    """The mapping whose families appear in a payload's sample names, or None."""
    for mapping in MAPPINGS.values():
        if mapping.matches(names):
            return mapping
    return None


__all__ = ["MAPPINGS", "EngineMapping", "detect"]
