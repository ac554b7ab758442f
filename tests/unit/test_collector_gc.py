"""Importing the exporter leaves the process's garbage collector as it was: only `serve` sets it
(exporter/collector_gc.py; tests/integration/test_collector_gc.py runs serve)."""

from __future__ import annotations

import gc

from exporter.collector_gc import YOUNG_THRESHOLD


def test_importing_the_cli_leaves_the_collector_alone() -> None:
    import exporter.cli  # noqa: F401  # what serve imports; the settings come only when it runs

    assert gc.get_threshold()[0] != YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0
