"""Time windows of a report: `START/END` as RFC 3339, Unix seconds or relative to now.

Relative times are Prometheus durations before now (`-2h`, `-1h30m`, `-90s`) or `now`, so
`--baseline -2h/-1h --incident -1h/now` reads as it would in a Prometheus or Grafana time picker.
A bad window is a WindowError naming its flag, which the command line turns into exit 2.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

_DURATION = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNIT_SECONDS = (7 * 86400, 86400, 3600, 60, 1, 0.001)
_UNIX = re.compile(r"^\d+(?:\.\d+)?$")


class WindowError(ValueError):
    """A window that cannot be read, or that is empty; the message names the flag."""


@dataclass(frozen=True)
class Window:
    """`[start, end]` in Unix seconds, named (`baseline`, `incident`, `after`)."""

    name: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def aligned(self, step: float) -> Window:
        """Edges moved inwards to multiples of `step`, so range queries and subqueries (whose
        evaluation times Prometheus aligns to the step) read the same instants."""
        start = math.ceil(self.start / step) * step
        end = math.floor(self.end / step) * step
        return Window(self.name, start, max(start, end))


def parse_duration(text: str) -> float:
    """Seconds of a Prometheus duration (`1h30m`, `90s`, `2d`); ValueError otherwise."""
    match = _DURATION.match(text)
    if not text or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration such as 90s, 5m, 1h30m or 2d")
    return sum(int(part) * unit for part, unit in zip(match.groups(), _UNIT_SECONDS) if part)


def parse_time(text: str, now: float) -> float:
    """Unix seconds of `now`, `-DURATION`, Unix seconds or an RFC 3339 time with its offset."""
    text = text.strip()
    if text == "now":
        return now
    if text.startswith("-"):
        return now - parse_duration(text[1:])
    if _UNIX.match(text):
        return float(text)
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{text!r} is not RFC 3339, Unix seconds, now or -DURATION") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset (add Z or +HH:MM)")
    return moment.timestamp()


def parse_window(flag: str, name: str, text: str, now: float) -> Window:
    """`START/END` of `flag`; WindowError when unreadable, empty, reversed or in the future."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise WindowError(f"{flag}: {text!r} is not START/END (e.g. -2h/-1h or 2026-01-01T10:00:00Z/now)")
    try:
        start, end = (parse_time(p, now) for p in parts)
    except ValueError as exc:
        raise WindowError(f"{flag}: {exc}") from None
    if end <= start:
        raise WindowError(f"{flag}: the end {parts[1]!r} is not after the start {parts[0]!r}")
    if start > now:
        raise WindowError(f"{flag}: the window starts in the future")
    return Window(name, start, min(end, now))
