"""The stages of the request path, each one record in its own module (exporter/stages/<id>.py).

A stage module declares its `Stage` (record.py) with its scorer beside it and registers it
(registry.py); importing this package imports every module in it, so adding a stage is adding its
file. The other modules are what the records are made of: the scorers' inputs (for an engine,
inputs.py read from the metrics and signals.py kept over time; path.py for a gateway), shared
scoring helpers (scoring.py), engine-aware actions (advice.py), dashboard panel declarations
(panels.py) and the report's shared misreadings (readings.py). docs/adding-a-stage.md walks
through one.
"""

from __future__ import annotations

import importlib
import pkgutil

from exporter.stages.path import PATH
from exporter.stages.record import ENGINE, Stage
from exporter.stages.registry import get, of, register, stages, unregister

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ENGINE", "PATH", "Stage", "get", "of", "register", "stages", "unregister"]
