"""Where each bucket series of a histogram goes, worked out once per set of label sets.

An engine writes the same bucket series every scrape with new counts, so which model, which
data-parallel group, which duplicate rank and which bound each one is (a label parse, a sort, a
float parse per bucket) is the same answer every time. A `HistogramLayout` holds that answer for
one tuple of label sets, in the order the scrape had them; the counts are then picked by position
in C. Why kept (tests/perf/bench_mapping.py): a vLLM scrape has seven latency histograms of some
twenty buckets per rank, and assembling them bucket by bucket was the largest part of reading a
scrape, against the collection's CPU budget (bench_collection.py).

What it keeps is bounded (`Layouts`): at most `MAX_LAYOUTS` layouts holding at most
`MAX_LABEL_CHARS` characters of label sets, all forgotten when either would be passed, so a target
that changes its label sets every scrape costs the work of assembling, never memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from exporter.promtext import LabelKey
from exporter.promtext.cache import picker

#: a series' (model, group key, rank order, `le` bound or None when absent or unparsable)
Slot = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], float | None]
Counts = Callable[[Sequence[float]], tuple[float, ...]]
#: what a layout is for: the bucket label sets in the scrape's order, the duplicate labels, the scale
LayoutKey = tuple[tuple[LabelKey, ...], frozenset[str], float]

MAX_LAYOUTS = 1024
MAX_LABEL_CHARS = 2 * 1024 * 1024


@dataclass(frozen=True)
class HistogramLayout:
    """Per model with a complete histogram: its bounds (scaled), and how its cumulative counts are
    taken from the bucket values in the scrape's order (the lowest duplicate rank's count per
    group and bound, summed over the groups that have a +Inf bucket)."""

    models: tuple[tuple[str, tuple[float, ...], Counts], ...]

    @classmethod
    def of(cls, keys: Sequence[LabelKey], slot_of: Callable[[LabelKey], Slot], scale: float) -> HistogramLayout:
        # Per model and group (data-parallel rank), per bound: the lowest duplicate rank's position.
        per_group: dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, tuple[tuple[str, ...], int]]] = {}
        for position, key in enumerate(keys):
            model, group, order, bound = slot_of(key)
            if bound is None:
                continue
            chosen = per_group.setdefault((model, group), {})
            known = chosen.get(bound)
            if known is None or order < known[0]:
                chosen[bound] = (order, position)
        merged: dict[str, dict[float, list[int]]] = {}
        for (model, _), chosen in per_group.items():
            if math.inf not in chosen:  # a truncated payload: the total, and so every quantile, unknown
                continue
            into = merged.setdefault(model, {})
            for bound, (_, position) in chosen.items():
                into.setdefault(bound, []).append(position)
        models = []
        for model, positions in merged.items():
            bounds = sorted(positions)
            models.append((model, tuple(b * scale for b in bounds), _counts([positions[b] for b in bounds])))
        return cls(tuple(models))

    def histograms(self, values: Sequence[float]) -> Iterator[tuple[str, tuple[float, ...], tuple[float, ...]]]:
        """(model, bounds, cumulative counts) from one scrape's bucket values, in the layout's order."""
        for model, bounds, counts in self.models:
            yield model, bounds, counts(values)


def _counts(positions: list[list[int]]) -> Counts:
    """Each bound's count: the one bucket's value where a single group has it (picked in C), else
    the sum over the groups, in the order they were first seen."""
    if all(len(group) == 1 for group in positions):
        return picker([group[0] for group in positions])
    return lambda values: tuple(sum(map(values.__getitem__, group), 0.0) for group in positions)


class Layouts:
    """The layouts of the label-set tuples being read, bounded as the module says.

    Found by the identity of a tuple's first label set (and its length, duplicate labels and
    scale), then checked against the whole tuple: a target's parser hands out the same label-set
    objects every scrape (its line cache and plan keep them), so the check is one pointer
    comparison per bucket where hashing every label set of the tuple cost as much as the layout
    saved. A kept layout holds its tuple, so no other object can take that identity while it is
    kept; a tuple equal in content but made of other objects (another target with the same
    series) has a layout of its own.
    """

    def __init__(self, max_layouts: int = MAX_LAYOUTS, max_label_chars: int = MAX_LABEL_CHARS) -> None:
        self._layouts: dict[tuple[int, int, frozenset[str], float], tuple[LayoutKey, HistogramLayout]] = {}
        self._chars = 0
        self.max_layouts = max_layouts
        self.max_label_chars = max_label_chars

    def layout(self, key: LayoutKey, build: Callable[[], HistogramLayout]) -> HistogramLayout:
        """The kept layout of `key` (bucket label sets in order, duplicate labels, scale), else
        `build()`'s, kept within the bound."""
        keys, duplicate_labels, scale = key
        index = (id(keys[0]), len(keys), duplicate_labels, scale)
        kept = self._layouts.get(index)
        if kept is not None and kept[0] == key:
            return kept[1]
        layout = build()
        chars = sum(len(name) + len(value) for labels in keys for name, value in labels)
        if len(self._layouts) >= self.max_layouts or self._chars + chars > self.max_label_chars:
            self._layouts.clear()
            self._chars = 0
        if chars <= self.max_label_chars:
            self._layouts[index] = (key, layout)
            self._chars += chars
        return layout

    def __len__(self) -> int:
        return len(self._layouts)
