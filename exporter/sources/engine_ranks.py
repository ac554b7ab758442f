"""Every rank of an engine seen, and one that stops reporting named as such.

An engine with several ranks reports them in one of two ways: behind one port with a label per
rank (vLLM's data-parallel `engine`, SGLang's `dp_rank`/`tp_rank` with
`--enable-metrics-for-all-schedulers`), or a port per node or rank (`urls:` of one engine: SGLang's
per-node listeners, vLLM's external load balancing). A rank whose series vanish from an answered
scrape, or whose URL stops answering, has not gone away: its requests still count on the others
while it may be hung. So each rank seen is kept and exported as `llm_engine_rank_up` 1 while it
reports and 0 once it stops, until it comes back, or until it has been silent for
`FORGET_SECONDS` (a deliberate scale-down then stops being called a failure).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from exporter.model import EngineReading

#: how long a rank that stopped reporting is still named: long enough for the alert and the
#: case review to see it, short enough that a deliberate scale-down stops being called a failure
FORGET_SECONDS = 900.0


class RankTracker:
    """The ranks of one engine target, per model, with when each was last seen."""

    def __init__(self, forget_seconds: float = FORGET_SECONDS) -> None:
        self.forget_seconds = forget_seconds
        self._last_seen: dict[tuple[str, str], float] = {}

    def update(self, now: float, readings: Sequence[EngineReading], silent: Sequence[str] = ()) -> None:
        """Note the ranks this answered scrape reported; `silent`: ranks known not to answer (a URL
        of the engine), named as not reporting even if never seen yet."""
        for reading in readings:
            for rank in reading.ranks:
                self._last_seen[(reading.model, rank)] = now
            for rank in silent:
                self._last_seen.setdefault((reading.model, rank), now - 1.0)
        for key in [k for k, seen in self._last_seen.items() if seen < now - self.forget_seconds]:
            del self._last_seen[key]

    def states(self, now: float, model: str) -> Iterator[tuple[str, bool, float]]:
        """(rank, reporting now, seconds since last seen) of a model with more than one rank."""
        mine = sorted((rank, seen) for (m, rank), seen in self._last_seen.items() if m == model)
        if len(mine) < 2:
            return
        latest = max(seen for _, seen in mine)
        for rank, seen in mine:
            yield rank, seen >= latest, now - seen

    def forget_models(self, models: set[str]) -> None:
        for key in [k for k in self._last_seen if k[0] not in models]:
            del self._last_seen[key]
