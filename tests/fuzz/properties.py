"""What every fuzzer of outside input checks, shared by the hypothesis tests
(tests/unit/test_fuzz_inputs.py) and the coverage-guided atheris harnesses (tests/fuzz/*_fuzzer.py).

* A source's `collect` raises nothing but SourceError: anything else the collection loop would
  count as a bug (reason="exception").
* What the source returns renders (exporter.exposition.render_text) to exposition text that
  prometheus_client parses back with every sample intact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from exporter.exposition import render_text
from exporter.loop import Snapshot, SourceStatus
from exporter.model import Metric, QuantileSummary
from exporter.sources.base import Source, SourceError


def collect(
    source: Source, now: float = 0.0, note: Callable[[str], None] = lambda _: None
) -> tuple[list[Metric], SourceStatus]:
    """Collect once as the loop does; only SourceError may escape (anything else propagates and
    fails the fuzzer as a bug). `note` hears "up" or "down (reason)", for hypothesis' events."""
    try:
        metrics = list(source.collect(now))
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
