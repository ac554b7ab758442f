"""A PromQL lint for the generated dashboards and rules: the mistakes upstream LLM dashboards make.

- `histogram_quantile` only over `sum by (le, ...) (rate(..._bucket[...]))` or over a sum of a
  recorded `..._bucket:sum_rate<window>` series (a quantile per series, or of raw cumulative
  buckets, is meaningless);
- `rate`, `irate` and `increase` only on counters (a counter family, a summary's or histogram's
  `_count`/`_sum`/`_bucket`, an engine's `_total`);
- every division guarded against a zero denominator: `/ (x > 0)`, `/ clamp_min(x, c)` with c > 0,
  or a non-zero number;
- every metric name known: the catalogue, the engines' known names, or a recording rule.

Not a PromQL parser: it masks strings and label matchers, then matches parentheses, which is
enough for the expressions this project writes.
"""

from __future__ import annotations

import re

from exporter.catalogue import CATALOGUE
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import metric_names
from exporter.monitoring.records import recording_rules
from exporter.sources.engines import MAPPINGS

# Prometheus' own synthetic series.
PROMETHEUS_SERIES = frozenset({"up"})
_COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_NUMBER = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")
_MODIFIER = re.compile(r"(on|ignoring|group_left|group_right)\b\s*")
_RATE_OF_BUCKETS = re.compile(r"(?:rate|irate)\(\s*([\w:]+_bucket)\s*(?:\{_*\})?\s*\[[^\]]+\]\s*\)")
_RECORDED_BUCKETS = re.compile(r"([\w:]+_bucket:sum_rate\w+)\s*(?:\{_*\})?")


def known_names(config: MonitoringConfig) -> frozenset[str]:
    names = set(PROMETHEUS_SERIES)
    for spec in CATALOGUE.values():
        names.add(spec.name)
        if spec.type == "summary":
            names.update((spec.name + "_count", spec.name + "_sum"))
    for mapping in MAPPINGS.values():
        names.update(mapping.wanted())
    names.update(rule.record for rule in recording_rules(config))
    return frozenset(names)


def counter_names() -> frozenset[str]:
    names = {spec.name for spec in CATALOGUE.values() if spec.type == "counter"}
    names.update(
        f"{spec.name}{suffix}" for spec in CATALOGUE.values() if spec.type == "summary" for suffix in ("_count", "_sum")
    )
    for mapping in MAPPINGS.values():
        names.update(name for name in mapping.wanted() if name.endswith(_COUNTER_SUFFIXES))
    return frozenset(names)


def _mask(expr: str) -> str:
    """Same length as `expr`, with string literals and label-matcher contents blanked."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return text[0] + "_" * (len(text) - 2) + text[-1]

    return _BRACES.sub(blank, _STRING.sub(blank, expr))


def _closing(masked: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(masked)):
        if masked[i] == "(":
            depth += 1
        elif masked[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parentheses: {masked[open_at : open_at + 60]!r}")


def _calls(masked: str, names: str) -> list[tuple[str, int, int]]:
    """(function, start, end) of every call of the `names` alternation: the text between its parentheses."""
    found = []
    for match in re.finditer(rf"(?<![\w:])({names})\s*\(", masked):
        open_at = match.end() - 1
        found.append((match.group(1), open_at + 1, _closing(masked, open_at)))
    return found


def _split_top(masked: str, start: int, end: int) -> list[tuple[int, int]]:
    parts, depth, begin = [], 0, start
    for i in range(start, end):
        c = masked[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append((begin, i))
            begin = i + 1
    parts.append((begin, end))
    return parts


def _grouping(masked: str, at: int) -> tuple[list[str], int]:
    """Labels of a `by (...)` clause starting at `at` (after spaces), and where it ends."""
    match = re.compile(r"\s*by\s*\(").match(masked, at)
    if not match:
        return [], at
    close = _closing(masked, match.end() - 1)
    return [label.strip() for label in masked[match.end() : close].split(",")], close + 1


def _quantile_source_problem(masked: str, known: frozenset[str]) -> str | None:
    text = masked.strip()
    if not text.startswith("sum"):
        return "histogram_quantile must read a `sum by (le, ...)` of bucket rates"
    labels, at = _grouping(text, 3)
    open_match = re.compile(r"\s*\(").match(text, at)
    if not open_match:
        return "histogram_quantile: cannot read the sum's argument"
    close = _closing(text, open_match.end() - 1)
    trailing, end = _grouping(text, close + 1)
    labels = labels or trailing
    if text[end:].strip():
        return "histogram_quantile: the sum must be its whole argument"
    if "le" not in labels:
        return "histogram_quantile over a sum that does not keep `le`"
    inner = text[open_match.end() : close].strip()
    rate = _RATE_OF_BUCKETS.fullmatch(inner)
    recorded = _RECORDED_BUCKETS.fullmatch(inner)
    if rate or (recorded and recorded.group(1) in known):
        return None
    return "histogram_quantile must sum `rate(..._bucket[...])` or a recorded `..._bucket:sum_rate...` series"


def _division_problems(expr: str, masked: str) -> list[str]:
    problems = []
    for match in re.finditer(r"/", masked):
        at = match.end()
        while True:
            while at < len(masked) and masked[at].isspace():
                at += 1
            modifier = _MODIFIER.match(masked, at)
            if not modifier:
                break
            at = modifier.end()
            if at < len(masked) and masked[at] == "(":
                at = _closing(masked, at) + 1
        rest = masked[at:]
        number = _NUMBER.match(rest)
        if number and float(number.group(0)) != 0:
            continue
        if rest.startswith("("):
            inner = masked[at + 1 : _closing(masked, at)]
            # `(x > c)` with c >= 0 drops the series a zero would divide by.
            if re.search(r">\s*[0-9]*\.?[0-9]+\s*$", inner):
                continue
        clamp = re.compile(r"clamp_min\s*\(").match(rest)
        if clamp:
            open_at = at + clamp.end() - 1
            args = _split_top(masked, open_at + 1, _closing(masked, open_at))
            if len(args) == 2 and _NUMBER.fullmatch(masked[args[1][0] : args[1][1]].strip() or "x"):
                if float(masked[args[1][0] : args[1][1]]) > 0:
                    continue
        problems.append(f"division not guarded against zero: `/ {expr[at : at + 60].strip()}`")
    return problems


def lint(expr: str, known: frozenset[str], counters: frozenset[str]) -> list[str]:
    """Problems of one expression, one line each; empty when it passes."""
    problems = [f"unknown metric {name}" for name in sorted(metric_names(expr) - known)]
    masked = _mask(expr)
    for function, start, end in _calls(masked, "rate|irate|increase"):
        for name in sorted(metric_names(expr[start:end])):
            if name not in counters:
                problems.append(f"{function}() of {name}, which is not a counter")
    for _, start, end in _calls(masked, "histogram_quantile"):
        args = _split_top(masked, start, end)
        if len(args) != 2:
            problems.append("histogram_quantile takes two arguments")
            continue
        problem = _quantile_source_problem(masked[args[1][0] : args[1][1]], known)
        if problem:
            problems.append(problem)
    problems += _division_problems(expr, masked)
    return problems
