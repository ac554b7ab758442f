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
    return f"{text}{unit}" if unit.startswith("/") else f"{text} {unit}"


def fmt_seconds(seconds: float) -> str:
    """`45 s`, `5 min`, `1 h 30 min`: a span of time as people say it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return (
        f"{minutes} min" if minutes < 120 else f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")
    )


def fmt_interval(seconds: float) -> str:
    """A measured interval (the scrape interval, the step, the rate window): three significant
    figures, whole seconds from 100 s on, so a scrape interval measured at 5.01635 s reads `5.02 s`.
    The queries keep the exact figures."""
    return f"{seconds:.0f} s" if seconds >= 100 else f"{seconds:.3g} s"


def fmt_change(absolute: float | None, relative: float | None, unit: str) -> str:
    """The change as a percentage or factor; from a zero start, as an amount (`+0.75/s`), since a
    real 0 is a value, not missing data."""
    if relative is not None:
        return fmt_relative(relative)
    if absolute is None:
        return MISSING
    if absolute == 0:
        return "no change"
    return ("+" if absolute > 0 else "-") + fmt_value(abs(absolute), unit)


def fmt_relative(value: float | None) -> str:
    """`+36.1%`; a change past ten-fold as a factor (`×1,133`), which reads where `+113200%` does not."""
    if value is None:
        return MISSING
    return f"×{1 + value:,.0f}" if value >= 9 else f"{value:+.1%}"


def fmt_p(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "<0.001" if value < 0.001 else f"{value:.3f}"
