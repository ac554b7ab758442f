"""Numbers as people read them, shared by every renderer: missing data is said, never zero."""

from __future__ import annotations

MISSING = "no data"


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return MISSING
    if unit == "ratio":
        return f"{value:.1%}"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    if unit == "cpu":
        return f"{value:.3g}"
    magnitude = abs(value)
    if magnitude >= 100:
        text = f"{value:,.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}"


def fmt_relative(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.1%}"


def fmt_p(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "<0.001" if value < 0.001 else f"{value:.3f}"
