"""The case review's stage timeline places Prometheus' points on its steps: a range query's
timestamps are start + k * step as the request wrote them (to the millisecond), not this process's
floats, so a step such as 12.0684 s (the scrape interval the report measured) must still find
every point (an empty timeline was shown over a demo's run where every engine read a stage)."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from exporter.report.build import _timeline
from exporter.report.plots import PlainLogFormatter
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


def test_log_axes_write_seconds_as_numbers_not_powers_of_ten() -> None:
    """A latency band's axis reads "20", "0.1", not "2 × 10¹" or "1e-01"; minor ticks are
    labelled only where the axis spans about a decade, as matplotlib decides."""

    def labels(low: float, high: float) -> tuple[list[str], list[str]]:
        figure = Figure()
        ax = figure.subplots()
        ax.plot([0, 1], [low, high])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(PlainLogFormatter())
        ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))
        figure.canvas.draw()
        return (
            [t.get_text() for t in ax.get_yticklabels() if t.get_text()],
            [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()],
        )

    major, minor = labels(0.05, 60)
    assert major == ["0.01", "0.1", "1", "10", "100"] and minor == []
    major, minor = labels(10, 60)
    assert "10" in major and {"20", "30", "40", "60"} <= set(minor)
