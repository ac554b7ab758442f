"""A fast reader of Prometheus text exposition that extracts only the samples a mapping needs.

Engine payloads are 50 KB or more and a node may scrape eight of them every few seconds;
prometheus_client's parser tokenizes every character of every line in Python. Here each line is
classified by its metric name first (a slice and a set lookup), and only wanted lines have their
labels parsed, with a regex that runs in C. The reader is lenient where real engines are messy:
truncated last lines, `_created` samples, OpenMetrics `# EOF`, timestamps, NaN/±Inf, escaped label
values and duplicate series (the last one wins, as a later write would in a TSDB).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

LabelKey = tuple[tuple[str, str], ...]
ParsedSamples = dict[str, dict[LabelKey, float]]

_LABEL_PLAIN = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*)"')
_LABEL_ESCAPED = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
# The label set up to its closing brace, skipping braces inside quoted values. Needed only when a
# line has several `}`: `rfind` would then end at an OpenMetrics exemplar (`… 3 # {trace_id="…"} 0.5`)
# and read the exemplar's value as the sample's.
_LABEL_SET_END = re.compile(r'(?:[^"}]|"(?:[^"\\]|\\.)*")*\}')
_ESCAPE = re.compile(r"\\(.)")
# A `# TYPE` line's family, or a sample line's name (up to its labels or value).
_NAMES = re.compile(r"\n(?:#[ \t]+TYPE[ \t]+([^\s]+)|([^{ \n#][^{ \n]*))")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


class TooManySeries(Exception):
    """The payload breaks a cardinality bound: more wanted series than the per-target cap allows
    (or, as LabelValueTooLong, a wanted series with an over-long label value)."""


class LabelValueTooLong(TooManySeries):
    """A wanted series carries a label value longer than the cap.

    Refused rather than truncated: two values sharing a long prefix would merge into one series
    (a wrong number, silently), and a value that long is a bug or an attack, not a model name.
    """


DEFAULT_MAX_LABEL_VALUE_LENGTH = 1024
#: a wanted line longer than this is refused (LineTooLong); the streaming reader keeps no more of one
MAX_LINE_CHARS = 64 * 1024
#: engine detection reads names from this much of the head of a payload...
NAMES_HEAD_CHARS = 1 << 20
#: ...and keeps at most this many: real engines expose a few hundred, a hostile one millions
MAX_NAMES = 4096


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value)


def parse_labels(body: str) -> LabelKey | None:
    """Parse the text between `{` and `}`; None when it is malformed."""
    if not body:
        return ()
    if "\\" in body:
        pairs = [(k, _unescape(v)) for k, v in _LABEL_ESCAPED.findall(body)]
    else:
        pairs = _LABEL_PLAIN.findall(body)
    if not pairs:
        return None
    pairs.sort()
    return tuple(pairs)


class LineTooLong(TooManySeries):
    """A wanted line longer than MAX_LINE_CHARS: its labels would be parsed into ever more pairs
    (a 16 MiB line of `x="y",` is millions of tuples), so it is refused like a long value."""


def parse_wanted(
    text: str,
    wanted: Iterable[str],
    max_series: int | None = None,
    max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
    line_cache: LineCache | None = None,
) -> ParsedSamples:
    """Return {sample name: {sorted label pairs: value}} for the wanted sample names only.

    Sample names are matched exactly as they appear on the wire (`foo_bucket`, `foo_total`).
    Lines that cannot be parsed are skipped, not fatal: one bad line must not hide the rest.
    """
    parser = WantedParser(wanted, max_series, max_label_value_length, line_cache=line_cache)
    for block in text_blocks(text):
        if not parser.feed(block):
            break
    return parser.result


def text_blocks(text: str, block_chars: int = 1 << 16) -> Iterator[str]:
    """`text` in blocks of whole lines of about `block_chars` (what a body streams in as)."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start + block_chars)
        if end == -1:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


@lru_cache(maxsize=64)
def _wanted_lines(wanted: frozenset[str]) -> re.Pattern[str]:
    """A regex finding the lines that start with a wanted name followed by `{` or a space.

    The scan runs in C, so an unwanted line costs a few nanoseconds, not a turn of a Python loop:
    a body of millions of short unwanted lines is read at memory speed. The names are factored into
    a trie, since sre tries the alternatives of a group one after another.
    """
    # A literal "\n" first, not `^` with MULTILINE: sre then skips to each newline at C speed
    # instead of trying the pattern at every character. Blocks are fed with a "\n" in front.
    return re.compile("\n(" + _trie_pattern(sorted(wanted)) + r"(?=[{ ])[^\n]*)")


def _trie_pattern(names: list[str]) -> str:
    if not names:
        return "(?!)"  # matches nothing
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a name ends here and longer ones go on
            return body + "?" if len(branches) == 1 and len(body) == 1 else "(?:" + body + ")?"
        return body

    return pattern(trie)


#: a LineCache keeps at most this many series heads, each at most this long: enough for every
#: wanted series of a real engine (vLLM: ~100), bounded against one whose label sets churn
LINE_CACHE_ENTRIES = 2048
LINE_CACHE_HEAD_CHARS = 256


class LineCache:
    """What one target's wanted lines parsed to, kept from one scrape of that target to the next.

    An engine exposes the same series every round with new values: from the second scrape on a
    wanted line costs a split and a lookup (`heads`, by its text before the value), not a label
    parse, and a scrape whose wanted lines have the last one's heads, in order, is answered whole
    from `plan` (a `ScrapePlan`). Why kept (tests/perf/bench_collection.py): without them an engine
    target costs ~1.3x the CPU. Only lines of one value are kept, so the head decides the parse;
    `heads` is cleared when full, and a scrape with more wanted lines than `entries` leaves no plan.
    """

    def __init__(self, entries: int = LINE_CACHE_ENTRIES, head_chars: int = LINE_CACHE_HEAD_CHARS) -> None:
        self.heads: dict[str, tuple[str, LabelKey]] = {}
        self.entries = entries
        self.head_chars = head_chars
        self.plan: ScrapePlan | None = None

    def remember(self, line: str, name: str, labels: LabelKey, value_token: str) -> str | None:
        """`line`'s head if the line ends in its value (not in a space, not in more), else None;
        kept in `heads` if it is short enough (a plan may hold a longer one, see `plan_chars`)."""
        head, _, tail = line.rpartition(" ")
        if tail.strip() != value_token:
            return None
        if len(head) <= self.head_chars:
            if len(self.heads) >= self.entries:
                self.heads.clear()
            self.heads[head] = (name, labels)
        return head

    @property
    def plan_chars(self) -> int:
        """The most characters of heads a plan holds: no more than `heads` may hold."""
        return self.entries * self.head_chars


@dataclass(frozen=True)
class ScrapePlan:
    """A scrape's wanted lines by head, in order, and where each one's value goes: the answer of
    the next scrape whose lines have the same heads. Made only from a scrape read in full whose
    every wanted line ended in its one value and none was skipped, for the same names and caps,
    so a scrape it answers would have parsed, been counted and passed the caps just the same."""

    #: the wanted names and caps it was made for (WantedParser.key): others would parse differently
    key: tuple[frozenset[str], int | None, int | None]
    heads: list[str]
    series: int
    #: per wanted name that had lines: its label sets, in first-seen order with repeats, and the
    #: positions of their values among the scrape's lines
    names: tuple[tuple[str, tuple[LabelKey, ...], Callable[[Sequence[float]], tuple[float, ...]]], ...]

    @classmethod
    def of(
        cls, lines: Sequence[tuple[str, str, LabelKey]], series: int, key: tuple[frozenset[str], int | None, int | None]
    ) -> ScrapePlan:
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
        keeps its last value, as the slow path's later write does."""
        for name, keys, pick in self.names:
            result[name] = dict(zip(keys, pick(values)))


def picker(positions: Sequence[int]) -> Callable[[Sequence[float]], tuple[float, ...]]:
    """The values at `positions`, as a tuple, picked in C (itemgetter returns a bare value for one)."""
    if len(positions) == 1:
        (position,) = positions
        return lambda values: (values[position],)
    return itemgetter(*positions)


class WantedParser:
    """`parse_wanted` fed as the body streams in: blocks of whole lines in, wanted samples kept.

    Only wanted series are held (counted as they come, refused past `max_series`), and, for the
    first `names_head_chars` characters, the distinct names seen (at most MAX_NAMES), which engine
    detection needs; nothing else of the payload outlives its block. With a line cache whose plan
    fits, wanted lines are only gathered (no more than the plan has) and answered from the plan at
    the end if their heads are the plan's; the first difference sends what was gathered, and the
    rest, through the line-by-line path.
    """

    def __init__(
        self,
        wanted: Iterable[str],
        max_series: int | None = None,
        max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
        names_head_chars: int = 0,
        names_on_demand: bool = False,
        line_cache: LineCache | None = None,
    ) -> None:
        self._wanted = frozenset(wanted)
        self._cache = line_cache
        self._lines = _wanted_lines(self._wanted)
        self._max_series = max_series
        self._max_label_value_length = max_label_value_length
        self._result: ParsedSamples = {name: {} for name in self._wanted}
        self.series = 0
        self._names: set[str] = set()
        self._names_budget = names_head_chars
        # On demand: the head's text is kept (at most names_head_chars) and read for names only if
        # `names` is asked for, which a source whose engine type is known does only when the
        # payload had none of its samples; scanning every head for names was ~40 % of a parse.
        self._head: list[str] | None = [] if names_on_demand else None
        self._key = (self._wanted, max_series, max_label_value_length)
        plan = line_cache.plan if line_cache is not None else None
        self._plan = plan if plan is not None and plan.key == self._key else None
        #: the lines gathered for the plan so far
        self._gathered: list[str] = []
        #: the line-by-line path's (head, name, labels) of every line, for the next plan; None once
        #: a line was skipped, is not one the cache keeps, or there are more than a plan holds (so
        #: what is recorded is bounded by the cache, never by the body's lines: issue #41)
        self._taken: list[tuple[str, str, LabelKey]] | None = [] if line_cache is not None else None
        self._finished = False

    @property
    def names(self) -> set[str]:
        """Sample and `# TYPE` names from the head of the payload (see `sample_names`)."""
        if self._head:
            budget = self._names_budget
            for block in self._head:
                budget = _add_names(block, self._names, budget)
            self._head = []
        return self._names

    @property
    def result(self) -> ParsedSamples:
        """{wanted name: {label set: value}} of what was fed; read once feeding is over."""
        if not self._finished:
            self._finished = True
            self._finish()
        return self._result

    def feed(self, block: str) -> bool:
        """Parse one block of whole lines; False once `# EOF` was seen (the rest is not to be read)."""
        eof = 0 if block.startswith("# EOF") else block.find("\n# EOF")
        if eof != -1:
            block = block[:eof]
        if self._head is not None:
            kept = sum(len(head) + 1 for head in self._head)
            if kept < self._names_budget:
                self._head.append(block[: self._names_budget - kept])
        elif self._names_budget > 0:
            self._names_budget = _add_names(block, self._names, self._names_budget)
        lines: list[str] = self._lines.findall("\n" + block)
        if self._plan is not None:
            if len(self._gathered) + len(lines) <= len(self._plan.heads):
                self._gathered += lines
                return eof == -1
            lines = self._leave_plan(lines)
        self._take(lines)
        return eof == -1

    def _leave_plan(self, lines: list[str]) -> list[str]:
        """The scrape is not the plan's: what was gathered goes line by line, before `lines`."""
        self._plan = None
        gathered, self._gathered = self._gathered, []
        return gathered + lines

    def _finish(self) -> None:
        plan = self._plan
        if plan is not None:
            parts = [line.rpartition(" ") for line in self._gathered]
            if [head for head, _, _ in parts] == plan.heads:
                try:
                    values = [float(value) for _, _, value in parts]
                except ValueError:  # a value that does not parse: the slow path skips that line
                    pass
                else:
                    plan.answer(values, self._result)
                    self.series = plan.series
                    return
            self._take(self._leave_plan([]))
        taken = self._taken
        cache = self._cache
        if (
            cache is not None
            and taken is not None
            and len(taken) <= cache.entries
            and sum(len(head) for head, _, _ in taken) <= cache.plan_chars
        ):
            cache.plan = ScrapePlan.of(taken, self.series, self._key)
        elif cache is not None:
            cache.plan = None

    def _take(self, lines: list[str]) -> None:
        """The line-by-line path: each wanted line through the cache's heads, else parsed; then
        counted against `max_series` and kept, the same way for both."""
        wanted_set = self._wanted
        max_series = self._max_series
        result = self._result
        cache = self._cache
        heads = cache.heads if cache is not None else None
        taken = self._taken
        for line in lines:
            hit = None
            if heads is not None:
                head, _, value_text = line.rpartition(" ")
                hit = heads.get(head)
            if hit is not None and hit[0] in wanted_set:
                name, labels = hit
                try:
                    value = float(value_text)
                except ValueError:
                    taken = self._taken = None
                    continue
                kept: str | None = head
            else:
                read = self._parse_line(line)
                if read is None:
                    taken = self._taken = None
                    continue
                name, labels, value, value_token, single = read
                kept = cache.remember(line, name, labels, value_token) if cache is not None and single else None
            if taken is not None:
                if kept is None or cache is None or len(taken) >= cache.entries:
                    taken = self._taken = None
                else:
                    taken.append((kept, name, labels))
            bucket = result[name]
            if labels not in bucket:
                self.series += 1
                if max_series is not None and self.series > max_series:
                    raise TooManySeries(f"more than {max_series} wanted series")
            bucket[labels] = value

    def _parse_line(self, line: str) -> tuple[str, LabelKey, float, str, bool] | None:
        """(name, labels, value, the value's text, whether the value is the line's only token) of
        a wanted line, None for one to skip; LineTooLong and LabelValueTooLong for the caps."""
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            if name not in self._wanted:
                return None
            if len(line) > MAX_LINE_CHARS:
                raise LineTooLong(f"{name} line is over {MAX_LINE_CHARS} characters long")
            close = line.rfind("}")
            if close < brace:
                return None
            if line.count("}") > 1:
                end = _LABEL_SET_END.match(line, brace + 1)
                if end is None:
                    return None
                close = end.end() - 1
            labels = parse_labels(line[brace + 1 : close])
            if labels is None:
                return None
            cap = self._max_label_value_length
            if cap is not None and close - brace > cap:
                for label, label_value in labels:
                    if len(label_value) > cap:
                        raise LabelValueTooLong(
                            f"{name} label {label} is {len(label_value)} characters long (cap {cap})"
                        )
            rest = line[close + 1 :].split()
        else:
            if space == -1:
                return None
            name = line[:space]
            if name not in self._wanted:
                return None
            labels = ()
            rest = line[space + 1 :].split()
        if not rest:
            return None
        try:
            value = float(rest[0])
        except ValueError:
            return None
        return name, labels, value, rest[0], len(rest) == 1


def sample_names(text: str, limit_bytes: int = NAMES_HEAD_CHARS) -> set[str]:
    """The distinct sample and family names in (the head of) a payload, for engine detection.

    `# TYPE` lines count too: an engine that has not served a request yet may expose families
    with no samples.
    """
    names: set[str] = set()
    _add_names(text, names, limit_bytes)
    return names


def _add_names(block: str, names: set[str], budget: int) -> int:
    """Add the names in the first `budget` characters of `block` while MAX_NAMES lasts; return the
    budget left. A regex finds them, so a head of short lines costs no Python turn per line."""
    for match in _NAMES.finditer("\n" + block[:budget]):
        if len(names) >= MAX_NAMES:
            return 0
        names.add(match.group(1) or match.group(2))
    return budget - len(block) - 1
