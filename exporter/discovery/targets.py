"""A set of engine sources that discovery replaces at run time while the loop reads it, and the
choice of which engines to scrape when more pods ask than `max_engines` allows.

Anyone who can create a pod on the node can annotate it, so the choice must not be one a crowd of
decoys can win: the first 32 pods by name once let 32 pods in namespace `aaa` push the real
engine out, and with it every engine-down alert. The order is instead:

1. pods that hold accelerators (a GPU resource in their limits or requests) before the rest: the
   node's GPUs cap how many such pods it can run, so decoys cannot multiply here without taking
   the GPUs they would have to hold;
2. within each tier, round-robin across namespaces, and within a namespace across owners (the
   controller in `ownerReferences`: one Deployment's replicas count as one owner), so no one
   namespace or workload takes every slot;
3. by name, for a stable choice.

What is left out is logged by name and counted in `llm_exporter_discovery_targets{state="dropped"}`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.budget import round_robin
from exporter.settings import EngineTarget
from exporter.sources.base import Source
from exporter.sources.engine import EngineSource

log = logging.getLogger(__name__)

#: how many dropped engines a log line names before it says "and N more"
LOGGED_NAMES = 10


@dataclass(frozen=True)
class Candidate:
    """A target a pod asks for, with what decides its place when there are too many."""

    target: EngineTarget
    namespace: str = ""
    #: the pod's controller ("ReplicaSet/llama-7d9f8c6b5d"), or the pod itself when it has none
    owner: str = ""
    #: the pod holds GPUs or other accelerators
    accelerators: bool = False


def select(candidates: Sequence[Candidate], limit: int) -> tuple[list[EngineTarget], list[EngineTarget]]:
    """The targets to scrape (at most `limit`) and those left out, in the order above."""
    ordered: list[Candidate] = []
    for tier in (True, False):
        namespaces: dict[str, dict[str, list[Candidate]]] = {}
        for candidate in sorted(candidates, key=lambda c: c.target.name):
            if candidate.accelerators is tier:
                owners = namespaces.setdefault(candidate.namespace, {})
                owners.setdefault(candidate.owner or candidate.target.name, []).append(candidate)
        per_namespace = [
            round_robin([owners[owner] for owner in sorted(owners)]) for _, owners in sorted(namespaces.items())
        ]
        ordered.extend(round_robin(per_namespace))
    targets = list(dict.fromkeys(candidate.target for candidate in ordered))
    return targets[:limit], targets[limit:]


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
        #: names of the targets the last update left out for want of room
        self.dropped: tuple[str, ...] = ()

    def update(self, candidates: Sequence[Candidate]) -> None:
        wanted, left_out = select(candidates, self.max_sources)
        dropped = tuple(sorted(target.name for target in left_out))
        if dropped and dropped != self.dropped:
            named = ", ".join(dropped[:LOGGED_NAMES]) + (
                f" and {len(dropped) - LOGGED_NAMES} more" if len(dropped) > LOGGED_NAMES else ""
            )
            log.warning(
                "discovery found %d engines, more than max_engines=%d; not scraping %s",
                len(wanted) + len(dropped),
                self.max_sources,
                named,
            )
        self.dropped = dropped
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
