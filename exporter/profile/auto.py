"""Automatic captures (`profile: {auto: true}`): when a stage has stayed an engine's primary
bottleneck for `after_seconds`, one bounded capture of that engine (capture.take), so that the
trace of the incident exists when someone looks at it.

Opt-in, never by default: the engine's profiler slows every step while on and its trace is
hundreds of MB. Each capture runs in a daemon thread of its own: the collection loop and /metrics
never wait on it, and shutdown does not either (a stop event cuts its sleep short; vLLM's stop is
still sent). At most one capture per engine is in flight, and none follows for that engine within
`min_interval_seconds` of the last one's start, whatever became of it: an engine launched without
its profiler answers ProfilingOff, which is recorded (its message says what to change), not
retried each round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exporter.model import Metric, Sample
from exporter.profile.capture import Capture, ProfilingOff, record, take
from exporter.settings import EngineTarget, ProfileSettings

log = logging.getLogger(__name__)

#: a capture's outcomes, the `result` label of llm_engine_profile_captures_total
RESULTS = ("ok", "off", "failed")
#: the summary's lines kept in /diagnosis: its heading and the top five operators or kernels
SUMMARY_LINES = 6

#: take()'s signature: (target, seconds, directory, around=..., sleep=...) -> Capture
CaptureFunction = Callable[..., Capture]


class Stopped(Exception):
    """The exporter is stopping: a capture's wait ends here."""


@dataclass(frozen=True)
class CaptureRecord:
    """One automatic capture as /diagnosis shows it beside the engine's verdict."""

    engine: str
    #: the primary stage that had held for `after_seconds`
    stage: str
    #: Unix time the capture started
    started_at: float
    #: ok (a trace written), off (the engine cannot be profiled: `message` says why), failed
    result: str
    directory: str = ""
    traces: tuple[str, ...] = ()
    #: the trace the summary read (the engine's, not its frontend's), else ""
    trace: str = ""
    #: the trace summary's heading and top lines (summary.py)
    summary: tuple[str, ...] = ()
    message: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "started_at": datetime.fromtimestamp(self.started_at, UTC).isoformat(),
            "stage": self.stage,
            "result": self.result,
            "directory": self.directory or None,
            "traces": list(self.traces),
            "trace": self.trace or None,
            "summary": list(self.summary),
            "message": self.message or None,
        }


class AutoProfiler:
    """The policy: which engine to capture and when, the captures in flight, their records."""

    def __init__(
        self,
        settings: ProfileSettings,
        around: Callable[[], AbstractContextManager[Any]] = nullcontext,
        capture: CaptureFunction = take,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`around`: held while the engine profiles (DCGM's profiling paused where the exporter
        reads it); `capture`: take's signature (tests inject one); `clock`: the time a stage has
        held is measured on (the exporter's collection clock)."""
        self.settings = settings
        self._around = around
        self._capture = capture
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: engine -> (its primary stage, since when it has been primary)
        self._held: dict[str, tuple[str, float]] = {}
        #: engine -> when its last capture started (clock)
        self._last_start: dict[str, float] = {}
        self._in_flight: dict[str, threading.Thread] = {}
        #: engine -> its last capture, whatever its result (what /diagnosis shows)
        self._records: dict[str, CaptureRecord] = {}
        #: engine -> its last capture that wrote a trace (what llm_engine_profile_info names)
        self._last_trace: dict[str, CaptureRecord] = {}
        self._counts: dict[tuple[str, str], int] = {}

    def observe(self, verdicts: Iterable[tuple[str, str]], targets: Callable[[], Iterable[EngineTarget]]) -> None:
        """One round's verdicts, (engine, primary stage) with "none" for none (an engine serving
        several models is held by the first that has a stage): start a capture of each engine
        whose stage has held long enough and that no capture holds back."""
        now = self._clock()
        primaries: dict[str, str] = {}
        for engine, stage in verdicts:
            if primaries.get(engine, "none") == "none":
                primaries[engine] = stage
        with self._lock:
            held = {}
            for engine, stage in primaries.items():
                if stage != "none":
                    same = self._held.get(engine)
                    held[engine] = (stage, same[1] if same is not None and same[0] == stage else now)
            self._held = held
            if not self.settings.auto or self._stop.is_set():
                return
            due = {engine for engine, (stage, since) in held.items() if self._due(engine, stage, since, now)}
            if due:
                by_name = {target.name: target for target in targets()}
                for engine in sorted(due & set(by_name)):
                    self._start(by_name[engine], *held[engine], now)

    def _due(self, engine: str, stage: str, since: float, now: float) -> bool:
        s = self.settings
        if s.stages and stage not in s.stages:
            return False
        if now - since < s.after_seconds or engine in self._in_flight:
            return False
        last = self._last_start.get(engine)
        return last is None or now - last >= s.min_interval_seconds

    def _start(self, target: EngineTarget, stage: str, since: float, now: float) -> None:
        self._last_start[target.name] = now
        log.info(
            "profile: %s primary on %s for %gs: a %gs capture", stage, target.name, now - since, self.settings.seconds
        )
        thread = threading.Thread(
            target=self._run, args=(target, stage, self.settings), name=f"profile-{target.name}", daemon=True
        )
        self._in_flight[target.name] = thread
        thread.start()

    def _run(self, target: EngineTarget, stage: str, settings: ProfileSettings) -> None:
        started = self._wall_clock()
        try:
            capture = self._capture(
                target, settings.seconds, settings.trace_dir, around=self._around, sleep=self._sleep
            )
            done = self._recorded(capture, stage)
        except ProfilingOff as exc:
            done = CaptureRecord(target.name, stage, started, "off", message=str(exc))
        except Exception as exc:  # a capture's failure is its record, never the exporter's
            done = CaptureRecord(target.name, stage, started, "failed", message=f"{type(exc).__name__}: {exc}")
        if done.result != "ok":
            log.warning("profile: %s: %s capture: %s", target.name, done.result, done.message)
        with self._lock:
            self._records[target.name] = done
            if done.result == "ok":
                self._last_trace[target.name] = done
            key = (target.name, done.result)
            self._counts[key] = self._counts.get(key, 0) + 1
            del self._in_flight[target.name]

    def _recorded(self, capture: Capture, stage: str) -> CaptureRecord:
        """The capture as a record, appended to `captures.jsonl` where it wrote a trace."""
        if not capture.traces:
            message = f"no trace was written in {capture.directory}"
            return CaptureRecord(
                capture.engine, stage, capture.started_at, "failed", capture.directory, message=message
            )
        try:
            record(capture, trigger="auto", stage=stage)
        except OSError as exc:  # the engine's directory, mounted read-only here: the trace is still there
            log.warning("profile: %s: the capture is not indexed in %s: %s", capture.engine, capture.directory, exc)
        summary = capture.summary
        return CaptureRecord(
            capture.engine,
            stage,
            capture.started_at,
            "ok",
            capture.directory,
            tuple(capture.traces),
            summary.path if summary else capture.traces[0],
            tuple(summary.lines()[:SUMMARY_LINES]) if summary else (),
        )

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Stopped("the exporter is stopping")

    def metrics(self) -> list[Metric]:
        """Captures by engine and result (every result once an engine has had one), and the last
        trace of each engine as an info series the stage alerts look up."""
        with self._lock:
            engines = sorted({engine for engine, _ in self._counts})
            out: list[Metric] = [
                Sample(
                    "llm_engine_profile_captures_total",
                    {"engine": engine, "result": result},
                    float(self._counts.get((engine, result), 0)),
                )
                for engine in engines
                for result in RESULTS
            ]
            out += [
                Sample(
                    "llm_engine_profile_info",
                    {"engine": engine, "stage": done.stage, "directory": done.directory, "trace": done.trace},
                    1.0,
                )
                for engine, done in sorted(self._last_trace.items())
            ]
        return out

    def record_of(self, engine: str) -> CaptureRecord | None:
        with self._lock:
            return self._records.get(engine)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the captures in flight (tests; shutdown does not wait)."""
        with self._lock:
            threads = list(self._in_flight.values())
        for thread in threads:
            thread.join(timeout)

    def stop(self) -> None:
        """No new capture; those in flight end their wait (daemon threads: nothing waits on them)."""
        self._stop.set()
