"""A PromQL lint for the generated dashboards and rules: the mistakes upstream LLM dashboards make.

- `histogram_quantile` only over `sum by (le, ...) (rate(..._bucket[...]))` or over a sum of a
  recorded `..._bucket:sum_rate<window>` series (a quantile per series, or of raw cumulative
  buckets, is meaningless);
- `rate`, `irate` and `increase` only on counters (a counter family, a summary's or histogram's
  `_count`/`_sum`/`_bucket`, an engine's `_total`);
- every division guarded against a zero denominator: `/ (x > 0)`, `/ clamp_min(x, c)` with c > 0,
  or a non-zero number;
- every metric name known: the catalogue, the engines' known names, or a recording rule.

It walks the syntax tree of a real PromQL parser (`promql.parse`): a metric name inside a nested
call or a binary operand is found, and a label value or a string that looks like one is not.
"""

from __future__ import annotations

import re

from promql_parser import (
    AggModifierType,
    AggregateExpr,
    BinaryExpr,
    Call,
    Expr,
    MatrixSelector,
    NumberLiteral,
    ParenExpr,
    UnaryExpr,
    VectorSelector,
    walk,
)

from exporter.catalogue import CATALOGUE
from exporter.monitoring.cluster import cluster_records
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.pd_rules import pd_recording_rules
from exporter.monitoring.promql import names_read, parse
from exporter.monitoring.records import recording_rules
from exporter.monitoring.slo_rules import slo_recording_rules
from exporter.sources.engines import MAPPINGS

# Prometheus' own synthetic series.
PROMETHEUS_SERIES = frozenset({"up"})
_COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
# Functions whose argument must be a counter.
_COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase"})
# A recording rule's bucket rates, summed over replicas (records.RecordNames.latency_buckets).
_RECORDED_BUCKETS = re.compile(r"[\w:]+_bucket:sum_rate\w+")


def known_names(config: MonitoringConfig) -> frozenset[str]:
    names = set(PROMETHEUS_SERIES)
    for spec in CATALOGUE.values():
        names.add(spec.name)
        if spec.type == "summary":
            names.update((spec.name + "_count", spec.name + "_sum"))
    for mapping in MAPPINGS.values():
        names.update(mapping.wanted())
    names.update(rule.record for rule in recording_rules(config))
    names.update(rule.record for rule in slo_recording_rules(config))
    names.update(rule.record for rule in cluster_records(config))
    names.update(rule.record for rule in pd_recording_rules(config))
    return frozenset(names)


def counter_names() -> frozenset[str]:
    names = {spec.name for spec in CATALOGUE.values() if spec.type == "counter"}
    names.update(
        f"{spec.name}{suffix}" for spec in CATALOGUE.values() if spec.type == "summary" for suffix in ("_count", "_sum")
    )
    for mapping in MAPPINGS.values():
        names.update(name for name in mapping.wanted() if name.endswith(_COUNTER_SUFFIXES))
    return frozenset(names)


def _unwrapped(node: Expr) -> Expr:
    while isinstance(node, ParenExpr):
        node = node.expr
    return node


def _number(node: Expr) -> float | None:
    """The value of a number literal, through parentheses and unary minus; None for anything else."""
    node = _unwrapped(node)
    if isinstance(node, NumberLiteral):
        return float(node.val)
    if isinstance(node, UnaryExpr):
        inner = _number(node.expr)
        return None if inner is None else -inner
    return None


def _keeps_le(aggregation: AggregateExpr) -> bool:
    modifier = aggregation.modifier
    if modifier is None:
        return False
    if modifier.type == AggModifierType.By:
        return "le" in modifier.labels
    return "le" not in modifier.labels  # `without (...)` keeps every label it does not name


def _quantile_source_problem(source: Expr, known: frozenset[str]) -> str | None:
    source = _unwrapped(source)
    if not (isinstance(source, AggregateExpr) and str(source.op) == "sum"):
        return "histogram_quantile must read a `sum by (le, ...)` of bucket rates"
    if not _keeps_le(source):
        return "histogram_quantile over a sum that does not keep `le`"
    summed = _unwrapped(source.expr)
    if isinstance(summed, Call) and summed.func.name in ("rate", "irate"):
        matrix = _unwrapped(summed.args[0])
        if isinstance(matrix, MatrixSelector) and (matrix.vector_selector.name or "").endswith("_bucket"):
            return None
    if isinstance(summed, VectorSelector) and summed.name in known and _RECORDED_BUCKETS.fullmatch(summed.name):
        return None
    return "histogram_quantile must sum `rate(..._bucket[...])` or a recorded `..._bucket:sum_rate...` series"


def _guards_zero(denominator: Expr) -> bool:
    """`/ (x > c)` with c >= 0 (drops the series a zero would divide by), `/ clamp_min(x, c)` with
    c > 0, or a non-zero number."""
    number = _number(denominator)
    if number is not None:
        return number != 0
    denominator = _unwrapped(denominator)
    if isinstance(denominator, BinaryExpr) and str(denominator.op) == ">":
        bound = _number(denominator.rhs)
        filters = denominator.modifier is None or not denominator.modifier.return_bool
        return filters and bound is not None and bound >= 0
    if isinstance(denominator, Call) and denominator.func.name == "clamp_min":
        bound = _number(denominator.args[1])
        return bound is not None and bound > 0
    return False


def lint(expr: str, known: frozenset[str], counters: frozenset[str]) -> list[str]:
    """Problems of one expression, one line each; empty when it passes."""
    try:
        tree = parse(expr)
    except ValueError as error:
        return [f"not valid PromQL: {error}"]
    problems = [f"unknown metric {name}" for name in sorted(names_read(tree) - known)]

    def visit(node: Expr) -> None:
        if isinstance(node, Call) and node.func.name in _COUNTER_FUNCTIONS:
            for name in sorted(names_read(node) - counters):
                problems.append(f"{node.func.name}() of {name}, which is not a counter")
        elif isinstance(node, Call) and node.func.name == "histogram_quantile":
            problem = _quantile_source_problem(node.args[1], known)
            if problem:
                problems.append(problem)
        elif isinstance(node, BinaryExpr) and str(node.op) == "/" and not _guards_zero(node.rhs):
            problems.append(f"division not guarded against zero: `/ {node.rhs}`")

    walk(tree, visit)
    return problems
