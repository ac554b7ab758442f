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
from collections.abc import Iterable

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


def parse_wanted(
    text: str,
    wanted: Iterable[str],
    max_series: int | None = None,
    max_label_value_length: int | None = DEFAULT_MAX_LABEL_VALUE_LENGTH,
) -> ParsedSamples:
    """Return {sample name: {sorted label pairs: value}} for the wanted sample names only.

    Sample names are matched exactly as they appear on the wire (`foo_bucket`, `foo_total`).
    Lines that cannot be parsed are skipped, not fatal: one bad line must not hide the rest.
    """
    wanted_set = frozenset(wanted)
    result: ParsedSamples = {name: {} for name in wanted_set}
    series = 0
    for line in text.split("\n"):
        if not line or line[0] == "#":
            if line.startswith("# EOF"):
                break
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            if name not in wanted_set:
                continue
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
                            f"{name} label {label} is {len(label_value)} characters long (cap {max_label_value_length})"
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
            series += 1
            if max_series is not None and series > max_series:
                raise TooManySeries(f"more than {max_series} wanted series")
        bucket[labels] = value
    return result


def sample_names(text: str, limit_bytes: int = 1 << 20) -> set[str]:
    """The distinct sample and family names in (the head of) a payload, for engine detection.

    `# TYPE` lines count too: an engine that has not served a request yet may expose families
    with no samples.
    """
    names: set[str] = set()
    for line in text[:limit_bytes].split("\n"):
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                names.add(parts[2])
            continue
        end = len(line)
        for sep in ("{", " "):
            pos = line.find(sep)
            if pos != -1 and pos < end:
                end = pos
        names.add(line[:end])
    return names
