"""The collection loop: every source in parallel, each bounded by its own timeout.

Scrapes of /metrics read the last published Snapshot and never wait for a collection, so a slow
engine costs its own series at most, never the scrape. A source still running from an earlier
round is not started twice; it is reported down ("timeout") until it returns.

A round runs on the shared event loop (exporter.sources.event_loop): a source whose `collect` is a
coroutine (every HTTP fetch) is awaited there, one whose `collect` blocks (NVML, DCGM, sysfs,
/proc) runs in a daemon thread of its own. Stopping cancels what is in flight and no blocking call
is waited on, so neither a target nor a device can hold the process past its shutdown.

Sources found at run time (engines discovered from the Kubernetes API) come from SourceGroups,
which the loop asks for their current members at the start of every round.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from exporter.model import Metric
from exporter.sources import event_loop
from exporter.sources.base import Source, SourceError, SourceGroup, is_async

log = logging.getLogger(__name__)

# Extra time the loop grants beyond a source's own timeout, so the source's own clean error
# (with its precise reason) usually wins over the loop's blunt one.
TIMEOUT_GRACE_SECONDS = 0.25
#: in a loop's first round, how often what has returned is published while slower sources run
FIRST_ROUND_PUBLISH_SECONDS = 0.5


@dataclass(frozen=True)
class SourceStatus:
    source: str
    target: str
    up: bool
    duration_seconds: float
    error: str = ""
    #: what the failure said (the line the exporter logs), for /diagnosis
    message: str = ""


@dataclass(frozen=True)
class Snapshot:
    """One completed collection: what /metrics serves until the next one is published."""

    metrics: tuple[Metric, ...]
    statuses: tuple[SourceStatus, ...]
    error_counts: dict[tuple[str, str, str], int]
    generated_at: float  # wall clock, for /diagnosis and logs
    sequence: int = 0
    #: (source, target) of the sources still running when a partial snapshot of a loop's first
    #: round was published; empty in every complete snapshot
    pending: tuple[tuple[str, str], ...] = ()
    #: (source, target) -> the loop's clock when that source's answer was in hand, for each source
    #: that answered: a round lasts as long as its slowest source (up to a timeout), and a source
    #: still running from an earlier round answers in a later one, so the round's end is not when
    #: a source's counters were read; rates over them (the diagnosis' History) use these times
    answered_at: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.pending


@dataclass
class _Running:
    task: asyncio.Future[_Outcome]
    started: float
    source: Source


def _untraced(error: Exception) -> Exception:
    """A source's expected failure (SourceError) without the tracebacks of its chain. A traceback
    holds the frames it passed through, and the frame that caught the error holds the error: a
    reference cycle that kept each failed run's frames, and what they held (a parse of a refused
    body, its connection), until a full garbage collection, every round a target fails. Nothing
    reads them: the reason and message say what failed. A bug (any other exception) keeps its
    traceback for the log."""
    if isinstance(error, SourceError):
        link: BaseException | None = error
        seen: set[int] = set()
        while link is not None and id(link) not in seen:
            seen.add(id(link))
            link.__traceback__ = None
            link = link.__cause__ or link.__context__
    return error


@dataclass(frozen=True)
class _Outcome:
    """What one run of a source returned, timed around the source's own work: the loop collects
    results in order, so a clock read there would charge every source the wait for earlier ones."""

    metrics: list[Metric]
    duration_seconds: float
    #: reason -> items the source left out of its output this run (see exporter.budget)
    discards: Mapping[str, int]
    error: BaseException | None = None
    #: the loop's clock when the answer was in hand; NaN where the run failed
    answered_at: float = math.nan


class CollectionLoop:
    def __init__(
        self,
        sources: Sequence[Source],
        interval_seconds: float,
        on_snapshot: Callable[[Snapshot], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        groups: Sequence[SourceGroup] = (),
    ) -> None:
        self.sources = list(sources)
        self.groups = list(groups)
        self.interval_seconds = interval_seconds
        self._on_snapshot = on_snapshot
        self._clock = clock
        # Keyed by id(source); `_Running.source` guards against an id reused by a new source.
        # Read and written on the event loop only.
        self._in_flight: dict[int, _Running] = {}
        self._error_counts: dict[tuple[str, str, str], int] = {}
        self._sequence = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: the round in progress (on the event loop), which `stop` cancels
        self._round: concurrent.futures.Future[Snapshot] | None = None
        self.snapshot: Snapshot | None = None
        self.last_completed_monotonic: float | None = None

    def current_sources(self) -> list[Source]:
        """The fixed sources plus each group's members as of now."""
        return self.sources + [source for group in self.groups for source in group.sources()]

    def collect_once(self) -> Snapshot:
        """Run every source (in parallel, on the event loop) and publish the resulting snapshot;
        concurrent.futures.CancelledError when `stop` cancelled it."""
        now = self._clock()
        sources = self.current_sources()
        self._round = event_loop.submit(self._collect(now, sources))
        if self._stop.is_set():
            self._round.cancel()
        try:
            snapshot = self._round.result()
        finally:
            self._round = None
        self.last_completed_monotonic = self._clock()
        if self._on_snapshot is not None:
            self._on_snapshot(snapshot)
        return snapshot

    async def _collect(self, now: float, sources: list[Source]) -> Snapshot:
        current = {id(source) for source in sources}
        # A source its group dropped (a deleted pod) is forgotten even if still running.
        for index in [k for k in self._in_flight if k not in current]:
            del self._in_flight[index]
        # ...and so are its error counts, or every pod that ever failed would stay a series.
        live = {(source.name, source.target) for source in sources}
        for gone in [k for k in self._error_counts if (k[0], k[1]) not in live]:
            del self._error_counts[gone]
        for source in sources:
            running = self._in_flight.get(id(source))
            if running is not None and running.source is source:
                continue
            self._in_flight[id(source)] = _Running(asyncio.ensure_future(self._run_source(source, now)), now, source)
        if self.snapshot is None and self._on_snapshot is not None:
            await self._publish_as_sources_return(sources)
        metrics: list[Metric] = []
        statuses: list[SourceStatus] = []
        answered: dict[tuple[str, str], float] = {}
        for source in sources:
            index = id(source)
            running = self._in_flight[index]
            allowed = source.deadline_seconds()
            deadline = running.started + allowed + TIMEOUT_GRACE_SECONDS
            if not running.task.done():
                await asyncio.wait([running.task], timeout=max(0.0, deadline - self._clock()))
            if not running.task.done():
                waited = self._clock() - running.started  # still running: its duration so far
                statuses.append(self._failed(source, "timeout", f"still running after {allowed:g}s", waited))
                metrics.extend(source.down_metrics())
                continue
            del self._in_flight[index]
            outcome = _outcome_of(running.task)
            status, produced, reasons = self._result(source, outcome)
            for reason in reasons:
                self._count(source, reason)
            if not status.up:
                shown = source.target or "-"
                log.warning("source %s %s down (%s): %s", source.name, shown, status.error, outcome.error)
            metrics.extend(produced)
            statuses.append(status)
            if status.up:
                answered[(source.name, source.target)] = outcome.answered_at
        self._sequence += 1
        self.snapshot = Snapshot(
            metrics=tuple(metrics),
            statuses=tuple(statuses),
            error_counts=dict(self._error_counts),
            generated_at=time.time(),
            sequence=self._sequence,
            answered_at=answered,
        )
        return self.snapshot

    def _result(self, source: Source, outcome: _Outcome) -> tuple[SourceStatus, list[Metric], list[str]]:
        """(status, series, reasons to count) of one returned run: no side effects, so a partial
        snapshot of the first round can show it before the round is complete."""
        error = outcome.error
        if error is not None:
            if isinstance(error, SourceError):
                reason = error.reason
            else:  # a bug in one source must not stop the others
                log.error("source %s %s raised", source.name, source.target, exc_info=error)
                reason = "exception"
            status = SourceStatus(source.name, source.target, False, outcome.duration_seconds, reason, str(error))
            return status, source.down_metrics(), [reason]
        # up, but part of its output was left out: one count per round
        status = SourceStatus(source.name, source.target, True, outcome.duration_seconds)
        return status, outcome.metrics, list(outcome.discards)

    async def _publish_as_sources_return(self, sources: Sequence[Source]) -> None:
        """The first round (of this loop: at start and after a reload) publishes what has returned
        every FIRST_ROUND_PUBLISH_SECONDS while slower sources still run, so /metrics does not wait
        on the slowest source (up to its timeout) for its first series.

        A source still running is absent from such a partial snapshot (no series, no
        `llm_exporter_source_up`: neither up nor failed yet); the round then completes as any other
        and publishes the complete snapshot. Readiness (`last_completed_monotonic`) still means the
        first complete collection, and the partial snapshots count no errors.
        """
        runs = {id(source): self._in_flight[id(source)] for source in sources}
        published = 0
        while True:
            pending = [run.task for run in runs.values() if not run.task.done()]
            if not pending:
                return
            now = self._clock()
            last_deadline = max(
                run.started + run.source.deadline_seconds() + TIMEOUT_GRACE_SECONDS
                for run in runs.values()
                if not run.task.done()
            )
            if now >= last_deadline:
                return  # the round's own wait reports them as timed out
            await asyncio.wait(pending, timeout=min(FIRST_ROUND_PUBLISH_SECONDS, last_deadline - now))
            done = [source for source in sources if runs[id(source)].task.done()]
            if len(done) == len(sources):
                return  # complete: the round publishes it
            if len(done) == published:
                continue
            published = len(done)
            metrics: list[Metric] = []
            statuses: list[SourceStatus] = []
            for source in done:
                status, produced, _ = self._result(source, _outcome_of(runs[id(source)].task))
                metrics.extend(produced)
                statuses.append(status)
            pending_names = tuple((s.name, s.target) for s in sources if not runs[id(s)].task.done())
            partial = Snapshot(
                metrics=tuple(metrics),
                statuses=tuple(statuses),
                error_counts=dict(self._error_counts),
                generated_at=time.time(),
                sequence=self._sequence,
                pending=pending_names,
            )
            self.snapshot = partial
            assert self._on_snapshot is not None
            self._on_snapshot(partial)

    def inherit_error_counts(self, previous: CollectionLoop) -> None:
        """Continue the error counters of the loop this one replaces (a configuration reload), so
        llm_exporter_source_errors_total does not reset; counts of sources gone are dropped at the
        first round, as for any source that leaves."""
        for key, count in previous._error_counts.items():
            self._error_counts[key] = self._error_counts.get(key, 0) + count

    async def _run_source(self, source: Source, now: float) -> _Outcome:
        """One run of a source: awaited here if its `collect` is a coroutine, else in a worker."""
        started = self._clock()
        if not is_async(source):
            if self._stop.is_set():
                return _Outcome([], 0.0, {}, SourceError("timeout", "cancelled: the loop is stopping"))
            return await asyncio.wrap_future(
                event_loop.in_daemon_thread(f"source-{source.name}", self._run_blocking, source, now)
            )
        try:
            metrics = list(await source.collect(now))  # type: ignore[misc]
        except Exception as exc:
            return _Outcome([], self._clock() - started, {}, _untraced(exc))
        return self._answered(source, metrics, started)

    def _run_blocking(self, source: Source, now: float) -> _Outcome:
        """Run in a worker: the source's own wall time is measured here, around its own work."""
        started = self._clock()
        try:
            metrics = list(source.collect(now))  # type: ignore[arg-type]
        except Exception as exc:
            return _Outcome([], self._clock() - started, {}, _untraced(exc))
        return self._answered(source, metrics, started)

    def _answered(self, source: Source, metrics: list[Metric], started: float) -> _Outcome:
        finished = self._clock()
        discards = dict(source.discards)
        return _Outcome(metrics, finished - started, discards, answered_at=finished)

    def _count(self, source: Source, reason: str) -> None:
        key = (source.name, source.target, reason)
        self._error_counts[key] = self._error_counts.get(key, 0) + 1

    def _failed(self, source: Source, reason: str, message: str, duration: float) -> SourceStatus:
        self._count(source, reason)
        log.warning("source %s %s down (%s): %s", source.name, source.target or "-", reason, message)
        return SourceStatus(source.name, source.target, False, duration, reason, message)

    def start(self) -> None:
        """Collect now, then every interval, in a background thread."""
        self._thread = threading.Thread(target=self._run, name="collection-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_round = self._clock()
        while not self._stop.is_set():
            try:
                self.collect_once()
            except concurrent.futures.CancelledError:
                return  # stopped mid-round
            except Exception:  # the loop itself must outlive any bug
                log.exception("collection round failed")
            next_round += self.interval_seconds
            delay = next_round - self._clock()
            if delay < 0:  # a round overran (or the clock jumped): skip missed ticks
                next_round = self._clock()
                delay = 0
            self._stop.wait(delay)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop collecting: the round in progress and every source still running are cancelled
        (a fetch ends at once, whatever its target does), then the sources are closed."""
        self._stop.set()
        running = self._round
        if running is not None:
            running.cancel()
        event_loop.loop().call_soon_threadsafe(self._cancel_in_flight)
        if self._thread is not None:
            self._thread.join(timeout=10)
        for source in self.sources:
            try:
                source.close()
            except Exception:
                log.exception("closing source %s %s", source.name, source.target)
        for group in self.groups:
            try:
                group.close()
            except Exception:
                log.exception("closing source group %r", group)

    def _cancel_in_flight(self) -> None:
        for running in self._in_flight.values():
            running.task.cancel()


def _outcome_of(task: asyncio.Future[_Outcome]) -> _Outcome:
    """A finished run's outcome; a run cancelled without the loop stopping counts as timed out."""
    if task.cancelled():
        return _Outcome([], 0.0, {}, SourceError("timeout", "cancelled"))
    error = task.exception()
    if error is not None:
        return _Outcome([], 0.0, {}, error)
    return task.result()
