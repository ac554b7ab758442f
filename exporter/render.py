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

from prometheus_client.openmetrics.exposition import UNDERSCORES, escape_label_name, escape_metric_name

from exporter.catalogue import CATALOGUE
from exporter.model import Metric, QuantileSummary

_INF = math.inf

_label_names: dict[str, str] = {}
#: sample name -> (text 0.0.4 spelling, OpenMetrics spelling)
_sample_names: dict[str, tuple[str, str]] = {}
#: family -> (text header, OpenMetrics header)
_headers: dict[str, tuple[str, str]] = {}


def go_float(value: float) -> str:
    """prometheus_client's floatToGoString, with a fast path for the common case."""
    d = float(value)
    if -_INF < d < 1e6:  # finite, below where Go's exponent form starts: Python's repr is Go's
        return repr(d)
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
        # prometheus_client's OpenMetrics writer spells a sample name with the label-name
        # alphabet (a `:` becomes `_`), which is what escape_label_name does.
        names = _sample_names[name] = (escape_metric_name(name, UNDERSCORES), escape_label_name(name, UNDERSCORES))
    return names


def _header(name: str) -> tuple[str, str]:
    header = _headers.get(name)
    if header is None:
        spec = CATALOGUE[name]
        family = name[: -len("_total")] if spec.type == "counter" and name.endswith("_total") else name
        text_name = escape_metric_name(family + "_total" if spec.type == "counter" else family, UNDERSCORES)
        text_help = spec.help.replace("\\", r"\\").replace("\n", r"\n")
        om_name = escape_metric_name(family, UNDERSCORES)
        # OpenMetrics escapes `"` in HELP too; the text format only `\\` and newlines.
        om_help = text_help.replace('"', r"\"")
        header = _headers[name] = (
            f"# HELP {text_name} {text_help}\n# TYPE {text_name} {spec.type}\n",
            f"# HELP {om_name} {om_help}\n# TYPE {om_name} {spec.type}\n",
        )
    return header


#: label set (as its items, in insertion order) -> its `{…}`; kept across renders, since the
#: label sets of a node repeat every collection; cleared once it holds more than twice the label
#: sets a render used (and CACHE_FLOOR): those of a replaced model or a departed engine never occur
#: again, and kept they would grow the process for as long as it lives
CACHE_FLOOR = 256
_braces: dict[tuple[tuple[str, str], ...], str] = {}
_quantile_braces: dict[tuple[tuple[tuple[str, str], ...], tuple[float, ...]], tuple[str, ...]] = {}


def _braces_of(items: tuple[tuple[str, str], ...]) -> str:
    text = _braces.get(items)
    if text is None:
        inner = label_string(dict(items))
        text = _braces[items] = "{" + inner + "}" if inner else ""
    return text


def _quantile_braces_of(items: tuple[tuple[str, str], ...], quantiles: tuple[float, ...]) -> tuple[str, ...]:
    key = (items, quantiles)
    texts = _quantile_braces.get(key)
    if texts is None:
        labels = dict(items)
        texts = _quantile_braces[key] = tuple(
            "{" + label_string({**labels, "quantile": repr(q)}) + "}" for q in quantiles
        )
    return texts


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
    # Per render, by id: the metrics (and so their label dicts) stay alive until this returns.
    by_id: dict[int, tuple[tuple[str, str], ...]] = {}
    marks_by_id: dict[int, str] = {}
    for name in CATALOGUE:
        members = grouped.get(name)
        if not members:
            continue
        text_header, om_header = _header(name)
        lines: list[str] = []
        om_lines: list[str] | None = None  # only where the formats spell a sample name apart
        is_summary = CATALOGUE[name].type == "summary"
        names: tuple[tuple[str, str], ...] = (
            (_names(name), _names(name + "_count"), _names(name + "_sum")) if is_summary else (_names(name),)
        )
        if any(text_name != om_name for text_name, om_name in names):
            om_lines = []
        if is_summary:
            for member in members:
                assert isinstance(member, QuantileSummary)
                items = by_id.get(id(member.labels))
                if items is None:
                    items = by_id[id(member.labels)] = tuple(member.labels.items())
                labels = _braces_of(items)
                quantiles = member.quantiles
                marks = _quantile_braces_of(items, tuple(q for q, _ in quantiles))
                rows = [(names[0], mark, value) for mark, (_, value) in zip(marks, quantiles)]
                rows += [(names[1], labels, member.count), (names[2], labels, member.sum)]
                for (text_name, om_name), mark, value in rows:
                    rest = f"{mark} {go_float(value)}\n"
                    lines.append(text_name + rest)
                    if om_lines is not None:
                        om_lines.append(om_name + rest)
        else:
            # Most of a render is this loop: the label mark by id, go_float's fast path inlined.
            text_name, om_name = names[0]
            append = lines.append
            for member in members:
                label_mark = marks_by_id.get(id(member.labels))
                if label_mark is None:
                    label_mark = marks_by_id[id(member.labels)] = _braces_of(tuple(member.labels.items()))
                value = member.value  # type: ignore[union-attr]  # a summary family holds summaries only
                shown = repr(value) if type(value) is float and -_INF < value < 1e6 else go_float(value)
                if om_lines is None:
                    append(f"{text_name}{label_mark} {shown}\n")
                else:
                    append(f"{text_name}{label_mark} {shown}\n")
                    om_lines.append(f"{om_name}{label_mark} {shown}\n")
        body = "".join(lines)
        text.append(text_header)
        text.append(body)
        openmetrics.append(om_header)
        openmetrics.append(body if om_lines is None else "".join(om_lines))
    openmetrics.append("# EOF\n")
    used = len(marks_by_id) + len(by_id)  # at least the distinct label sets this render read
    if len(_braces) + len(_quantile_braces) > 2 * used + CACHE_FLOOR:  # label sets that no longer occur
        _braces.clear()
        _quantile_braces.clear()
    return "".join(text).encode("utf-8"), "".join(openmetrics).encode("utf-8")
