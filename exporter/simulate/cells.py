"""Fitting values into a terminal's cells: cropping with an ellipsis, ranges, short engine lists.

The demo's screen (frame.py) must fit 80 columns, so every piece of text it shows goes through
these; they count cells (rich.cells), not characters, so "–" and "…" are measured right.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len

from exporter.simulate.view import natural_key

#: what a missing value reads as: one dash, never followed by a unit ("–", not "-s")
MISSING = "–"


def crop(text: str, width: int) -> str:
    """`text` in at most `width` cells, an ellipsis marking what was cut."""
    if cell_len(text) <= width:
        return text
    while text and cell_len(text) > width - 1:
        text = text[:-1]
    return text + "…"


def crop_left(text: str, width: int) -> str:
    """Like crop, keeping the end (an engine's replica number is at the end of its name)."""
    if cell_len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :]


def number(value: Any, fmt: str, unit: str = "", scale: float = 1.0) -> str:
    """A value with its unit, or MISSING when the exporter has none."""
    if not isinstance(value, (int, float)) or math.isnan(value):
        return MISSING
    return format(value * scale, fmt) + unit


def span(values: Iterable[Any], fmt: str) -> str:
    """The range of some values as "lo–hi" (one value when they agree), MISSING when there are none."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    if not numbers:
        return MISSING
    low, high = format(min(numbers), fmt), format(max(numbers), fmt)
    return low if low == high else f"{low}–{high}"


def engine_set(names: Sequence[str], total: int) -> str:
    """A few engine names in little room: "all 8 engines", or a shared prefix with the suffixes."""
    names = sorted(names, key=natural_key)
    if len(names) == total and total > 1:
        return f"all {total} engines"
    if len(names) == 1:
        return names[0]
    prefix = os.path.commonprefix(names)
    if len(prefix) >= 3:
        return prefix + "{" + ",".join(n[len(prefix) :] for n in names) + "}"
    return ", ".join(names)
