"""Other exporters' GPU metrics ingested as `llm_gpu_*` (`--gpu MODE=URL`), one module each.

Each module maps one exporter (dcgm-exporter, or a vendor's, through a `DeviceExporterSpec`) and
registers its mode (exporter/sources/gpu_modes.py); importing this package imports every module in
it, so adding a vendor's exporter is adding its module (docs/contributing.md).
"""

from __future__ import annotations

from exporter.registry import import_modules

import_modules(__name__, __path__)
