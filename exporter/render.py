"""Text 0.0.4 and OpenMetrics bodies of normalized metrics, both in one pass, byte for byte what
prometheus_client's `generate_latest` (and its OpenMetrics twin) write for the same families.

Why not prometheus_client's own writers: they escape every sample name and label name a character
at a time through a StringIO (OpenMetrics' "underscores" escaping) and sort and format every label
set again for each sample and each format. At 128 engine targets that is ~100 ms per format per
snapshot, and a snapshot is rendered every interval. Here the per-name work is done once per name
(cached for the process: names come from the catalogue and the configuration), a label set is
formatted once per render however many samples share it (an engine's samples share one dict), and
one line serves both formats whenever the two escape a name alike (always, for catalogue names).
prometheus_client stays the reference: tests/unit/test_exposition_render.py compares the two on
real snapshots and on hostile label values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from prometheus_client.openmetrics.exposition import (
    ALLOWUTF8,
    UNDERSCORES,
    _escape,
    _is_legacy_labelname_rune,
    escape_label_name,
    escape_metric_name,
)

from exporter.catalogue import CATALOGUE
from exporter.model import Metric, QuantileSummary

_INF = math.inf

_label_names: dict[str, str] = {}
#: sample name -> (text 0.0.4 spelling, OpenMetrics spelling)
_sample_names: dict[str, tuple[str, str]] = {}
#: family -> (text header, OpenMetrics header)
_headers: dict[str, tuple[str, str]] = {}


def go_float(value: float) -> str:
    """prometheus_client's floatToGoString, inlined for the common case."""
    d = float(value)
    if d == _INF:
        return "+Inf"
    if d == -_INF:
        return "-Inf"
    if d != d:
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:  # Go switches to exponents sooner than Python
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _label_name(name: str) -> str:
    escaped = _label_names.get(name)
    if escaped is None:
        escaped = _label_names[name] = escape_label_name(name, UNDERSCORES)
    return escaped


def label_string(labels: Mapping[str, str]) -> str:
    """`k="v",…` sorted by name, values escaped (both formats escape values alike)."""
    parts = []
    for key, value in sorted(labels.items()):
        if "\\" in value or "\n" in value or '"' in value:
            value = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        parts.append(f'{_label_name(key)}="{value}"')
    return ",".join(parts)


def _names(name: str) -> tuple[str, str]:
    names = _sample_names.get(name)
    if names is None:
        names = _sample_names[name] = (
            escape_metric_name(name, UNDERSCORES),
            _escape(name, UNDERSCORES, _is_legacy_labelname_rune),
        )
    return names


def _header(name: str) -> tuple[str, str]:
    header = _headers.get(name)
    if header is None:
        spec = CATALOGUE[name]
        family = name[: -len("_total")] if spec.type == "counter" and name.endswith("_total") else name
        text_name = escape_metric_name(family + "_total" if spec.type == "counter" else family, UNDERSCORES)
        text_help = spec.help.replace("\\", r"\\").replace("\n", r"\n")
        om_name = escape_metric_name(family, UNDERSCORES)
        om_help = _escape(spec.help, ALLOWUTF8, _is_legacy_labelname_rune)
        header = _headers[name] = (
            f"# HELP {text_name} {text_help}\n# TYPE {text_name} {spec.type}\n",
            f"# HELP {om_name} {om_help}\n# TYPE {om_name} {spec.type}\n",
        )
    return header


def render_formats(metrics: Iterable[Metric]) -> tuple[bytes, bytes]:
    """(text 0.0.4 body, OpenMetrics body), families in catalogue order, as prometheus_client
    would render `exporter.exposition.families(metrics)`."""
    grouped: dict[str, list[Metric]] = {}
    for metric in metrics:
        members = grouped.get(metric.name)
        if members is None:
            grouped[metric.name] = [metric]
        else:
            members.append(metric)
    missing = set(grouped) - CATALOGUE.keys()
    if missing:
        raise KeyError(f"families missing from the catalogue: {sorted(missing)}")
    text: list[str] = []
    openmetrics: list[str] = []
    # A label set is formatted once per render: by id, since the metrics (and so their label
    # dicts) stay alive until this returns; dicts are compared by identity, never mutated here.
    formatted: dict[int, str] = {}

    def braces(labels: Mapping[str, str]) -> str:
        key = id(labels)
        cached = formatted.get(key)
        if cached is None:
            inner = label_string(labels)
            cached = formatted[key] = "{" + inner + "}" if inner else ""
        return cached

    def line(name: str, labels: str, value: float) -> None:
        text_name, om_name = _names(name)
        rest = f"{labels} {go_float(value)}\n"
        text.append(text_name + rest)
        openmetrics.append(om_name + rest)

    for name in CATALOGUE:
        members = grouped.get(name)
        if not members:
            continue
        text_header, om_header = _header(name)
        text.append(text_header)
        openmetrics.append(om_header)
        for member in members:
            labels = braces(member.labels)
            if isinstance(member, QuantileSummary):
                for quantile, value in member.quantiles:
                    with_quantile = {**member.labels, "quantile": repr(quantile)}
                    line(name, "{" + label_string(with_quantile) + "}", value)
                line(name + "_count", labels, member.count)
                line(name + "_sum", labels, member.sum)
            else:
                line(name, labels, member.value)
    openmetrics.append("# EOF\n")
    return "".join(text).encode("utf-8"), "".join(openmetrics).encode("utf-8")
