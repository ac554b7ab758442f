"""The case review's stage timeline places Prometheus' points on its steps: a range query's
timestamps are start + k * step as the request wrote them (to the millisecond), not this process's
floats, so a step such as 12.0684 s (the scrape interval the report measured) must still find
every point (an empty timeline was shown over a demo's run where every engine read a stage)."""

from __future__ import annotations

import pytest

from exporter.report.build import _timeline
from exporter.report.prometheus import Series


@pytest.mark.parametrize("step", [5.0, 12.0684, 7.3333333])
def test_every_point_lands_on_its_step(step: float) -> None:
    start, steps = 1796525484.0, 60
    end = start + steps * step
    points = [(round(start + k * step, 3), 1.0) for k in range(steps + 1)]
    primary = [
        Series({"engine": "e0", "stage": "decode_memory_bandwidth"}, points[:30] + [(t, 0.0) for t, _ in points[30:]]),
        Series({"engine": "e0", "stage": "none"}, [(t, 0.0) for t, _ in points[:30]] + points[30:]),
    ]
    timeline = _timeline(primary, start, end, step)
    assert timeline.engines["e0"] == ["decode_memory_bandwidth"] * 30 + ["none"] * (steps + 1 - 30)


def test_a_point_outside_the_range_is_left_out() -> None:
    series = [Series({"engine": "e0", "stage": "queueing"}, [(900.0, 1.0), (1000.0, 1.0), (1010.0, 1.0)])]
    timeline = _timeline(series, 1000.0, 1005.0, 5.0)
    assert timeline.engines["e0"] == ["queueing", None]
