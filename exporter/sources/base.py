"""The one interface every source implements, in the spirit of node_exporter's collectors.

A source knows how to read one thing and turn it into normalized metrics. It knows nothing of
HTTP serving, other sources or the registry; the collection loop times it, bounds it, and reports
its success as `llm_exporter_source_up` instead of failing the scrape.

`collect` is one method in one of two forms. A source that fetches over HTTP writes it as a
coroutine (`async def`): the loop awaits it on the shared event loop (exporter.sources.event_loop),
where every fetch waits on its socket, not on a thread. A source whose reading blocks (a C
library such as NVML or DCGM, sysfs, /proc) writes a plain function: the loop runs it in its
bounded thread pool. Callers outside the loop use `collect_now`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from exporter.model import Metric
from exporter.sources import event_loop


class SourceError(Exception):
    """A collection failure with a short machine-readable reason for `source_errors_total`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Source(ABC):
    #: kind of source, the `source` label: "engine", "nvml", "rdma", ...
    name: str = ""
    #: instance within the kind, the `target` label ("" for node-wide sources)
    target: str = ""
    #: seconds the loop waits for `collect` before marking the source down
    timeout_seconds: float = 2.0
    #: what the last `collect` left out though it succeeded (over budget, impossible values,
    #: malformed lines): a reason of `llm_exporter_source_errors_total` -> items; the loop reads it
    #: right after `collect`. Most sources never leave anything out.
    discards: Mapping[str, int] = MappingProxyType({})

    @abstractmethod
    def collect(self, now: float) -> list[Metric] | Awaitable[list[Metric]]:
        """Read the source once; raise SourceError (or anything) on failure. A coroutine for
        sources that fetch (awaited on the event loop), a plain function for those that block.

        `now` is a monotonic timestamp shared by every source of one collection, for windows.
        """

    def deadline_seconds(self) -> float:
        """How long the loop waits for the collection now starting or running: `timeout_seconds`,
        unless the source's own start-up (loading a library, finding devices) is still ahead."""
        return self.timeout_seconds

    def down_metrics(self) -> list[Metric]:
        """What to export while the source is failing (e.g. `llm_engine_up 0`)."""
        return []

    def close(self) -> None:  # noqa: B027 - an optional hook: most sources hold nothing to release
        """Release connections, handles or libraries."""


def is_async(source: Source) -> bool:
    """Whether the source's `collect` is a coroutine (awaited on the event loop, not run in a thread)."""
    return inspect.iscoroutinefunction(source.collect)


def collect_now(source: Source, now: float) -> list[Metric]:
    """`collect` for a caller outside the collection loop (`once`, tests): a coroutine is run on
    the shared event loop and waited for, a plain function called."""
    if is_async(source):
        return event_loop.run(source.collect(now))  # type: ignore[arg-type]
    return source.collect(now)  # type: ignore[return-value]


class SourceGroup(Protocol):
    """Sources whose membership changes at run time; the group owns (and closes) its members."""

    #: the most members the group will hold at once, to size the worker pool
    max_sources: int

    def sources(self) -> Sequence[Source]:
        """The current members; the loop calls this once per round."""

    def close(self) -> None:
        """Stop finding members and close every member."""
