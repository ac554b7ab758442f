"""The report's own dependencies, checked without importing them (or the rest of the report).

They are an extra, so the DaemonSet image (deploy/image-requirements.txt) carries no plotting or
statistics libraries it never uses; `report`, and the demo before it runs for minutes to write
one, say what to install when they are missing. This module imports nothing of the report's, so
the demo can ask without taking the report's libraries into its own extra.
"""

from __future__ import annotations

import importlib.util

REPORT_EXTRA_MODULES = ("jinja2", "matplotlib", "scipy")


def missing_report_extra() -> str:
    """What to install, or "" when the report's libraries are all there."""
    missing = [name for name in REPORT_EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return ""
    return (
        f"report needs {', '.join(missing)}: pip install 'llm-bottleneck-exporter[report]' "
        "(the container image leaves them out)"
    )
