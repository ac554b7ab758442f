"""PromQL and alert-template helpers shared by the rules, the dashboards and their lint.

Building is string work (selectors, evidence snippets); reading — which metric names an expression
uses — goes through `parse`, a real PromQL parser (promql-parser), so the README's "Reads" column
and the lint see what Prometheus would, with no regex masking of strings and label matchers.
"""

from __future__ import annotations

import re

import promql_parser

# Template placeholders the parser cannot read, each replaced by a literal of its kind first:
# Grafana's interval variables stand where a range goes, printf's `%q` (annotation evidence
# queries) where a label value goes. Dashboard variables like `$cluster` sit inside label-value
# strings, which the parser reads as they are.
_GRAFANA_INTERVAL = re.compile(r"\$(?:\{__(?:rate_interval|interval|range)\}|__(?:rate_interval|interval|range)\b)")
_PRINTF_QUOTED = "%q"
_TEMPLATE_QUERY = re.compile(r"printf\s+`([^`]*)`")


def selector(*matchers: str) -> str:
    """`{a, b}` from the non-empty matcher strings, or nothing when all are empty."""
    parts = [m.strip().rstrip(",") for m in matchers if m and m.strip()]
    return "{" + ", ".join(parts) + "}" if parts else ""


def series(name: str, *matchers: str) -> str:
    return name + selector(*matchers)


def parse(expr: str) -> promql_parser.Expr:
    """The syntax tree of a rule's, a panel's or an evidence query's PromQL, by a real PromQL parser
    (Prometheus' grammar, ported to Rust) rather than regexes; ValueError when it does not parse."""
    return promql_parser.parse(_GRAFANA_INTERVAL.sub("1m", expr).replace(_PRINTF_QUOTED, '""'))


def vector_selectors(node: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    """Every series selector under `node`, those inside range selectors and subqueries included."""
    found: list[promql_parser.VectorSelector] = []

    def visit(child: promql_parser.Expr) -> None:
        if isinstance(child, promql_parser.VectorSelector):
            found.append(child)

    promql_parser.walk(node, visit)
    return found


def names_read(node: promql_parser.Expr) -> set[str]:
    """Metric names the selectors under `node` read: `name{...}` and `{__name__="name"}`. Label
    names, label values, strings, functions and durations are other nodes, never names."""
    names = set()
    for selector_node in vector_selectors(node):
        if selector_node.name:
            names.add(selector_node.name)
        matchers = selector_node.matchers
        for matcher in [*matchers.matchers, *(m for group in matchers.or_matchers for m in group)]:
            if matcher.name == "__name__" and matcher.op == promql_parser.MatchOp.Equal:
                names.add(matcher.value)
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads (ValueError when it is not PromQL)."""
    return names_read(parse(expr))


def template_queries(text: str) -> list[str]:
    """The PromQL inside `{{ with printf `...` ... | query }}` snippets of an annotation."""
    return [query.replace("%%", "%") for query in _TEMPLATE_QUERY.findall(text)]


def evidence(query: str, label_args: tuple[str, ...], fmt: str) -> str:
    """A Go-template snippet that runs `query` when the alert fires and prints its first value.

    `query` takes `%q` placeholders filled from the alert's labels (`label_args`, label names), so
    a page quotes figures that are not in its own expression — the DRAM activity behind a decode
    alert. Prints `n/a` when the query returns nothing (no GPU attributed to that engine, say).
    """
    args = " ".join(f"$labels.{name}" for name in label_args)
    return (
        f"{{{{ with printf `{query}` {args} | query }}}}"
        f"{{{{ . | first | value | {fmt} }}}}{{{{ else }}}}n/a{{{{ end }}}}"
    )


def label_matchers(names: tuple[str, ...]) -> str:
    """`a=%q, b=%q`: matchers for `evidence` queries, one per label name."""
    return ", ".join(f"{name}=%q" for name in names)


def escape_printf(text: str) -> str:
    return text.replace("%", "%%")


def percent(ratio: float) -> str:
    """0.8 -> "80%", 0.955 -> "95.5%"."""
    whole = abs(ratio * 100 - round(ratio * 100)) < 1e-9
    return f"{ratio:.0%}" if whole else f"{ratio:.1%}"
