"""Engines starting: whether each is loading, its start-up figures, and the cold regime during
which a slowdown is the engine's warm-up, not a bottleneck. The state these make (`loading`,
`warming_up`) is decided with the others in exporter/diagnosis/states.py: this module reads the
evidence (start times, first requests, wakes), the state model stays one.

The start is the serving process's own start time (`llm_engine_process_start_time_seconds`: the
engine's `process_start_time_seconds`, else the listening process's from the host), so a restart
is a new start time. The first request it serves after a start (its generated tokens rising) ends
the start-up; the engine stays cold `warmup_seconds` after that (compilation, graph capture and
caches fill on the first requests: "Breaking the Ice", arXiv 2606.07362, a cold engine about 30 %
slower on its first requests). A wake from sleep (`llm_engine_asleep` falling) starts a cold
regime too. vLLM has no start-up metric of its own (PR #45087 open); SGLang's, Triton's and
Dynamo ModelExpress's load figures are quoted where the engine exports them
(`llm_engine_startup_seconds{phase}`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.health.finding import STARTUP, Finding
from exporter.health.view import EngineFacts, NodeView
from exporter.model import Labels, Metric, Sample
from exporter.settings import HealthSettings

#: what began a cold regime: the `state_reason` of a warming-up engine
START, RESTART, WAKE = "start", "restart", "wake"
#: a start time that moved by less is the same process (sources round it differently)
SAME_START_SECONDS = 2.0


@dataclass
class Startup:
    """One engine's last start's figures (wall clock seconds), and whether it is loading or cold."""

    started_at: float | None = None
    first_served_at: float | None = None
    cold_until: float | None = None
    #: the engine's own figures (phase -> seconds): SGLang's engine start-up and weight load, ...
    own: dict[str, float] = field(default_factory=dict)
    #: the restarts the exporter saw (a count: an engine that crash-loops for days restarts
    #: thousands of times, and what is said of it is how many)
    restarts: int = 0
    #: why it is in its cold regime now ("" when it is not), and what began it (START, RESTART, WAKE)
    cold_reason: str = ""
    cold_cause: str = ""
    #: how long its process has run without its metrics answering (None: not loading)
    loading_seconds: float | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def startup_seconds(self) -> float | None:
        """From the process start to its first served request."""
        if self.started_at is None or self.first_served_at is None:
            return None
        return max(0.0, self.first_served_at - self.started_at)

    def gauges(self, labels: Labels) -> list[Metric]:
        if self.startup_seconds is None:
            return []
        base = {k: labels[k] for k in ("engine", "engine_type", "model") if k in labels}
        return [Sample("llm_engine_startup_duration_seconds", base, self.startup_seconds)]

    def as_json(self) -> dict[str, object]:
        return {
            "started_at": self.started_at,
            "startup_seconds": None if self.startup_seconds is None else round(self.startup_seconds, 1),
            "first_served_at": self.first_served_at,
            "cold_until": self.cold_until,
            "engine_figures": {k: round(v, 2) for k, v in self.own.items()},
            "restarts_seen": self.restarts,
        }


@dataclass
class _Track:
    started_at: float | None = None
    served_baseline: float | None = None
    first_served_at: float | None = None
    #: the first sight of this start came after requests were served: cold from the start only
    seen_late: bool = False
    woke_at: float | None = None
    was_asleep: bool = False
    restarts: int = 0
    #: the last round its metrics answered
    last_up_at: float | None = None


class EngineStarts:
    """Per engine name, its starts, first served request and wakes, round after round."""

    def __init__(self) -> None:
        self._tracks: dict[str, _Track] = {}

    def update(self, view: NodeView, wall: float, s: HealthSettings) -> dict[str, Startup]:
        result = {}
        for name, engine in view.engines.items():
            track = self._tracks.setdefault(name, _Track())
            result[name] = self._judge(name, engine, track, wall, s)
        for name in [n for n in self._tracks if n not in view.engines]:
            del self._tracks[name]
        return result

    def _judge(self, name: str, engine: EngineFacts, track: _Track, wall: float, s: HealthSettings) -> Startup:
        start = engine.start_time
        if engine.up:
            track.last_up_at = wall
        elif start is not None and track.last_up_at is not None and start < track.last_up_at - SAME_START_SECONDS:
            # A process that ran while the engine last answered is not a new start, and not loading:
            # the engine's own, hung or stopping, or some older process on its port while it
            # restarts. Only a process started since can be a restart.
            start = None
        if start is not None and (track.started_at is None or abs(start - track.started_at) > SAME_START_SECONDS):
            if track.started_at is not None:
                track.restarts += 1
            fresh = wall - start < s.warmup_seconds or track.started_at is not None
            track.started_at, track.first_served_at, track.woke_at = start, None, None
            track.served_baseline = engine.served_total if engine.up else None
            track.seen_late = not fresh
        if not engine.up:
            return self._not_up(name, start, track, wall)
        if engine.asleep:
            track.was_asleep = True
            return Startup(track.started_at, own=dict(engine.startup_seconds), restarts=track.restarts)
        if track.was_asleep:
            track.was_asleep, track.woke_at = False, wall
            track.served_baseline, track.first_served_at = engine.served_total, None
        served = engine.served_total
        if track.served_baseline is None:
            track.served_baseline = served
            # Without a start time there is no evidence of a start at first sight: serving.
            track.seen_late = track.seen_late or start is None
        elif served is not None and served < track.served_baseline and start is None:
            # Its counters reset and it exports no start time: a restart, seen now.
            track.restarts += 1
            track.started_at, track.first_served_at, track.seen_late = wall, None, False
            track.served_baseline = served
        elif served is not None and track.first_served_at is None and served > track.served_baseline:
            track.first_served_at = wall
        return self._cold(engine, track, wall, s)

    def _not_up(self, name: str, start: float | None, track: _Track, wall: float) -> Startup:
        if start is None:  # no process seen, or the one that served: down, not loading (the diagnosis says so)
            return Startup(restarts=track.restarts)
        loading = wall - start
        text = f"its process has run {loading:.0f} s without serving its metrics or a request"
        finding = Finding("engine_loading", STARTUP, name, text, "llm_engine_process_start_time_seconds", loading)
        return Startup(start, restarts=track.restarts, loading_seconds=loading, findings=[finding])

    def _cold(self, engine: EngineFacts, track: _Track, wall: float, s: HealthSettings) -> Startup:
        # First seen after it had served, the first request it serves is not known: no start-up
        # figure (the next one seen would make it as long as the process has run).
        first = None if track.seen_late else track.first_served_at
        startup = Startup(track.started_at, first, own=dict(engine.startup_seconds), restarts=track.restarts)
        if s.warmup_seconds <= 0:  # the cold regime turned off
            return startup
        since = track.woke_at if track.woke_at is not None else track.started_at
        if track.woke_at is not None:
            cause, what = WAKE, "woke from sleep"
        else:
            cause, what = (RESTART, "restarted") if track.restarts else (START, "started")
        ago = f" {wall - since:.0f} s ago" if since is not None else ""
        if track.seen_late and track.woke_at is None:
            # First seen after it had served: cold, if at all, only for the length after its start.
            if track.started_at is None or wall - track.started_at >= s.warmup_seconds:
                return startup
            startup.cold_until = track.started_at + s.warmup_seconds
            after = "its start"
        elif track.first_served_at is not None:
            startup.cold_until = track.first_served_at + s.warmup_seconds
            after = "its first request"
        elif since is not None or track.served_baseline == 0:
            startup.cold_cause = cause
            startup.cold_reason = f"{what}{ago} and has served no request since"
            return startup
        else:
            return startup
        if wall < startup.cold_until:
            startup.cold_cause = cause
            startup.cold_reason = (
                f"{what}{ago}, cold for {startup.cold_until - wall:.0f} s more ({s.warmup_seconds:g} s after "
                f"{after}): a slowdown now is its warm-up (compilation, graph capture, caches), not a bottleneck"
            )
        return startup
