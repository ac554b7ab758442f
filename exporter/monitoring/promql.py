"""Small PromQL and alert-template helpers shared by the rules, the dashboards and their lints."""

from __future__ import annotations

import re

# Words that look like metric names in an expression but are operators or modifiers.
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
        "atan2",
    }
)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(\s*\()?")
_TEMPLATE_QUERY = re.compile(r"printf\s+`([^`]*)`")


def selector(*matchers: str) -> str:
    """`{a, b}` from the non-empty matcher strings, or nothing when all are empty."""
    parts = [m.strip().rstrip(",") for m in matchers if m and m.strip()]
    return "{" + ", ".join(parts) + "}" if parts else ""


def series(name: str, *matchers: str) -> str:
    return name + selector(*matchers)


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads: identifiers that are not functions, keywords,
    label names (inside braces or grouping clauses) or parts of durations and numbers."""
    text = _STRING.sub('""', expr)
    text = _BRACES.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS:
            continue
        names.add(name)
    return names


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
