"""Build the enabled sources from the configuration (node_exporter's collector registry)."""

from __future__ import annotations

import logging

from exporter.config import Config, ConfigError
from exporter.sources.base import Source
from exporter.sources.engine import EngineSource

log = logging.getLogger(__name__)


def build_sources(config: Config, lifetime_baseline: bool = False) -> list[Source]:
    """One source per engine target, plus the node-level sources this build has."""
    sources: list[Source] = [
        EngineSource(target, config.window_seconds, lifetime_baseline) for target in config.engines
    ]
    if config.gpu in ("nvml", "dcgm", "dcgm-exporter"):
        raise ConfigError("--gpu", f"mode {config.gpu!r} is not available in this build yet; use auto or none")
    if config.gpu == "auto":
        log.info("gpu: auto found no GPU telemetry source in this build; GPU families are absent")
    return sources
