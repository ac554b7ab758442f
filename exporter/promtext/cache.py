"""What one target's wanted lines parsed to, kept from one scrape to the next (the CPU budget).

An engine exposes the same series every round with new values: from the second scrape on a wanted
line costs a split and a lookup, not a parse, and a scrape whose wanted lines have the last one's
heads, in order, is answered whole from a plan. Why kept (tests/perf/bench_collection.py): without
them an engine target costs ~1.3x the CPU. What either records is bounded by the cache's entries,
never by a body's lines (issue #41).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from exporter.promtext.grammar import LabelKey

ParsedSamples = dict[str, dict[LabelKey, float]]
#: what a parse depends on besides the body: the wanted names, the series and label-value caps,
#: the info names' chosen labels (WantedParser.key)
ParseKey = tuple[frozenset[str], int | None, int | None, frozenset[tuple[str, frozenset[str]]]]

#: a LineCache keeps at most this many series heads, each at most this long: enough for every
#: wanted series of a real engine (vLLM: ~100), bounded against one whose label sets churn
LINE_CACHE_ENTRIES = 2048
LINE_CACHE_HEAD_CHARS = 256


class LineCache:
    """A target's wanted lines by head (the text before the value's single space) → (name, labels):
    those of the last scrape read line by line in full; and the last scrape's `plan` (a
    `ScrapePlan`).

    A head is kept only for a line that is its head, one space and its value (no timestamp, no
    exemplar, nothing after), so any number put after the head is a line the grammar accepts:
    the head decides the parse. A scrape's heads replace the last one's only once it was read in
    full (`settle`): a scrape refused on a cap leaves nothing behind, so all a refused body made
    the parser allocate goes with the parse (heads kept from its middle would pin the memory
    around them, which the soak's RSS showed). At most `entries` heads; a scrape with more wanted
    lines leaves no plan.
    """

    def __init__(self, entries: int = LINE_CACHE_ENTRIES, head_chars: int = LINE_CACHE_HEAD_CHARS) -> None:
        self.heads: dict[str, tuple[str, LabelKey]] = {}
        self.entries = entries
        self.head_chars = head_chars
        self.plan: ScrapePlan | None = None

    def remember(self, fresh: dict[str, tuple[str, LabelKey]], head: str, name: str, labels: LabelKey) -> None:
        """Put `head` among a scrape's `fresh` heads if it is short enough (a plan may hold a
        longer one, see `plan_chars`) and there is room."""
        if len(head) <= self.head_chars and len(fresh) < self.entries:
            fresh[head] = (name, labels)

    def settle(self, fresh: dict[str, tuple[str, LabelKey]]) -> None:
        """The heads of a scrape read line by line in full become the ones the next one looks up."""
        self.heads = fresh

    @property
    def plan_chars(self) -> int:
        """The most characters of heads a plan holds: no more than `heads` may hold."""
        return self.entries * self.head_chars


@dataclass(frozen=True)
class ScrapePlan:
    """A scrape's wanted lines by head, in order, and where each one's value goes: the answer of
    the next scrape whose lines have the same heads. Made only from a scrape read in full whose
    every wanted line was its head and its one value and none was skipped, for the same names and
    caps, so a scrape it answers would have parsed, been counted and passed the caps just the same."""

    #: what it was made for (WantedParser.key): another key would parse differently
    key: ParseKey
    heads: list[str]
    series: int
    #: per wanted name that had lines: its label sets, in first-seen order with repeats, and the
    #: positions of their values among the scrape's lines
    names: tuple[tuple[str, tuple[LabelKey, ...], Callable[[Sequence[float]], tuple[float, ...]]], ...]

    @classmethod
    def of(cls, lines: Sequence[tuple[str, str, LabelKey]], series: int, key: ParseKey) -> ScrapePlan:
        """From the (head, name, labels) of each wanted line, in order."""
        by_name: dict[str, tuple[list[LabelKey], list[int]]] = {}
        for index, (_, name, labels) in enumerate(lines):
            keys, positions = by_name.setdefault(name, ([], []))
            keys.append(labels)
            positions.append(index)
        names = tuple((name, tuple(keys), picker(positions)) for name, (keys, positions) in by_name.items())
        return cls(key, [head for head, _, _ in lines], series, names)

    def answer(self, values: Sequence[float], result: ParsedSamples) -> None:
        """Fill `result` (every wanted name, empty) with this scrape's values: a repeated label set
        keeps its last value, as the line-by-line path's later write does."""
        for name, keys, pick in self.names:
            result[name] = dict(zip(keys, pick(values)))


def picker(positions: Sequence[int]) -> Callable[[Sequence[float]], tuple[float, ...]]:
    """The values at `positions`, as a tuple, picked in C (itemgetter returns a bare value for one)."""
    if len(positions) == 1:
        (position,) = positions
        return lambda values: (values[position],)
    return itemgetter(*positions)
