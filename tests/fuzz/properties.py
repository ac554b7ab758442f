"""What every fuzzer of outside input checks, shared by the hypothesis tests
(tests/unit/test_fuzz_inputs.py) and the coverage-guided atheris harnesses (tests/fuzz/*_fuzzer.py).

* A source's `collect` raises nothing but SourceError: anything else the collection loop would
  count as a bug (reason="exception").
* What the source returns renders (exporter.exposition.render_text) to exposition text that
  prometheus_client parses back with every sample intact.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.exposition import render_text
from exporter.loop import Snapshot, SourceStatus
from exporter.model import Metric, QuantileSummary
from exporter.sources.base import Source, SourceError, collect_now
from exporter.sources.http_fetch import READ_BYTES


def collect(
    source: Source, now: float = 0.0, note: Callable[[str], None] = lambda _: None
) -> tuple[list[Metric], SourceStatus]:
    """Collect once as the loop does; only SourceError may escape (anything else propagates and
    fails the fuzzer as a bug). `note` hears "up" or "down (reason)", for hypothesis' events."""
    try:
        metrics = list(collect_now(source, now))
        note(f"{source.name}: up")
        return metrics, SourceStatus(source.name, source.target, True, 0.001)
    except SourceError as exc:
        note(f"{source.name}: down ({exc.reason})")
        return list(source.down_metrics()), SourceStatus(source.name, source.target, False, 0.001, exc.reason)


def assert_renders_and_parses_back(metrics: list[Metric], statuses: list[SourceStatus]) -> None:
    errors = {(s.source, s.target, s.error): 1 for s in statuses if not s.up}
    snapshot = Snapshot(metrics=tuple(metrics), statuses=tuple(statuses), error_counts=errors, generated_at=0.0)
    text = render_text(snapshot).decode("utf-8")
    parsed = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    for metric in metrics:
        labels = tuple(sorted(metric.labels.items()))
        if isinstance(metric, QuantileSummary):
            name, value = metric.name + "_count", metric.count
        else:
            name, value = metric.name, metric.value
        got = parsed[(name, labels)]
        assert got == value or (math.isnan(got) and math.isnan(value)), (name, labels, got, value)


FILE_FATES = ("write", "remove", "unreadable")


def change_file(path: Path, fate: str, content: bytes = b"") -> None:
    """Give a sysfs file a fate, as a kernel (or a failing driver) would: new `content`, gone, or
    unreadable for root too (a directory where the file was: reading fails with EISDIR, the way a
    driver's show() failing with EIO does). A file already made a directory is a file again first."""
    if path.is_dir():
        path.rmdir()
    if fate == "write" or not path.exists():
        path.write_bytes(content)
    elif fate == "remove":
        path.unlink()
    else:
        path.unlink()
        path.mkdir()


class CannedBody:
    """What `http_fetch.open_body` yields, for a payload held in memory: the same chunking into
    socket-sized reads, so a source parses it as it would a streamed response."""

    def __init__(self, data: bytes, content_type: str) -> None:
        self.data = data
        self.content_type = content_type
        self.size = 0

    async def next_chunk(self) -> bytes:
        chunk = self.data[self.size : self.size + READ_BYTES]
        self.size += len(chunk)
        return chunk

    async def read(self) -> bytearray:
        return bytearray(self.data)


def canned_open_body(
    payload: Callable[[], bytes], content_type: str = "text/plain; version=0.0.4"
) -> Callable[..., AbstractAsyncContextManager[CannedBody]]:
    """A stand-in for `open_body` (same call shape) that answers `payload()` instead of a server."""

    @asynccontextmanager
    async def open_body(*_args: Any, **_kwargs: Any) -> AsyncIterator[CannedBody]:
        yield CannedBody(payload(), content_type)

    return open_body
