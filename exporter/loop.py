"""The collection loop: every source in parallel, each bounded by its own timeout.

Scrapes of /metrics read the last published Snapshot and never wait for a collection, so a slow
engine costs its own series at most, never the scrape. A source still running from an earlier
round is not started twice; it is reported down ("timeout") until it returns.

Sources found at run time (engines discovered from the Kubernetes API) come from SourceGroups,
which the loop asks for their current members at the start of every round.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from exporter.budget import Discarding
from exporter.model import Metric
from exporter.sources import multiplex
from exporter.sources.base import Source, SourceError, SourceGroup
from exporter.sources.multiplex import Fetch

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
    future: Future[_Outcome]
    started: float
    source: Source


@dataclass(frozen=True)
class _Outcome:
    """What one run of a source returned, timed by the worker that ran it: the loop collects
    results in order, so a clock read there would charge every source the wait for earlier ones."""

    metrics: list[Metric]
    duration_seconds: float
    #: reason -> items the source left out of its output this run (see exporter.budget)
    discards: Mapping[str, int]
    error: Exception | None = None
    #: the loop's clock when the answer was in hand (its body read, before its parsing's share of
    #: a multiplexed round); NaN where the run failed
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
        workers = max(4, 2 * len(self.sources)) + sum(2 * group.max_sources for group in self.groups)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="source")
        # Keyed by id(source); `_Running.source` guards against an id reused by a new source.
        self._in_flight: dict[int, _Running] = {}
        self._error_counts: dict[tuple[str, str, str], int] = {}
        self._sequence = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.snapshot: Snapshot | None = None
        self.last_completed_monotonic: float | None = None

    def current_sources(self) -> list[Source]:
        """The fixed sources plus each group's members as of now."""
        return self.sources + [source for group in self.groups for source in group.sources()]

    def collect_once(self) -> Snapshot:
        """Run every source (in parallel) and publish the resulting snapshot."""
        now = self._clock()
        sources = self.current_sources()
        current = {id(source) for source in sources}
        # A source its group dropped (a deleted pod) is forgotten even if still running.
        for index in [k for k in self._in_flight if k not in current]:
            del self._in_flight[index]
        # ...and so are its error counts, or every pod that ever failed would stay a series.
        live = {(source.name, source.target) for source in sources}
        for gone in [k for k in self._error_counts if (k[0], k[1]) not in live]:
            del self._error_counts[gone]
        batch: list[tuple[Source, Fetch, Future[_Outcome]]] = []
        for source in sources:
            running = self._in_flight.get(id(source))
            if running is not None and running.source is source:
                continue
            fetch = self._offered(source, now)
            if fetch is None:
                future = self._executor.submit(self._run_source, source, now)
            else:
                future = Future()
                batch.append((source, fetch, future))
            self._in_flight[id(source)] = _Running(future, now, source)
        if batch:
            self._executor.submit(self._run_multiplexed, batch, now)
        if self.snapshot is None and self._on_snapshot is not None:
            self._publish_as_sources_return(sources)
        metrics: list[Metric] = []
        statuses: list[SourceStatus] = []
        answered: dict[tuple[str, str], float] = {}
        for source in sources:
            index = id(source)
            running = self._in_flight[index]
            deadline = running.started + source.timeout_seconds + TIMEOUT_GRACE_SECONDS
            try:
                outcome = running.future.result(timeout=max(0.0, deadline - self._clock()))
            except FutureTimeout:
                waited = self._clock() - running.started  # still running: its duration so far
                statuses.append(
                    self._failed(source, "timeout", f"still running after {source.timeout_seconds:g}s", waited)
                )
                metrics.extend(source.down_metrics())
                continue
            del self._in_flight[index]
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
        snapshot = Snapshot(
            metrics=tuple(metrics),
            statuses=tuple(statuses),
            error_counts=dict(self._error_counts),
            generated_at=time.time(),
            sequence=self._sequence,
            answered_at=answered,
        )
        self.snapshot = snapshot
        self.last_completed_monotonic = self._clock()
        if self._on_snapshot is not None:
            self._on_snapshot(snapshot)
        return snapshot

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

    def _publish_as_sources_return(self, sources: Sequence[Source]) -> None:
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
            pending = [run.future for run in runs.values() if not run.future.done()]
            if not pending:
                return
            now = self._clock()
            last_deadline = max(
                run.started + run.source.timeout_seconds + TIMEOUT_GRACE_SECONDS
                for run in runs.values()
                if not run.future.done()
            )
            if now >= last_deadline:
                return  # the round's own wait reports them as timed out
            wait(pending, timeout=min(FIRST_ROUND_PUBLISH_SECONDS, last_deadline - now), return_when=ALL_COMPLETED)
            done = [source for source in sources if runs[id(source)].future.done()]
            if len(done) == len(sources):
                return  # complete: the round publishes it
            if len(done) == published:
                continue
            published = len(done)
            metrics: list[Metric] = []
            statuses: list[SourceStatus] = []
            for source in done:
                status, produced, _ = self._result(source, runs[id(source)].future.result())
                metrics.extend(produced)
                statuses.append(status)
            pending_names = tuple((s.name, s.target) for s in sources if not runs[id(s)].future.done())
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

    def _run_source(self, source: Source, now: float) -> _Outcome:
        """Run in a worker: the source's own wall time is measured here, around its own work."""
        started = self._clock()
        try:
            metrics = list(source.collect(now))
        except Exception as exc:
            return _Outcome([], self._clock() - started, {}, exc)
        finished = self._clock()
        discards = dict(source.discards) if isinstance(source, Discarding) else {}
        return _Outcome(metrics, finished - started, discards, answered_at=finished)

    def _offered(self, source: Source, now: float) -> Fetch | None:
        """The source's fetch for the multiplexing thread, or None (a bug there: `collect` as usual)."""
        try:
            return source.multiplexed(now)
        except Exception:
            log.exception("source %s %s: no multiplexed fetch", source.name, source.target)
            return None

    def _run_multiplexed(self, batch: Sequence[tuple[Source, Fetch, Future[_Outcome]]], now: float) -> None:
        """Run in one worker: the batch's GETs on one thread (exporter.sources.multiplex), each
        source's outcome set as its response is read, parsed and normalized; a source whose
        response needs the blocking path runs `collect` in a worker of its own."""
        started = self._clock()
        by_fetch = {id(fetch): (source, future) for source, fetch, future in batch}

        def done(fetch: Fetch, error: Exception | None) -> None:
            source, future = by_fetch[id(fetch)]
            answered = self._clock()  # the response is read: what follows is normalizing it
            try:
                outcome = settle(source, fetch, error, future, answered)
            except Exception as exc:  # a bug here must not leave the source in flight for good
                outcome = _Outcome([], self._clock() - started, {}, exc)
            if outcome is not None:
                future.set_result(outcome)

        def settle(
            source: Source, fetch: Fetch, error: Exception | None, future: Future[_Outcome], answered: float
        ) -> _Outcome | None:
            """The source's outcome, or None when a worker of its own will set it (a Fallback)."""
            if isinstance(error, multiplex.Fallback):
                chained = self._executor.submit(self._run_source, source, now)  # RuntimeError once stopping

                def relay(ran: Future[_Outcome]) -> None:
                    try:
                        future.set_result(ran.result())
                    except Exception as exc:  # cancelled as the loop stopped
                        future.set_result(_Outcome([], self._clock() - started, {}, exc))

                chained.add_done_callback(relay)
                return None
            if error is None:
                try:
                    metrics = fetch.finish()
                except Exception as exc:
                    return _Outcome([], self._clock() - started, {}, exc)
                discards = dict(source.discards) if isinstance(source, Discarding) else {}
                return _Outcome(metrics, self._clock() - started, discards, answered_at=answered)
            return _Outcome([], self._clock() - started, {}, error)

        try:
            multiplex.run([fetch for _, fetch, _ in batch], done)
        except Exception as exc:  # the loop itself: every source of the batch still open fails
            log.error("multiplexed collection failed", exc_info=exc)
            for _, _, future in batch:
                if not future.done():
                    future.set_result(_Outcome([], self._clock() - started, {}, exc))

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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._executor.shutdown(wait=False, cancel_futures=True)
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
