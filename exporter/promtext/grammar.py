"""What a sample line may be: the grammar of the Prometheus text format 0.0.4 and of OpenMetrics 1.0.

A target may speak either (vLLM's Rust frontend serves OpenMetrics whatever the Accept header
says), so a line is read if either format allows it, and dropped if neither does:

- **numbers** as both define them: ASCII digits, an optional sign, fraction and exponent, `Inf` /
  `Infinity` with an optional sign and `NaN` without one, in any case. Python's `float()` accepts
  more (`1_000`, non-ASCII digits, surrounding control characters, `-nan`), hence a regex first;
- **whitespace** as the text format allows it (spaces or tabs around labels, values and
  timestamps, a trailing comma in a label set); an OpenMetrics exemplar as OpenMetrics writes it
  (` # {labels} value [timestamp]`, its label set at most 128 characters, nothing after it);
- **label values** quoted, with no raw newline; unknown escapes (`\\z`) are kept as written, as
  OpenMetrics' own suite reads them; valid UTF-8 only (the body is decoded with
  `surrogateescape`, so an invalid byte shows as a surrogate and the line is dropped); label names
  bare or quoted (Prometheus 3's UTF-8 names), each at most once, `__name__` not among them;
- **timestamps** as numbers without `NaN` or `Inf`.

Every pattern is possessive (`*+`, `?+`), so no input makes the regex engine backtrack into a run
of spaces or digits: a line costs time linear in its length.
"""

from __future__ import annotations

import re

LabelKey = tuple[tuple[str, str], ...]

#: how bodies are decoded: an invalid byte becomes a lone surrogate, which no wanted line keeps
DECODE_ERRORS = "surrogateescape"

_DIGITS = r"[0-9]++"
_REAL = rf"[+-]?+(?:{_DIGITS}(?:\.[0-9]*+)?+|\.{_DIGITS})(?:[eE][+-]?+{_DIGITS})?+"
#: a sample value: a real number, ±Inf/Infinity, NaN (ASCII, any case)
NUMBER = rf"(?:{_REAL}|[+-]?+[iI][nN][fF](?:[iI][nN][iI][tT][yY])?+|[nN][aA][nN])"
_NUMBER = re.compile(NUMBER)

_WS = r"[ \t]*+"
_QUOTED = r'"(?:[^"\\\n]|\\.)*+"'
_PAIR = rf"(?:[a-zA-Z_][a-zA-Z0-9_]*+|{_QUOTED}){_WS}={_WS}{_QUOTED}"
_OM_PAIR = rf"[a-zA-Z_][a-zA-Z0-9_]*+={_QUOTED}"
_EXEMPLAR = rf" # (\{{(?:{_OM_PAIR}(?:,{_OM_PAIR})*+)?+\}}) {NUMBER}(?: {_REAL})?+"
#: what follows the metric name: label set (whitespace around its terms and a trailing comma, as
#: the text format allows), value, timestamp, exemplar (groups: the label set's inside, the value,
#: the exemplar's label set)
SAMPLE_REST = re.compile(
    rf"{_WS}(?:\{{({_WS}(?:{_PAIR}{_WS}(?:,{_WS}{_PAIR}{_WS})*+(?:,{_WS})?+)?+)\}}{_WS})?+"
    rf"({NUMBER})(?:[ \t]++{_REAL})?+(?:{_EXEMPLAR}|{_WS})\Z"
)
# The form every engine writes, checked first by a simpler pattern: `name{k="v",...} value`, one
# space before the value, no escapes, no timestamp, no `__name__` label.
_PLAIN_PAIR = r'(?!__name__=)[a-zA-Z_][a-zA-Z0-9_]*+="[^"\\\n]*+"'
#: the whole line, read from its start (groups: the name, the label set's inside, the value)
CANONICAL_LABELLED = re.compile(rf"([a-zA-Z_:][a-zA-Z0-9_:]*+)\{{((?:{_PLAIN_PAIR},)*+{_PLAIN_PAIR})?+\}} ({NUMBER})\Z")
#: the pairs of a label set CANONICAL_LABELLED accepted
CANONICAL_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')

#: a metric name as the text format spells it (a wanted line starts with one)
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

# Pairs of a label set the grammar already accepted: bare names, no escapes (the common case);
# then quoted names and escapes.
PLAIN_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*)"')
_PAIRS = re.compile(r'(?:([a-zA-Z_][a-zA-Z0-9_]*)|"((?:[^"\\]|\\.)*)")[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"')
# The complete pairs at the head of a label set, each followed by a comma: where a line too long
# to be kept whole still has its first labels (an info metric's, see `leading_pairs`).
_LEADING_PAIRS = re.compile(rf"\{{(?:{_WS}{_PAIR}{_WS},)*+")
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}
_SURROGATE = re.compile("[\ud800-\udfff]")
#: OpenMetrics: an exemplar's label names and values together, in characters
MAX_EXEMPLAR_LABEL_CHARS = 128


def parse_number(text: str) -> float | None:
    """`text` as a sample value if it is one by the formats' definition, else None."""
    return float(text) if _NUMBER.fullmatch(text) else None


def numbers(texts: list[str]) -> list[float] | None:
    """Every text as a number, or None if any is not one: one regex pass over them all, in C, and
    a simpler one first (digits, points, exponents and signs only, where `float()` accepts exactly
    what the formats do)."""
    joined = "\n".join(texts)
    if _DECIMALS.fullmatch(joined) is None and _ALL_NUMBERS.fullmatch(joined) is None:
        return None
    try:
        return [float(text) for text in texts]
    except ValueError:  # `1e`, `.`: decimal characters that are no number
        return None


_DECIMALS = re.compile(r"[0-9.eE+\-\n]*+")
_ALL_NUMBERS = re.compile(rf"(?:{NUMBER}(?:\n{NUMBER})*+)?+")


def unescape(value: str) -> str:
    """A label value's escapes: `\\n`, `\\\\` and `\\"`; any other is kept as written."""
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value)


def label_pairs(body: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a label set's inside that SAMPLE_REST accepted, as written."""
    if "\\" not in body:
        pairs: list[tuple[str, str]] = PLAIN_PAIRS.findall(body)
        if body.count('"') == 2 * len(pairs):  # else a quoted label name
            return pairs
    return [(name or unescape(quoted), unescape(value)) for name, quoted, value in _PAIRS.findall(body)]


def sorted_labels(pairs: list[tuple[str, str]]) -> LabelKey | None:
    """The pairs sorted by name (a series' key); None when a name repeats or is `__name__`
    (reserved for the metric name)."""
    if len(pairs) > 1 or (pairs and pairs[0][0] == "__name__"):
        found = dict(pairs)
        if len(found) != len(pairs) or "__name__" in found:
            return None
        pairs.sort()
    return tuple(pairs)


def exemplar_fits(exemplar: str) -> bool:
    """Whether an exemplar's label set (braces included) holds at most 128 characters of names and
    values, as OpenMetrics bounds it."""
    if len(exemplar) <= MAX_EXEMPLAR_LABEL_CHARS + 2:
        return True
    pairs = sorted_labels(label_pairs(exemplar[1:-1]))
    return pairs is not None and sum(len(name) + len(value) for name, value in pairs) <= MAX_EXEMPLAR_LABEL_CHARS


def has_invalid_utf8(line: str) -> bool:
    """Whether the line held bytes that are not UTF-8 (decoded as lone surrogates)."""
    return not line.isascii() and _SURROGATE.search(line) is not None


def leading_pairs(line: str, start: int, limit: int) -> LabelKey:
    """The complete label pairs in line[start:limit], where `start` is the label set's `{`: what
    is left of a line over the length kept (the rest was never read, see LineBlocks)."""
    head = _LEADING_PAIRS.match(line, start, limit)
    if head is None:
        return ()
    return tuple(sorted(dict(label_pairs(line[start + 1 : head.end()])).items()))
