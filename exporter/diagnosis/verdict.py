"""Hysteresis and the primary stage, the same for an engine and a gateway."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from exporter.settings import Thresholds
from exporter.stages import Stage

NONE = "none"


class Hysteresis:
    """Which stages each subject (an engine, a gateway) holds active, remembered round to round,
    so `llm_bottleneck_active` does not flap around one line; and since when a stage is held only
    by the band (its score under `enter_score`, not yet under `exit_score`), so the evidence can
    say why a verdict outlasts a falling score."""

    def __init__(self) -> None:
        self._active: dict[tuple[Hashable, str], bool] = {}
        self._held_since: dict[tuple[Hashable, str], float] = {}

    def judge(
        self, subject: Hashable, stages: Sequence[Stage[Any]], scores: Mapping[str, float], t: Thresholds, now: float
    ) -> tuple[dict[str, bool], str]:
        """(stage -> active, the primary stage): the active stage scoring highest (the first on the
        path among equals), else "none"."""
        active = {}
        for stage in stages:
            key = (subject, stage.id)
            active[stage.id] = stage.holds(scores[stage.id], self._active.get(key, False), t)
            self._active[key] = active[stage.id]
            if active[stage.id] and scores[stage.id] < t.enter_score:
                self._held_since.setdefault(key, now)
            else:
                self._held_since.pop(key, None)
        on = [stage.id for stage in stages if active[stage.id]]
        return active, max(on, key=lambda s: scores[s]) if on else NONE

    def held(self, subject: Hashable, stage: str, t: Thresholds, now: float) -> str | None:
        """The evidence line of a stage the band alone keeps active, else None."""
        since = self._held_since.get((subject, stage))
        if since is None:
            return None
        return (
            f"held by hysteresis for {now - since:.0f}s: the score is under enter_score {t.enter_score:g}, "
            f"and the stage clears once it falls under exit_score {t.exit_score:g}"
        )

    def forget(self, subject: Hashable) -> None:
        self._active = {k: v for k, v in self._active.items() if k[0] != subject}
        self._held_since = {k: v for k, v in self._held_since.items() if k[0] != subject}
