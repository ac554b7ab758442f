"""A set of engine sources that discovery replaces at run time while the loop reads it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from exporter.settings import EngineTarget
from exporter.sources.base import Source
from exporter.sources.engine import EngineSource

log = logging.getLogger(__name__)


class DynamicEngineSources:
    """One EngineSource per current target; a target that stays keeps its source (and windows).

    `update` is called by a discovery thread, `sources` by the collection loop; a source whose
    target went away is closed here and dropped by the loop at its next round.
    """

    def __init__(self, window_seconds: float, lifetime_baseline: bool = False, max_sources: int = 32) -> None:
        self.max_sources = max_sources
        self._window_seconds = window_seconds
        self._lifetime_baseline = lifetime_baseline
        self._lock = threading.Lock()
        self._sources: dict[EngineTarget, EngineSource] = {}
        self._over_limit_logged = False

    def update(self, targets: Sequence[EngineTarget]) -> None:
        wanted = sorted(set(targets), key=lambda t: t.name)
        if len(wanted) > self.max_sources:
            if not self._over_limit_logged:
                log.warning(
                    "discovery found %d engines, more than max_engines=%d; scraping the first %d by name",
                    len(wanted),
                    self.max_sources,
                    self.max_sources,
                )
                self._over_limit_logged = True
            wanted = wanted[: self.max_sources]
        with self._lock:
            removed = [source for target, source in self._sources.items() if target not in wanted]
            sources = {}
            for target in wanted:
                source = self._sources.get(target)
                if source is None:
                    source = EngineSource(target, self._window_seconds, self._lifetime_baseline)
                    log.info("engine %s discovered at %s", target.name, target.url)
                sources[target] = source
            self._sources = sources
        for source in removed:
            log.info("engine %s gone", source.target)
            source.close()

    def sources(self) -> list[Source]:
        with self._lock:
            return list(self._sources.values())

    def targets(self) -> list[EngineTarget]:
        with self._lock:
            return list(self._sources)

    def close(self) -> None:
        with self._lock:
            sources, self._sources = list(self._sources.values()), {}
        for source in sources:
            source.close()
