"""The `health:` section (exporter.settings.HealthSettings): the lines the node's health findings
are judged by, each checked with the key named on a mistake."""

from __future__ import annotations

from typing import Any

from exporter import validation as v
from exporter.settings import HealthSettings, field_names

TRUST_MODES = ("dscp", "pcp")
#: (low, high) per number; a ratio is a share, a count per minute or hour is bounded by sense
_BOUNDS = {
    "refresh_seconds": (1.0, 3600.0),
    "expected_port_rate_gbps": (1.0, 100_000.0),
    "gpu_busy_ratio": (0.0, 1.0),
    "link_error_recovery_per_minute": (0.0, 1e6),
    "symbol_errors_per_hour": (0.0, 1e9),
    "pause_time_ratio": (0.0, 1.0),
    "warmup_seconds": (0.0, 86_400.0),
    "jitter_ratio": (0.0, 10.0),
    "gc_full_collections_per_minute": (0.0, 1e6),
    "cpu_throttled_ratio": (0.0, 1.0),
    "cpu_steal_ratio": (0.0, 1.0),
}


def health(value: Any, where: str) -> HealthSettings:
    v.section(value, where, field_names(HealthSettings))
    defaults = HealthSettings()
    numbers: dict[str, Any] = {}
    for key, (low, high) in _BOUNDS.items():
        given = value.get(key, getattr(defaults, key))
        numbers[key] = None if given is None else v.number(given, f"{where}.{key}", low, high)
    trust = value.get("expected_trust")
    return HealthSettings(
        **numbers,
        roce_priority=v.integer(value.get("roce_priority", defaults.roce_priority), f"{where}.roce_priority", 0, 7),
        expected_trust=None if trust is None else v.choice(trust, f"{where}.expected_trust", TRUST_MODES),
    )
