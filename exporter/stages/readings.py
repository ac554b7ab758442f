"""Misreadings of the report's matrix that several stages share (each stage's own are beside it)."""

from __future__ import annotations

from exporter.stages.record import Readings


def average_hides_p99(readings: Readings) -> list[str]:
    """The seed case's misreading: the mean moved little while the tail moved a lot."""
    p50, p99 = readings.ratio("e2e_p50"), readings.ratio("e2e_p99")
    if p50 is not None and p99 is not None and p99 > 1.2 * p50:
        return [f"an average hides P99: E2E P50 moved ×{p50:.2f}, P99 ×{p99:.2f}"]
    return []
