"""Restarts inside the case review's windows: an engine whose process started again in a window
spent its first minutes loading and warming up (docs/health.md), so that window's figures are not
its steady state, and the review says so. A restart is `llm_engine_process_start_time_seconds` at the
window's end inside the window while the series held another start time at the window's start (a
first start is not a restart; and `changes()` alone misses a restart whose old process was gone
before the window's first sample); the number of starts from its changes, and the time it spent
warming up (`llm_engine_state{state="warming_up"}`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exporter.health.startup import SAME_START_SECONDS
from exporter.report.prometheus import PrometheusClient, Series
from exporter.report.windows import Window


def restart_warnings(
    client: PrometheusClient, selector: str, windows: Sequence[Window], last: Mapping[str, float]
) -> list[str]:
    """One line per window that holds a restart, naming the engines and how long they warmed up."""
    out = []
    inner = f"{{{selector}}}" if selector else ""
    for window in windows:
        end = min(window.end, last.get(window.name, window.end))
        span = f"{max(1, round(end - window.start))}s"
        started = client.query(f"llm_engine_process_start_time_seconds{inner} >= {window.start:.3f}", end)
        # ...and a process before it with another start time: a restart, not the first start seen
        before = client.query(f"llm_engine_process_start_time_seconds{inner}", window.start)
        earlier = _last_by_engine(before)
        restarted = {
            engine
            for engine, start in _last_by_engine(started).items()
            if engine in earlier and abs(earlier[engine] - start) >= SAME_START_SECONDS
        }
        if not restarted:
            continue
        changes = client.query(f"changes(llm_engine_process_start_time_seconds{inner}[{span}])", end)
        counts = {engine: int(value) for engine, value in _last_by_engine(changes).items()}
        warm_filter = selector + ", " if selector else ""
        warming = client.query(f'sum_over_time(llm_engine_state{{{warm_filter}state="warming_up"}}[{span}])', end)
        scrapes = {s.labels.get("engine", ""): s.points[-1][1] for s in warming if s.points}
        engines = []
        for engine in sorted(restarted):
            count = max(1, counts.get(engine, 1))
            engines.append(
                f"{engine} ({count} restart{'s' if count > 1 else ''}"
                + (f", {scrapes[engine]:.0f} samples warming up" if engine in scrapes else "")
                + ")"
            )
        out.append(
            f"{window.name}: {', '.join(engines)} restarted within the window: its first minutes are "
            "start-up and warm-up, not the steady state the other windows show"
        )
    return out


def _last_by_engine(series: Sequence[Series]) -> dict[str, float]:
    """Each series' last value by its `engine` label."""
    return {s.labels.get("engine", "?"): s.points[-1][1] for s in series if s.points}
