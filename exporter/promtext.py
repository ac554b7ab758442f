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
from collections.abc import Iterable, Iterator

LabelKey = tuple[tuple[str, str], ...]
ParsedSamples = dict[str, dict[LabelKey, float]]

_LABEL_PLAIN = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*)"')
_LABEL_ESCAPED = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
# The label set up to its closing brace, skipping braces inside quoted values. Needed only when a
# line has several `}`: `rfind` would then end at an OpenMetrics exemplar (`… 3 # {trace_id="…"} 0.5`)
# and read the exemplar's value as the sample's.
_LABEL_SET_END = re.compile(r'(?:[^"}]|"(?:[^"\\]|\\.)*")*\}')
_ESCAPE = re.compile(r"\\(.)")
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
) -> ParsedSamples:
    """Return {sample name: {sorted label pairs: value}} for the wanted sample names only.

    Sample names are matched exactly as they appear on the wire (`foo_bucket`, `foo_total`).
    Lines that cannot be parsed are skipped, not fatal: one bad line must not hide the rest.
    The text is split a block at a time, so a body of short lines never becomes one list of them.
    """
    parser = WantedParser(wanted, max_series, max_label_value_length)
    for lines in text_blocks(text):
        if not parser.feed(lines):
            break
    return parser.result


def text_blocks(text: str, block_chars: int = 1 << 16) -> Iterator[list[str]]:
    """The lines of `text`, split about `block_chars` at a time (always at a line end)."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start + block_chars)
        if end == -1:
            yield text[start:].split("\n")
            return
        yield text[start:end].split("\n")
        start = end + 1


class WantedParser:
    """`parse_wanted` fed as the body streams in: blocks of lines in, wanted samples kept.

    Only wanted series are held (counted as they come, refused past `max_series`), and, for the
    first `names_head_chars` characters, the distinct names seen (at most MAX_NAMES), which engine
    detection needs; nothing else of the payload outlives its block.
    """

    def __init__(
        self,
        wanted: Iterable[str],
        max_series: int | None = None,
        max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
        names_head_chars: int = 0,
    ) -> None:
        self._wanted = frozenset(wanted)
        self._max_series = max_series
        self._max_label_value_length = max_label_value_length
        self.result: ParsedSamples = {name: {} for name in self._wanted}
        self.series = 0
        #: sample and `# TYPE` names from the head of the payload (see `sample_names`)
        self.names: set[str] = set()
        self._names_budget = names_head_chars

    def feed(self, lines: Iterable[str]) -> bool:
        """Parse one block; False once `# EOF` was seen (the rest is not to be read)."""
        if self._names_budget > 0:
            lines = list(lines)
            self._names_budget = _add_names(lines, self.names, self._names_budget)
        wanted_set = self._wanted
        max_series = self._max_series
        max_label_value_length = self._max_label_value_length
        result = self.result
        for line in lines:
            if not line or line[0] == "#":
                if line.startswith("# EOF"):
                    return False
                continue
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and (space == -1 or brace < space):
                name = line[:brace]
                if name not in wanted_set:
                    continue
                if len(line) > MAX_LINE_CHARS:
                    raise LineTooLong(f"{name} line is over {MAX_LINE_CHARS} characters long")
                close = line.rfind("}")
                if close < brace:
                    continue
                if line.count("}") > 1:
                    end = _LABEL_SET_END.match(line, brace + 1)
                    if end is None:
                        continue
                    close = end.end() - 1
                labels = parse_labels(line[brace + 1 : close])
                if labels is None:
                    continue
                if max_label_value_length is not None and close - brace > max_label_value_length:
                    for label, label_value in labels:
                        if len(label_value) > max_label_value_length:
                            raise LabelValueTooLong(
                                f"{name} label {label} is {len(label_value)} characters long "
                                f"(cap {max_label_value_length})"
                            )
                rest = line[close + 1 :].split()
            else:
                if space == -1:
                    continue
                name = line[:space]
                if name not in wanted_set:
                    continue
                labels = ()
                rest = line[space + 1 :].split()
            if not rest:
                continue
            try:
                value = float(rest[0])
            except ValueError:
                continue
            bucket = result[name]
            if labels not in bucket:
                self.series += 1
                if max_series is not None and self.series > max_series:
                    raise TooManySeries(f"more than {max_series} wanted series")
            bucket[labels] = value
        return True


def sample_names(text: str, limit_bytes: int = NAMES_HEAD_CHARS) -> set[str]:
    """The distinct sample and family names in (the head of) a payload, for engine detection.

    `# TYPE` lines count too: an engine that has not served a request yet may expose families
    with no samples.
    """
    names: set[str] = set()
    _add_names(text[:limit_bytes].split("\n"), names, limit_bytes)
    return names


def _add_names(lines: list[str], names: set[str], budget: int) -> int:
    """Add the names of `lines` while the character budget and MAX_NAMES last; the budget left."""
    for line in lines:
        if budget <= 0 or len(names) >= MAX_NAMES:
            return 0
        budget -= len(line) + 1
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                names.add(parts[2][:MAX_LINE_CHARS])
            continue
        end = len(line)
        for sep in ("{", " "):
            pos = line.find(sep)
            if pos != -1 and pos < end:
                end = pos
        names.add(line[:end][:MAX_LINE_CHARS])
    return budget
