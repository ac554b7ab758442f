"""The node's own sources, one module each, registered by themselves (registry.py).

Importing this package imports every module in it, so adding a node source is adding its module.
"""

from __future__ import annotations

from exporter.registry import import_modules
from exporter.sources.node.registry import NODE_SOURCES, NodeContext, NodeSource

import_modules(__name__, __path__)

__all__ = ["NODE_SOURCES", "NodeContext", "NodeSource"]
