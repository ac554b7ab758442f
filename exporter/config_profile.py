"""The `profile:` section (exporter.settings.ProfileSettings): when the exporter takes a profile by
itself, each value checked with the key named on a mistake."""

from __future__ import annotations

from typing import Any

from exporter import validation as v
from exporter.settings import MAX_PROFILE_SECONDS, ProfileSettings, field_names
from exporter.stages import ENGINE, of
from exporter.validation import ConfigError

#: a stage must hold at most a day before a capture (longer is a typo)
MAX_AFTER_SECONDS = 86_400.0
#: captures of one engine at most once a minute (each slows the engine while on) and at least once a week
MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS = 60.0, 7 * 86_400.0


def profile(value: Any, where: str) -> ProfileSettings:
    v.section(value, where, field_names(ProfileSettings))
    defaults = ProfileSettings()

    def number(key: str, low: float, high: float) -> float:
        return v.number(value.get(key, getattr(defaults, key)), f"{where}.{key}", low, high)

    known = tuple(stage.id for stage in of(ENGINE))
    stages = []
    for index, item in enumerate(v.sequence(value.get("stages", []), f"{where}.stages")):
        stage = v.string(item, f"{where}.stages[{index}]")
        if stage not in known:
            raise ConfigError(f"{where}.stages[{index}]", f"no engine stage {stage!r} (stages: {', '.join(known)})")
        stages.append(stage)
    return ProfileSettings(
        auto=v.boolean(value.get("auto", defaults.auto), f"{where}.auto"),
        after_seconds=number("after_seconds", 0.0, MAX_AFTER_SECONDS),
        min_interval_seconds=number("min_interval_seconds", MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS),
        seconds=v.positive_number(value.get("seconds", defaults.seconds), f"{where}.seconds", MAX_PROFILE_SECONDS),
        trace_dir=v.optional_string(value.get("trace_dir"), f"{where}.trace_dir"),
        stages=tuple(stages),
    )
