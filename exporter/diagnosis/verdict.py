"""Hysteresis and the primary stage, the same for an engine and a gateway."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from exporter.settings import Thresholds
from exporter.stages import Stage

NONE = "none"


class Hysteresis:
    """Which stages each subject (an engine, a gateway) holds active, remembered round to round,
    so `llm_bottleneck_active` does not flap around one line."""

    def __init__(self) -> None:
        self._active: dict[tuple[Hashable, str], bool] = {}

    def judge(
        self, subject: Hashable, stages: Sequence[Stage[Any]], scores: Mapping[str, float], t: Thresholds
    ) -> tuple[dict[str, bool], str]:
        """(stage -> active, the primary stage): the active stage scoring highest (the first on the
        path among equals), else "none"."""
        active = {}
        for stage in stages:
            active[stage.id] = stage.holds(scores[stage.id], self._active.get((subject, stage.id), False), t)
            self._active[(subject, stage.id)] = active[stage.id]
        on = [stage.id for stage in stages if active[stage.id]]
        return active, max(on, key=lambda s: scores[s]) if on else NONE

    def forget(self, subject: Hashable) -> None:
        self._active = {k: v for k, v in self._active.items() if k[0] != subject}
