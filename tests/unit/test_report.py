"""The report's logic without Prometheus: windows, statistics, matrix rows, verdicts, causes,
the fix verdict, the queries' PromQL and the command line's error exits."""

from __future__ import annotations

import math
import socket
from datetime import UTC, datetime

import pytest

from exporter.catalogue import CATALOGUE
from exporter.cli import main
from exporter.monitoring.config import LabelNames
from exporter.monitoring.promql import names_read, parse
from exporter.report.causes import config_causes, mix_causes
from exporter.report.fix import fix_verdict
from exporter.report.matrix import Row, build_rows
from exporter.report.queries import FIGURES, FIGURES_BY_KEY, LEVELS, QueryContext
from exporter.report.slices import parse_slice, slice_figures
from exporter.report.stats import WindowValue, change, mann_whitney_p
from exporter.report.walk import EngineStages, cluster_primary, verdict
from exporter.report.windows import Window, WindowError, parse_duration, parse_time, parse_window
from exporter.sources.engines import MAPPINGS

NOW = 1_800_000_000.0


# --- windows -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("2d", 172800), ("1w", 604800), ("250ms", 0.25)]
)
def test_durations_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "m", "1.5h", "5x", "-5m", "1m1h"])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_times_are_rfc3339_unix_seconds_now_or_relative() -> None:
    assert parse_time("now", NOW) == NOW
    assert parse_time("-2h", NOW) == NOW - 7200
    assert parse_time("1700000000", NOW) == 1_700_000_000
    assert parse_time("1700000000.5", NOW) == 1_700_000_000.5
    assert parse_time("2026-01-01T10:00:00Z", NOW) == datetime(2026, 1, 1, 10, tzinfo=UTC).timestamp()
    assert parse_time("2026-01-01T12:00:00+02:00", NOW) == datetime(2026, 1, 1, 10, tzinfo=UTC).timestamp()
    with pytest.raises(ValueError, match="UTC offset"):
        parse_time("2026-01-01T10:00:00", NOW)
    with pytest.raises(ValueError, match="not RFC 3339"):
        parse_time("yesterday", NOW)


def test_a_window_is_start_slash_end() -> None:
    window = parse_window("--incident", "incident", "-1h/now", NOW)
    assert (window.name, window.start, window.end) == ("incident", NOW - 3600, NOW)
    # An end in the future is cut at now: there is no data there.
    assert parse_window("--after", "after", "-10m/2099-01-01T00:00:00Z", NOW).end == NOW


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1h", "is not START/END"),
        ("-1h/", "is not START/END"),
        ("-1h/-2h", "is not after the start"),
        ("now/now", "is not after the start"),
        ("2099-01-01T00:00:00Z/2099-01-02T00:00:00Z", "starts in the future"),
        ("-1y/now", "duration"),
        ("a/b", "not RFC 3339"),
    ],
)
def test_a_bad_window_names_its_flag(text: str, message: str) -> None:
    with pytest.raises(WindowError, match=message) as caught:
        parse_window("--baseline", "baseline", text, NOW)
    assert str(caught.value).startswith("--baseline: ")


def test_windows_align_inwards_to_the_step() -> None:
    aligned = Window("b", 1003.0, 1296.0).aligned(15)
    assert (aligned.start, aligned.end) == (1005.0, 1290.0)


# --- statistics ---------------------------------------------------------------------------------


def test_a_window_value_is_the_mean_of_finite_values_and_none_without_any() -> None:
    value = WindowValue.of([1.0, 3.0, math.nan, math.inf])
    assert (value.mean, value.samples) == (2.0, 2)
    empty = WindowValue.of([math.nan])
    assert (empty.mean, empty.samples) == (None, 0)


def test_change_is_absolute_and_relative_and_none_from_zero_or_missing() -> None:
    assert change(WindowValue.of([200.0]), WindowValue.of([800.0])) == (600.0, 3.0)
    assert change(WindowValue.of([0.0]), WindowValue.of([5.0])) == (5.0, None)
    assert change(WindowValue(None, 0), WindowValue.of([5.0])) == (None, None)


def test_mann_whitney_matches_the_exact_small_sample_value() -> None:
    # Three against three, fully separated: 2 of the 20 orderings are as extreme, p = 0.1.
    p = mann_whitney_p(WindowValue.of([1.0, 2.0, 3.0]), WindowValue.of([4.0, 5.0, 6.0]))
    assert p == pytest.approx(0.1)
    same = mann_whitney_p(WindowValue.of([1.0, 2.0, 3.0, 4.0]), WindowValue.of([1.0, 2.0, 3.0, 4.0]))
    assert same is not None and same > 0.9
    assert mann_whitney_p(WindowValue.of([1.0, 2.0]), WindowValue.of([4.0, 5.0, 6.0])) is None
    assert mann_whitney_p(WindowValue.of([7.0] * 5), WindowValue.of([7.0] * 5)) == 1.0


# --- matrix, walk, causes, fix ------------------------------------------------------------------


def _rows(values: dict[str, dict[str, list[float]]], level: str = "cluster") -> dict[str, Row]:
    """Cluster rows of figures from per-window values of one group."""
    out = {}
    for key, per_window in values.items():
        data = {w: {("c", "", ""): v} for w, v in per_window.items()}
        out[key] = build_rows(FIGURES_BY_KEY[key], level, data, "after" in per_window)[0]  # type: ignore[arg-type]
    return out


def test_matrix_rows_say_missing_windows_and_compare_incident_and_after_to_baseline() -> None:
    per_window = {
        "baseline": {("c", "m", "e0"): [1.0, 1.0, 1.0], ("c", "m", "e1"): [2.0, 2.0, 2.0]},
        "incident": {("c", "m", "e0"): [3.0, 3.0, 3.0]},
        "after": {("c", "m", "e0"): [1.0, 1.1, 0.9], ("c", "m", ""): [9.0]},
    }
    rows = build_rows(FIGURES_BY_KEY["waiting"], "engine", per_window, has_after=True)
    assert [r.group for r in rows] == [("c", "m", "e0"), ("c", "m", "e1")]  # no engine label: not an engine row
    e0, e1 = rows
    assert e0.incident.relative == pytest.approx(2.0) and e0.after is not None
    assert e0.after.relative == pytest.approx(0.0)
    assert e1.values["incident"].mean is None and e1.values["incident"].samples == 0
    assert e1.incident.absolute is None and e1.incident.p_value is None


def test_stage_verdicts() -> None:
    assert verdict(0.0, 0.9, 0.2, 0.8) == "became the bottleneck"
    assert verdict(0.9, 0.0, 0.8, 0.2) == "eased"
    assert verdict(0.0, 0.0, 0.2, 0.5) == "worsened"
    assert verdict(0.0, 0.0, 0.5, 0.2) == "improved"
    assert verdict(0.0, 0.0, 0.3, 0.35) == "unchanged"
    assert verdict(None, 0.5, None, 0.5) == "no data"


def test_an_engines_primary_is_the_stage_primary_longest_and_the_clusters_the_most_common() -> None:
    decode = EngineStages({"none": 0.3, "decode_memory_bandwidth": 0.7}, {}, 10)
    idle = EngineStages({"none": 1.0}, {}, 10)
    assert decode.primary == "decode_memory_bandwidth"
    assert cluster_primary({"a": decode, "b": decode, "c": idle}) == "decode_memory_bandwidth"
    assert cluster_primary({}) == "none"


def test_a_four_times_longer_prompt_is_the_cause_and_a_lower_completion_rate_is_not() -> None:
    rows = _rows(
        {
            "mean_prompt_tokens": {"baseline": [200.0] * 4, "incident": [800.0] * 4},
            "mean_output_tokens": {"baseline": [500.0] * 4, "incident": [490.0] * 4},
            "request_rate": {"baseline": [20.0] * 4, "incident": [11.0] * 4},
        }
    )
    causes = mix_causes(rows, "decode_memory_bandwidth")
    assert [c.figure for c in causes] == ["mean_prompt_tokens"]
    assert causes[0].ratio == pytest.approx(4.0) and causes[0].explains
    assert "×4.0" in causes[0].summary and "200 tokens → 800 tokens" in causes[0].summary
    more_load = _rows({"request_rate": {"baseline": [10.0] * 4, "incident": [25.0] * 4}})
    assert [c.figure for c in mix_causes(more_load, "queueing")] == ["request_rate"]


def test_an_engine_configuration_change_is_named_by_its_label() -> None:
    before = [
        {"__name__": "vllm:cache_config_info", "engine": "e0", "enable_prefix_caching": "False", "block_size": "16"}
    ]
    after = [
        {"__name__": "vllm:cache_config_info", "engine": "e0", "enable_prefix_caching": "True", "block_size": "16"}
    ]
    causes = config_causes("vllm:cache_config_info", before, after, "after")
    assert len(causes) == 1
    assert causes[0].kind == "engine_config" and "enable_prefix_caching: False → True" in causes[0].summary
    assert config_causes("vllm:cache_config_info", before, before) == []


def test_the_fix_worked_when_the_stage_is_gone_and_the_tails_came_back() -> None:
    rows = _rows(
        {
            "e2e_p99": {"baseline": [0.8] * 4, "incident": [2.5] * 4, "after": [0.82] * 4},
            "ttft_p99": {"baseline": [0.1] * 4, "incident": [3.0] * 4, "after": [0.5] * 4},
            "request_rate": {"baseline": [120.0] * 4, "incident": [72.0] * 4, "after": [185.0] * 4},
        }
    )
    worked = fix_verdict(rows, "decode_memory_bandwidth", "none")
    verdicts = {f.figure: f.verdict for f in worked.figures}
    assert worked.worked and verdicts == {"request_rate": "recovered", "e2e_p99": "recovered", "ttft_p99": "improved"}
    still = fix_verdict(rows, "decode_memory_bandwidth", "decode_memory_bandwidth")
    assert not still.worked and "still the primary stage" in still.summary
    worse = _rows({"e2e_p99": {"baseline": [0.8] * 4, "incident": [2.5] * 4, "after": [4.0] * 4}})
    assert fix_verdict(worse, "queueing", "none").figures[0].verdict == "worse"


# --- queries ------------------------------------------------------------------------------------


def test_every_figure_is_valid_promql_reading_only_exported_or_engine_names() -> None:
    ctx = QueryContext('job="x", model="m"', "2m", LabelNames())
    engine_names = {n for mapping in MAPPINGS.values() for h in mapping.histograms for n in h.names}
    known = set(CATALOGUE) | {f"{n}_bucket" for n in engine_names}
    counts = {f"{n}_count" for n in CATALOGUE} | {f"{n}_sum" for n in CATALOGUE}
    built = 0
    for figure in FIGURES:
        for level in LEVELS:
            expr = figure.build(ctx, level)
            if expr is None:
                continue
            names = names_read(parse(expr))
            assert names <= known | counts, (figure.key, level, names - known - counts)
            assert ":" not in "".join(n for n in names if n in CATALOGUE)  # no recorded series left
            assert 'model="m"' in expr, (figure.key, level)  # the selector reaches every figure
            built += 1
    assert built >= 2 * len(FIGURES)


def test_a_slice_adds_its_own_rows_reading_only_that_slice() -> None:
    ctx = QueryContext('job="x", model="m"', "2m", LabelNames())
    rows = slice_figures(parse_slice("tenant=team-a"))
    assert [f.key for f in rows] == ["slice_attainment", "slice_goodput", "slice_waiting", "slice_queueing"]
    for figure in rows:
        for level in LEVELS:
            expr = figure.build(ctx, level)
            assert expr is not None and names_read(parse(expr)) <= set(CATALOGUE), (figure.key, level)
            assert 'slice_by="tenant"' in expr and 'slice="team-a"' in expr and 'model="m"' in expr
    assert slice_figures(None) == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [("team-a", "is not DIMENSION=VALUE"), ("user=bob", "is not a slice dimension"), ('tenant=a"b', "quote")],
)
def test_a_bad_slice_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_slice(text)


def test_engine_level_figures_group_by_engine() -> None:
    ctx = QueryContext('job="x"', "1m", LabelNames())
    assert "by (cluster, engine, model)" in FIGURES_BY_KEY["running"].build(ctx, "engine")  # type: ignore[operator]
    assert "by (cluster, model)" in FIGURES_BY_KEY["running"].build(ctx, "model")  # type: ignore[operator]
    assert FIGURES_BY_KEY["running"].build(ctx, "cluster").startswith("sum by (cluster) (")  # type: ignore[union-attr]


# --- command line -------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "-1h/-2h"], "--baseline: the end '-2h' is not after the start '-1h'"),
        (["--selector", "{model=}"], "--selector: '{model=}' is not a PromQL selector"),
        (["--selector", "model=x"], "--selector: 'model=x' is not a selector"),
        (["--step", "fast"], "is not a duration"),
        (["--slice", "tenant"], "--slice: 'tenant' is not DIMENSION=VALUE"),
        (["--key-file", "/etc/hostname"], "--key-file needs --cert-file"),
        (
            ["--bearer-token-file", "/nonexistent/token"],
            "--bearer-token-file: /nonexistent/token is not a readable file",
        ),
        ([], "connection refused"),
    ],
)
def test_user_errors_exit_2_with_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "report",
        "--prometheus",
        f"http://127.0.0.1:{_closed_port()}",
        "--baseline",
        "-2h/-1h",
        "--incident",
        "-1h/now",
    ]
    # A later flag wins in argparse: the extra ones override the defaults above.
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_non_http_prometheus_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--prometheus", "localhost:9090", "--baseline", "-2h/-1h", "--incident", "-1h/now"]) == 2
    assert "--prometheus: 'localhost:9090' is not an http:// or https:// URL" in capsys.readouterr().err


def test_report_without_its_extra_says_what_to_install(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else real(name, *a))
    code = main(["report", "--prometheus", "http://127.0.0.1:9", "--baseline", "-2h/-1h", "--incident", "-1h/now"])
    assert code == 2
    assert "llm-bottleneck-exporter[report]" in capsys.readouterr().err
