"""The wanted-lines reader: a body's blocks in, the samples a mapping needs out.

Each line is classified by its metric name first, by one regex (a trie of the wanted names) that
runs in C, so an unwanted line costs no Python turn; only wanted lines are read, by the formats'
grammar (grammar.py). A wanted line neither format allows is dropped and counted (`malformed`),
never the scrape. Lenient where the formats or the engines differ: OpenMetrics `# EOF` (nothing
after it is read), `_created` samples (not read unless wanted), timestamps, exemplars, duplicate
series (the last one wins, as a later write would in a TSDB).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from exporter.promtext.cache import LineCache, ParsedSamples, ParseKey, ScrapePlan
from exporter.promtext.grammar import (
    CANONICAL_LABELLED,
    CANONICAL_PAIRS,
    NAME,
    SAMPLE_REST,
    LabelKey,
    exemplar_fits,
    has_invalid_utf8,
    label_pairs,
    leading_pairs,
    numbers,
    parse_number,
)
from exporter.promtext.scan import EOF, EOF_LINE, add_names, declared_families, wanted_lines

#: when to look for `# TYPE` lines of wanted families: never; in the blocks before the first one
#: with a wanted line (is anything of this mapping there? a wanted line says yes, so the block that
#: has one is not scanned); in the whole body (which mapping's is it?)
DeclaredScan = Literal["off", "until_sample", "whole_body"]


class TooManySeries(Exception):
    """The payload breaks a cardinality bound: more wanted series than the per-target cap allows
    (or, as LabelValueTooLong, a wanted series with an over-long label value)."""


class LabelValueTooLong(TooManySeries):
    """A wanted series carries a label value longer than the cap.

    Refused rather than truncated: two values sharing a long prefix would merge into one series
    (a wrong number, silently), and a value that long is a bug or an attack, not a model name.
    """


class LineTooLong(TooManySeries):
    """A wanted line longer than MAX_LINE_CHARS: its labels would be parsed into ever more pairs
    (a 16 MiB line of `x="y",` is millions of tuples), so it is refused like a long value."""


#: the reason (llm_exporter_source_errors_total) a scrape is counted under when lines were dropped
MALFORMED_LINE = "malformed_line"
DEFAULT_MAX_LABEL_VALUE_LENGTH = 1024
#: a wanted line longer than this is refused (LineTooLong); the streaming reader keeps no more of one
MAX_LINE_CHARS = 64 * 1024


def parse_wanted(
    text: str,
    wanted: Iterable[str],
    max_series: int | None = None,
    max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
    line_cache: LineCache | None = None,
    info_labels: Mapping[str, Iterable[str]] | None = None,
) -> ParsedSamples:
    """Return {sample name: {sorted label pairs: value}} for the wanted sample names only.

    Sample names are matched exactly as they appear on the wire (`foo_bucket`, `foo_total`).
    A line that is malformed is skipped, not fatal: one bad line must not hide the rest.
    """
    parser = WantedParser(wanted, max_series, max_label_value_length, line_cache=line_cache, info_labels=info_labels)
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


class WantedParser:
    """`parse_wanted` fed as the body streams in: blocks of whole lines in, wanted samples kept.

    Only wanted series are held (counted as they come, refused past `max_series`), and, for the
    first `names_head_chars` characters, the distinct names seen (at most MAX_NAMES), which engine
    detection needs; nothing else of the payload outlives its block. With a line cache whose plan
    fits, wanted lines are only gathered (no more than the plan has) and answered from the plan at
    the end if their heads are the plan's and their values numbers; the first difference sends what
    was gathered, and the rest, through the line-by-line path.

    `info_labels` names info metrics (a configuration's settings as labels) and the labels read of
    each: only those are kept, a value over the cap leaves that label out instead of refusing the
    scrape, and a line too long to be kept whole is read for the pairs at its head.
    """

    def __init__(
        self,
        wanted: Iterable[str],
        max_series: int | None = None,
        max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
        names_head_chars: int = 0,
        names_on_demand: bool = False,
        line_cache: LineCache | None = None,
        info_labels: Mapping[str, Iterable[str]] | None = None,
        declared: DeclaredScan = "off",
    ) -> None:
        self._info = {name: frozenset(labels) for name, labels in (info_labels or {}).items()}
        self._wanted = frozenset(wanted) | frozenset(self._info) if self._info else frozenset(wanted)
        #: the names the inline path reads (an info line has its own rules), and the lines it
        #: reads: no longer than a label value may be, so no value in it is over the cap
        self._plain = self._wanted - frozenset(self._info) if self._info else self._wanted
        self._fast_chars = min(MAX_LINE_CHARS, max_label_value_length or MAX_LINE_CHARS)
        self._cache = line_cache
        self._lines = wanted_lines(self._wanted)
        self._max_series = max_series
        self._max_label_value_length = max_label_value_length
        self._result: ParsedSamples = {name: {} for name in self._wanted}
        self.series = 0
        #: wanted lines dropped because neither exposition format allows them
        self.malformed = 0
        self._names: set[str] = set()
        self._names_budget = names_head_chars
        # On demand: the head's text is kept (at most names_head_chars) and read for names only if
        # `names` is asked for, which a source whose engine type is known does only when the
        # payload had none of its samples; scanning every head for names was ~40 % of a parse.
        self._head: list[str] | None = [] if names_on_demand else None
        self._declared_scan = declared
        self._declared: set[str] = set()
        self.key: ParseKey = (self._wanted, max_series, max_label_value_length, frozenset(self._info.items()))
        plan = line_cache.plan if line_cache is not None else None
        self._plan = plan if plan is not None and plan.key == self.key else None
        #: the lines gathered for the plan so far
        self._gathered: list[str] = []
        #: the line-by-line path's (head, name, labels) of every line, for the next plan; None once
        #: a line was skipped, is not one the cache keeps, or there are more than a plan holds (so
        #: what is recorded is bounded by the cache, never by the body's lines: issue #41)
        self._taken: list[tuple[str, str, LabelKey]] | None = [] if line_cache is not None else None
        #: this scrape's heads for the line cache, which takes them once the scrape is read in full
        self._fresh: dict[str, tuple[str, LabelKey]] = {}
        #: one object per distinct label pair of this scrape: a body of many series repeats most
        #: of its pairs, and the small objects its label sets hold at the parse's peak are memory
        #: the interpreter keeps after it (the soak's RSS); shared, a series of three labels one
        #: of which differs holds four small objects where it held ten
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}
        self._finished = False

    @property
    def names(self) -> set[str]:
        """Sample and `# TYPE` names from the head of the payload (see `sample_names`)."""
        if self._head:
            budget = self._names_budget
            for block in self._head:
                budget = add_names(block, self._names, budget)
            self._head = []
        return self._names

    @property
    def present(self) -> set[str]:
        """The wanted names the whole payload has: with samples, or whose family a `# TYPE` line
        declared (looked for as `declared` says). Read once feeding is over."""
        return {name for name, series in self.result.items() if series} | self._declared

    @property
    def result(self) -> ParsedSamples:
        """{wanted name: {label set: value}} of what was fed; read once feeding is over."""
        if not self._finished:
            self._finished = True
            self._finish()
        return self._result

    def feed(self, block: str) -> bool:
        """Parse one block of whole lines; False once `# EOF` was seen (the rest is not to be read)."""
        text = "\n" + block
        lines: list[str] = self._lines.findall(text)
        more = EOF not in lines  # the scan finds `# EOF` too: no second pass over every block for it
        if not more:
            lines = lines[: lines.index(EOF)]
            text = text[: EOF_LINE.search(text).start()]  # type: ignore[union-attr]  # the scan found it
            block = text[1:]
        if self._head is not None:
            kept = sum(len(head) + 1 for head in self._head)
            if kept < self._names_budget:
                self._head.append(block[: self._names_budget - kept])
        elif self._names_budget > 0:
            self._names_budget = add_names(block, self._names, self._names_budget)
        if self._declared_scan == "until_sample" and lines:
            self._declared_scan = "off"  # a wanted line answers what the scan asks
        elif self._declared_scan != "off":
            self._look_for_declared(text)
        if self._plan is not None:
            if len(self._gathered) + len(lines) <= len(self._plan.heads):
                self._gathered += lines
                return more
            lines = self._leave_plan(lines)
        self._take(lines, text.isascii())
        return more

    def _look_for_declared(self, text: str) -> None:
        pattern, members = declared_families(self._wanted)
        for family in pattern.findall(text):
            self._declared |= members[family]

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
                values = numbers([value for _, _, value in parts])
                if values is not None:  # else a line's value is malformed: the slow path counts it
                    plan.answer(values, self._result)
                    self.series = plan.series
                    return
            self._take(self._leave_plan([]))
        taken = self._taken
        cache = self._cache
        if cache is not None:
            cache.settle(self._fresh)
        if (
            cache is not None
            and taken is not None
            and len(taken) <= cache.entries
            and sum(len(head) for head, _, _ in taken) <= cache.plan_chars
        ):
            cache.plan = ScrapePlan.of(taken, self.series, self.key)
        elif cache is not None:
            cache.plan = None

    def _take(self, lines: list[str], ascii_block: bool = False) -> None:
        """The line-by-line path: each wanted line through the cache's heads, else read (the form
        engines write inline, any other by the grammar); then counted against `max_series` and
        kept, the same way for all."""
        wanted_set = self._wanted
        plain = self._plain
        fast_chars = self._fast_chars
        max_series = self._max_series if self._max_series is not None else math.inf
        result = self._result
        cache = self._cache
        heads = cache.heads if cache is not None else None
        fresh = self._fresh
        taken = self._taken
        series = self.series
        one_pair = self._pairs.setdefault
        for line in lines:
            hit = value = None
            if heads is not None:
                head, _, value_text = line.rpartition(" ")
                hit = heads.get(head)
                if hit is not None and hit[0] in wanted_set:
                    value = parse_number(value_text)  # else the grammar says why (`1\t` is a value)
            if hit is not None and value is not None:
                name, labels = hit
                kept: str | None = head
                cache.remember(fresh, head, name, labels)  # type: ignore[union-attr]  # a hit needs the cache
            else:
                # `name{k="v",...} value`: ASCII, no escapes, within the caps (it holds no longer value)
                fast = False
                if len(line) <= fast_chars and (ascii_block or line.isascii()):
                    canonical = CANONICAL_LABELLED.match(line)
                    if canonical is not None:
                        name, value_text = canonical.group(1, 3)
                        pairs = CANONICAL_PAIRS.findall(line, len(name), canonical.end(2))
                        fast = name in plain and (len(pairs) < 2 or len(dict(pairs)) == len(pairs))
                if fast:
                    pairs.sort()
                    labels = tuple(map(one_pair, pairs, pairs))
                    value = float(value_text)
                    kept = None
                    if cache is not None:
                        kept = line[: len(line) - len(value_text) - 1]
                        cache.remember(fresh, kept, name, labels)
                else:
                    read = self._parse_line(line)
                    if read is None:
                        taken = self._taken = None
                        continue
                    name, labels, value, kept = read
            if taken is not None:
                if kept is None or cache is None or len(taken) >= cache.entries:
                    taken = self._taken = None
                else:
                    taken.append((kept, name, labels))
            bucket = result[name]
            known = len(bucket)
            bucket[labels] = value  # a repeated series: the last value
            if len(bucket) != known:
                series += 1
                if series > max_series:
                    self.series = series
                    raise TooManySeries(f"more than {max_series} wanted series")
        self.series = series

    def _parse_line(self, line: str) -> tuple[str, LabelKey, float, str | None] | None:
        """(name, labels, value, the head a cache may keep or None) of a wanted line by the
        formats' grammar; None for one to skip (counted in `malformed` when the formats do not
        allow it); LineTooLong and LabelValueTooLong for the caps."""
        spelled = NAME.match(line)
        end = spelled.end() if spelled is not None else 0
        name = line[:end]
        if name not in self._wanted:
            return None
        info = self._info.get(name)
        if len(line) > MAX_LINE_CHARS:
            if info is None:
                raise LineTooLong(f"{name} line is over {MAX_LINE_CHARS} characters long")
            return self._long_info_line(line, name, end, info)
        match = SAMPLE_REST.match(line, end)
        if match is None or (match.group(3) is not None and not exemplar_fits(match.group(3))):
            self.malformed += 1
            return None
        body, value_text = match.group(1, 2)
        pairs = label_pairs(body) if body else []
        found = dict(pairs)  # a name given twice, or the reserved one: not a label set
        if len(found) != len(pairs) or "__name__" in found or has_invalid_utf8(line):
            self.malformed += 1
            return None
        pairs.sort()
        labels = tuple(pairs)
        cap = self._max_label_value_length
        if info is not None:
            labels = tuple((k, v) for k, v in labels if k in info and (cap is None or len(v) <= cap))
        elif cap is not None and len(line) - end > cap:
            for label, label_value in labels:
                if len(label_value) > cap:
                    raise LabelValueTooLong(f"{name} label {label} is {len(label_value)} characters long (cap {cap})")
        head = None
        if match.end(2) == len(line) and line[match.start(2) - 1] == " ":  # the head, one space, the value
            head = line[: match.start(2) - 1]
            if self._cache is not None and info is None:  # an info line's labels are its parser's choice
                self._cache.remember(self._fresh, head, name, labels)
        return name, labels, float(value_text), head

    def _long_info_line(
        self, line: str, name: str, end: int, info: frozenset[str]
    ) -> tuple[str, LabelKey, float, None] | None:
        """An info line over MAX_LINE_CHARS (a configuration of thousands of settings): its chosen
        labels among the complete pairs in its first MAX_LINE_CHARS, the rest never read (nor
        kept whole: LineBlocks keeps only a line's head). Its value is 1, as an info's is."""
        start = line.find("{", end, MAX_LINE_CHARS)
        if start == -1 or line[end:start].strip(" \t"):
            self.malformed += 1
            return None
        cap = self._max_label_value_length
        pairs = leading_pairs(line[:MAX_LINE_CHARS], start, MAX_LINE_CHARS)
        labels = tuple((k, v) for k, v in pairs if k in info and (cap is None or len(v) <= cap))
        if has_invalid_utf8("".join(v for _, v in labels)):
            self.malformed += 1
            return None
        return name, labels, 1.0, None
