"""Fitting the demo's screen into a terminal's cells: cropping with an ellipsis, ranges, short
engine lists, and groups of lines that shrink to a line budget and grow with the room left.

The demo's screen (frame.py) must fit 80x24, so every piece of text it shows goes through these;
they count cells (rich.cells), not characters, so "–" and "…" are measured right.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text

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


@dataclass
class Item:
    """An evidence or action line: one cropped line, or wrapped over two when there is room."""

    short: Text
    full: list[Text]

    def lines(self, expanded: bool) -> list[Text]:
        return self.full if expanded else [self.short]


def labelled_item(label: str, text: str, width: int, style: str = "") -> Item:
    label_style = "bold " + style if style else "bold"
    short = Text(f"  {label:<4} ", style=label_style)
    short.append(text, style=style)
    short.truncate(width, overflow="ellipsis")
    wrapped = textwrap.wrap(text, width - 7) or [""]
    if len(wrapped) > 2:
        wrapped = [wrapped[0], crop(" ".join(wrapped[1:]), width - 7)]
    full = []
    for index, part in enumerate(wrapped):
        line = Text(f"  {label if index == 0 else '':<4} ", style=label_style)
        line.append(part, style=style)
        full.append(line)
    return Item(short, full)


@dataclass
class Group:
    """One primary stage's lines: a heading, then evidence and actions, the first of each always shown."""

    head: Text
    why: list[Item]
    do: list[Item]

    @property
    def minimum(self) -> int:
        return 1 + min(len(self.why), 1) + min(len(self.do), 1)

    def _steps(self) -> list[tuple[str, Item]]:
        """The ways to spend one more line, most useful first: unwrap the first evidence and
        action, then add (and unwrap) the further ones."""
        firsts = [item for item in (self.why[:1] + self.do[:1])]
        steps = [("expand", item) for item in firsts if len(item.full) > 1]
        for item in self.why[1:2] + self.do[1:3]:
            steps.append(("add", item))
            if len(item.full) > 1:
                steps.append(("expand", item))
        return steps

    @property
    def extra(self) -> int:
        return len(self._steps())

    def lines(self, extra: int) -> list[Text]:
        taken = self._steps()[:extra]
        added = {id(item) for kind, item in taken if kind == "add"} | {id(i) for i in self.why[:1] + self.do[:1]}
        expanded = {id(item) for kind, item in taken if kind == "expand"}
        out = [self.head]
        for item in self.why + self.do:
            if id(item) in added:
                out += item.lines(id(item) in expanded)
        return out


def fit_groups(groups: list[Group], width: int, budget: int) -> list[Text]:
    """The groups in `budget` lines: each group's minimum, strongest first, then what room is left
    to the strongest groups' further evidence and actions."""
    shown: list[Group] = []
    for index, group in enumerate(groups):
        later = len(groups) - index - 1
        if sum(g.minimum for g in shown) + group.minimum + (1 if later else 0) > budget:
            break
        shown.append(group)
    hidden = len(groups) - len(shown)
    room = budget - sum(g.minimum for g in shown) - (1 if hidden else 0)
    lines: list[Text] = []
    for group in shown:
        extra = min(room, group.extra)
        room -= extra
        lines += group.lines(extra)
    if hidden:
        lines.append(Text(crop(f"… {hidden} more stage group(s): see /diagnosis", width), style="dim"))
    return lines[: max(budget, 0)]
