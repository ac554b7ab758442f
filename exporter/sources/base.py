"""The one interface every source implements, in the spirit of node_exporter's collectors.

A source knows how to read one thing and turn it into normalized metrics. It knows nothing of
HTTP serving, other sources or the registry; the collection loop times it, bounds it, and reports
its success as `llm_exporter_source_up` instead of failing the scrape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from exporter.model import Metric

if TYPE_CHECKING:
    from exporter.sources.multiplex import Fetch


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

    @abstractmethod
    def collect(self, now: float) -> list[Metric]:
        """Read the source once; raise SourceError (or anything) on failure.

        `now` is a monotonic timestamp shared by every source of one collection, for windows.
        """

    def down_metrics(self) -> list[Metric]:
        """What to export while the source is failing (e.g. `llm_engine_up 0`)."""
        return []

    def multiplexed(self, now: float) -> Fetch | None:
        """This round's collection as one plain-HTTP GET that the loop may run with others' on one
        thread (exporter.sources.multiplex), or None (the default): `collect` in a worker."""
        return None

    def close(self) -> None:  # noqa: B027 - an optional hook: most sources hold nothing to release
        """Release connections, handles or libraries."""


class SourceGroup(Protocol):
    """Sources whose membership changes at run time; the group owns (and closes) its members."""

    #: the most members the group will hold at once, to size the worker pool
    max_sources: int

    def sources(self) -> Sequence[Source]:
        """The current members; the loop calls this once per round."""

    def close(self) -> None:
        """Stop finding members and close every member."""
