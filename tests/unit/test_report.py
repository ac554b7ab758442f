"""The report's logic without Prometheus: windows, statistics, matrix rows, verdicts, causes,
the fix verdict, the queries' PromQL and the command line's error exits."""

from __future__ import annotations

import argparse
import math
import shutil
from datetime import UTC, datetime

import pytest

from exporter.catalogue import CATALOGUE
from exporter.cli import main
from exporter.monitoring.config import LabelNames
from exporter.monitoring.promql import names_read, parse
from exporter.report.causes import config_causes, mix_causes
from exporter.report.fix import fix_verdict
from exporter.report.matrix import Row, build_rows
from exporter.report.plots import label_rows, line_points
from exporter.report.present import tone
from exporter.report.prometheus import Series
from exporter.report.queries import FIGURES, FIGURES_BY_KEY, LEVELS, QueryContext, all_figures
from exporter.report.render_text import fmt_change, fmt_interval, fmt_value
from exporter.report.slices import parse_slice, slice_figures
from exporter.report.stats import WindowValue, change, judgeable, mann_whitney_p, smallest_p
from exporter.report.timing import (
    Extent,
    Plan,
    Timing,
    TooShort,
    choose,
    duration_text,
    extent_expr,
    extent_of,
    require_judgeable,
)
from exporter.report.walk import EngineStages, cluster_primary, verdict
from exporter.report.windows import Window, WindowError, parse_duration, parse_time, parse_window
from exporter.simulate.case_review import check_case_review, phase_windows, report_command, with_full_baseline
from exporter.simulate.scenario import load_scenario
from exporter.sources.engines import MAPPINGS
from exporter.stages import stages
from exporter.validation import ConfigError
from tests.support import free_port

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


# --- timing: where each figure is read ------------------------------------------------------------


def _timing(scrape: float = 5.0, exporter_window: float = 60.0, histograms: bool = False, **given: float) -> Timing:
    extents = [Extent(0.0, 600.0, scrape)]
    return choose(extents, exporter_window=exporter_window, histograms=histograms, **given)


def test_the_step_is_two_scrapes_and_each_rate_covers_its_own_step() -> None:
    timing = _timing(scrape=5.0)
    assert (timing.step, timing.rate_range, timing.rate_interval) == (10.0, 15.0, "15s")
    # Consecutive ranges share one sample, no increment: the values are one step apart.
    assert timing.spacing("rate") == 10.0
    # A long window thins the values to MAX_POINTS, each rate still over its own step.
    long = choose([Extent(0.0, 86_400.0, 30.0)])
    assert long.step == 346.0 and long.rate_range == 376.0
    assert duration_text(2.5) == "2500ms"


def test_measured_seconds_read_at_three_figures_for_the_reader_and_exact_in_the_queries() -> None:
    # A loaded Prometheus scrapes a little late: its median spacing is not the configured 5 s.
    timing = _timing(scrape=5.01635)
    assert timing.rate_interval == "15049ms"  # the queries' range covers step + one spacing
    shown = [fmt_interval(s) for s in (timing.scrape_interval, timing.step, timing.rate_range)]
    assert shown == ["5.02 s", "10 s", "15 s"]
    assert [fmt_interval(s) for s in (0.25, 346.0, 10_368.0)] == ["0.25 s", "346 s", "10368 s"]


def test_no_figure_looks_back_past_its_windows_start_nor_past_the_data() -> None:
    """A rate of the incident's first seconds would read the baseline; the exporter's windowed
    quantiles would for a whole exporter window; a rate where the data begins inside its range is
    extrapolated from part of it."""
    timing = _timing(scrape=5.0)
    incident = Window("incident", 1000.0, 1180.0)
    data = Extent(0.0, 2000.0, 5.0)
    rate = timing.plan("rate", incident, data)
    assert rate is not None and (rate.first, rate.last, rate.spacing, rate.count) == (1020.0, 1180.0, 10.0, 17)
    gauge = timing.plan("instant", incident, data)
    assert gauge is not None and gauge.first == 1000.0
    # The exporter's own quantiles: one per exporter window, none before one has passed.
    windowed = timing.plan("windowed", incident, data)
    assert windowed is not None and (windowed.first, windowed.spacing, windowed.count) == (1060.0, 60.0, 3)
    # With the engines' histograms in Prometheus, a quantile is of bucket rates: read as a rate.
    assert timing.plan("quantile", incident, data) == windowed
    assert _timing(scrape=5.0, histograms=True).plan("quantile", incident, data) == rate
    # Prometheus began scraping 95 s into the baseline: its rates start a range after that.
    baseline = Window("baseline", 0.0, 120.0)
    late = Extent(95.0, 120.0, 5.0)
    assert timing.plan("rate", baseline, late) == Plan(110.0, 120.0, 10.0)
    # The exporter's window started with the window (before the data): its quantiles are the window's own.
    assert timing.plan("windowed", baseline, late) == Plan(120.0, 120.0, 60.0)
    assert timing.plan("windowed", Window("baseline", 90.0, 120.0), late) is None


def test_a_given_rate_interval_longer_than_the_step_spaces_values_so_they_do_not_overlap() -> None:
    timing = _timing(scrape=5.0, step=5.0, rate_range=300.0)
    assert timing.spacing("rate") == 295.0


def test_a_window_too_short_to_judge_is_refused_naming_the_shortest_that_could_be() -> None:
    timing = _timing(scrape=5.0)
    window, data = Window("baseline", 0.0, 120.0), Extent(95.0, 114.0, 5.0)
    with pytest.raises(TooShort) as refused:
        require_judgeable(timing, [window], [data])
    assert str(refused.value).startswith("--baseline: a window of 120 s (Prometheus holds data for 19 s of it)")
    assert "the shortest window the report can judge holds 35 s of data" in str(refused.value)
    require_judgeable(timing, [window], [Extent(80.0, 120.0, 5.0)])  # 40 s: 3 rates, 10 s apart


def test_the_extent_is_read_from_raw_sample_times() -> None:
    expr = extent_expr('llm_engine_up{job="x"}', Window("b", 100.0, 400.0))
    parse(expr)
    assert 'timestamp(llm_engine_up{job="x"}) > 100.000' in expr and "[299999ms:1s]" in expr
    assert extent_of({"first": 110.0, "last": 390.0, "interval": 10.0}) == Extent(110.0, 390.0, 10.0)
    assert extent_of({"first": 110.0, "last": 110.0}) is None  # one sample: no rate
    assert extent_of({}) is None


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
    # Three against five, fully separated: 2 of the 56 orderings are as extreme, p = 1/28.
    p = mann_whitney_p(WindowValue.of([1.0, 2.0, 3.0]), WindowValue.of([4.0, 5.0, 6.0, 7.0, 8.0]))
    assert p == pytest.approx(2 / 56)
    same = mann_whitney_p(WindowValue.of([1.0, 2.0, 3.0, 4.0]), WindowValue.of([1.0, 2.0, 3.0, 4.0]))
    assert same is not None and same > 0.9
    assert mann_whitney_p(WindowValue.of([7.0] * 5), WindowValue.of([7.0] * 5)) == 1.0


def test_counts_that_cannot_show_a_difference_get_no_p_value() -> None:
    """Three against three can never be significant (p >= 0.1): such a comparison is not judged."""
    assert smallest_p(3, 3) == pytest.approx(0.1) and not judgeable(3, 3)
    assert judgeable(3, 5) and judgeable(4, 4) and not judgeable(1, 30) and judgeable(1, 40)
    assert mann_whitney_p(WindowValue.of([1.0, 2.0, 3.0]), WindowValue.of([4.0, 5.0, 6.0])) is None
    row = build_rows(
        FIGURES_BY_KEY["e2e_p99"],
        "cluster",
        {"baseline": {("", "", ""): [1.0, 1.1]}, "incident": {("", "", ""): [3.0] * 3}},
        False,
    )[0]
    assert not row.incident.judged and row.incident.samples == (2, 3) and not row.incident.significant


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
            "mean_prompt_tokens": {"baseline": [200.0, 210.0, 190.0, 205.0], "incident": [800.0, 790.0, 810.0, 805.0]},
            "mean_output_tokens": {"baseline": [500.0, 510.0, 490.0, 505.0], "incident": [490.0, 500.0, 480.0, 495.0]},
            "request_rate": {"baseline": [20.0, 21.0, 19.0, 20.5], "incident": [11.0, 11.5, 10.5, 11.2]},
        }
    )
    causes = mix_causes(rows, "decode_memory_bandwidth")
    assert [(c.figure, c.explains) for c in causes] == [("mean_prompt_tokens", True), ("request_rate", False)]
    assert causes[0].ratio == pytest.approx(4.0, rel=0.02) and causes[0].p_value is not None
    assert causes[0].summary == "Mean prompt tokens / request ×4.0 (201 tokens → 801 tokens)"
    assert causes[1].note == "fewer completions: an effect of a slower service, not a cause"
    more_load = _rows({"request_rate": {"baseline": [10.0, 10.5, 9.5, 10.2], "incident": [25.0, 24.0, 26.0, 25.5]}})
    assert [(c.figure, c.explains) for c in mix_causes(more_load, "queueing")] == [("request_rate", True)]
    # The same change does not explain a stage it does not drive, nor an incident with no stage.
    assert [c.explains for c in mix_causes(more_load, "cross_node_communication")] == [False]
    assert mix_causes(more_load, "none")[0].note == "no stage became primary"


@pytest.mark.parametrize(
    ("baseline", "incident"),
    [
        ([200.0, 900.0, 150.0, 700.0, 300.0], [1600.0, 250.0, 900.0, 200.0, 950.0]),  # x1.7, but noise (p 0.29)
        ([200.0, 200.0], [800.0, 800.0, 800.0]),  # x4, but too few values to tell
    ],
)
def test_a_change_that_is_not_significant_is_no_cause(baseline: list[float], incident: list[float]) -> None:
    rows = _rows({"mean_prompt_tokens": {"baseline": baseline, "incident": incident}})
    assert mix_causes(rows, "decode_memory_bandwidth") == []


def test_less_prefix_sharing_explains_a_stage_it_drives_and_more_does_not() -> None:
    less = _rows({"prefix_cache_hit_ratio": {"baseline": [0.6, 0.62, 0.58, 0.61], "incident": [0.2, 0.22, 0.18, 0.21]}})
    (cause,) = mix_causes(less, "prefill_compute")
    assert cause.explains and cause.summary == "Prefix-cache hit ratio 60.2% → 20.2%"
    more = _rows({"prefix_cache_hit_ratio": {"baseline": [0.2, 0.22, 0.18, 0.21], "incident": [0.6, 0.62, 0.58, 0.61]}})
    assert [c.explains for c in mix_causes(more, "prefill_compute")] == [False]


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
    # Changed between the incident and the after window: what the fix did, not the incident's cause.
    assert causes[0].window == "after" and not causes[0].explains
    (released,) = config_causes("vllm:cache_config_info", before, after)
    assert released.window == "incident" and released.explains
    assert config_causes("vllm:cache_config_info", before, before) == []


def test_the_fix_worked_when_the_stage_is_gone_and_the_tails_came_back() -> None:
    rows = _rows(
        {
            "e2e_p99": {"baseline": [0.8, 0.79, 0.81, 0.8], "incident": [2.5, 2.4, 2.6, 2.5], "after": [0.82] * 4},
            "ttft_p99": {"baseline": [0.1] * 4, "incident": [3.0, 2.9, 3.1, 3.0], "after": [0.5, 0.45, 0.55, 0.5]},
            "request_rate": {"baseline": [120.0] * 4, "incident": [72.0] * 4, "after": [185.0] * 4},
        }
    )
    worked = fix_verdict(rows, "decode_memory_bandwidth", "none")
    verdicts = {f.figure: f.verdict for f in worked.figures}
    assert worked.worked and verdicts == {"request_rate": "recovered", "e2e_p99": "recovered", "ttft_p99": "improved"}
    still = fix_verdict(rows, "decode_memory_bandwidth", "decode_memory_bandwidth")
    assert not still.worked and "still the primary stage" in still.summary
    worse = _rows({"e2e_p99": {"baseline": [0.8] * 4, "incident": [2.5, 2.4, 2.6, 2.5], "after": [4.0, 4.1, 3.9, 4.0]}})
    assert fix_verdict(worse, "queueing", "none").figures[0].verdict == "worse"


def test_a_fix_is_not_judged_on_too_few_values_nor_called_better_on_noise() -> None:
    few = _rows(
        {
            "e2e_p99": {"baseline": [0.8, 0.8], "incident": [2.5, 2.4], "after": [1.2, 1.3]},
            "ttft_p99": {"baseline": [0.1, 0.1], "incident": [3.0, 2.8], "after": [0.5, 0.6]},
        }
    )
    verdict = fix_verdict(few, "decode_memory_bandwidth", "none")
    assert [f.verdict for f in verdict.figures] == ["too few values", "too few values"]
    assert not verdict.worked and verdict.summary.startswith("the fix could not be judged")
    noisy = _rows(
        {"e2e_p99": {"baseline": [0.8] * 5, "incident": [2.5, 1.0, 3.0, 1.2, 2.8], "after": [1.1, 2.9, 1.3, 2.6, 2.0]}}
    )
    unshown = fix_verdict(noisy, "queueing", "none")
    assert unshown.figures[0].verdict == "not fixed" and not unshown.worked
    assert unshown.summary.startswith("the fix is not shown to have worked")


def test_an_after_window_opening_on_the_incidents_backlog_is_judged_again_once_it_drained() -> None:
    # The first half of the after window still serves requests queued during the incident (their
    # tails are the incident's); from the moment the queue is back, the fix is seen to have worked.
    tails = {"baseline": [0.8] * 12, "incident": [2.5, 2.4, 2.6, 2.5] * 3, "after": [4.0] * 6 + [0.8, 0.82] * 3}
    first = {"baseline": [0.1] * 12, "incident": [3.0, 2.9, 3.1, 3.0] * 3, "after": [5.0] * 6 + [0.1] * 6}
    waiting = {"baseline": [0.1] * 12, "incident": [300.0] * 12, "after": [300.0] * 5 + [50.0] + [0.1] * 6}
    rows = _rows({"e2e_p99": tails, "ttft_p99": first, "waiting": waiting})
    verdict = fix_verdict(rows, "queueing", "none", after_seconds=120.0)
    assert verdict.worked and verdict.backlog_seconds == 60.0
    assert verdict.settled is not None and verdict.settled.worked
    assert [f.verdict for f in verdict.settled.figures] == ["recovered", "recovered", "recovered"]
    assert verdict.summary.startswith(
        "the fix worked once the incident's backlog had drained (300 waiting when the after window opened, gone "
        "60 s in): "
        "queueing is no longer the primary stage (after: none); 3 of 3 headline figures back to the baseline. "
        "Over the whole window, whose first 60 s served requests queued during the incident, the fix is not "
        "shown to have worked"
    ), verdict.summary
    # Tails still the incident's once the queue is back: one verdict, said once, with when it drained.
    still = {"e2e_p99": {**tails, "after": [2.5, 2.4, 2.6, 2.5] * 3}, "ttft_p99": {**first, "after": [3.0] * 12}}
    stuck = fix_verdict(_rows({**still, "waiting": waiting}), "queueing", "none", after_seconds=120.0)
    assert not stuck.worked and stuck.settled is not None and stuck.backlog_seconds == 60.0
    assert stuck.summary == (
        f"{stuck.settled.summary}; the same once the incident's backlog had drained (300 waiting when the after "
        "window opened, gone 60 s in)"
    )
    assert stuck.summary.count("the fix is not shown to have worked") == 1, stuck.summary
    # A queue that never drains, or none at the window's start: the whole window's verdict alone.
    for after in ([300.0] * 12, [0.1] * 12):
        unchanged = fix_verdict(
            _rows({"e2e_p99": tails, "ttft_p99": first, "waiting": {**waiting, "after": after}}),
            "queueing",
            "none",
            after_seconds=120.0,
        )
        assert unchanged.settled is None and unchanged.backlog_seconds is None and "backlog" not in unchanged.summary


def test_the_end_to_end_tail_is_judged_once_the_last_queued_requests_have_finished() -> None:
    # 12 values over 120 s; the queue is back at 60 s, but the requests it held finish over the next
    # request's duration (baseline E2E P99 20 s), with the whole incident's wait in their latency.
    e2e = {
        "baseline": [20.0] * 12,
        "incident": [60.0] * 12,
        "after": [60.0] * 6 + [90.0, 85.0] + [20.0, 20.5, 19.5, 20.0],
    }
    ttft = {"baseline": [0.2] * 12, "incident": [30.0] * 12, "after": [40.0] * 6 + [0.2] * 6}
    waiting = {"baseline": [0.1] * 12, "incident": [300.0] * 12, "after": [300.0] * 6 + [0.1] * 6}
    verdict = fix_verdict(_rows({"e2e_p99": e2e, "ttft_p99": ttft, "waiting": waiting}), "queueing", "none", 120.0)
    assert verdict.backlog_seconds == 60.0 and verdict.settled is not None
    by_figure = {f.figure: f for f in verdict.settled.figures}
    assert by_figure["e2e_p99"].after == 20.0 and by_figure["e2e_p99"].verdict == "recovered"
    assert by_figure["ttft_p99"].after == pytest.approx(0.2)  # read at the first token: from the drain on
    assert verdict.worked, verdict.summary
    # Where the lag would leave fewer values than can be judged, the tail is read from the drain.
    short = fix_verdict(
        _rows({"e2e_p99": {**e2e, "baseline": [50.0] * 12}, "ttft_p99": ttft, "waiting": waiting}),
        "queueing",
        "none",
        120.0,
    )
    assert short.settled is not None
    assert {f.figure: f.after for f in short.settled.figures}["e2e_p99"] == pytest.approx(sum(e2e["after"][6:]) / 6)


# --- what the pages say -------------------------------------------------------------------------


def test_a_change_is_coloured_by_what_the_figure_means_and_only_when_significant() -> None:
    up = {"baseline": [1.0, 1.1, 0.9, 1.0, 1.05], "incident": [2.0, 2.1, 1.9, 2.0, 2.05]}
    rows = _rows({key: up for key in ("e2e_p99", "generation_tokens_rate", "mean_prompt_tokens", "running")})
    assert tone(rows["e2e_p99"], rows["e2e_p99"].incident) == "bad"  # latency up
    assert tone(rows["generation_tokens_rate"], rows["generation_tokens_rate"].incident) == "good"  # throughput up
    assert tone(rows["mean_prompt_tokens"], rows["mean_prompt_tokens"].incident) == ""  # the mix: neither
    assert tone(rows["running"], rows["running"].incident) == ""
    # +372 % throughput on two values against three is no news: an artefact until the test says otherwise.
    artefact = _rows({"generation_tokens_rate": {"baseline": [1.0, 1.2], "incident": [5.0, 5.5, 5.6]}})[
        "generation_tokens_rate"
    ]
    assert artefact.incident.relative is not None and artefact.incident.relative > 3
    assert tone(artefact, artefact.incident) == ""


def test_a_real_zero_is_a_value_and_the_change_from_it_an_amount() -> None:
    assert fmt_value(0.0, "/s") == "0/s" and fmt_value(None, "/s") == "no data"
    assert fmt_change(0.75, None, "/s") == "+0.75/s"
    assert fmt_change(0.0, None, "/s") == "no change"
    assert fmt_change(None, None, "/s") == "no data"
    assert fmt_change(3.0, 3.0, "req/s") == "+300.0%"


@pytest.mark.parametrize(
    "labels",
    [
        [(0.0, 0.08), (0.01, 0.08), (0.02, 0.05)],  # three narrow windows at the start
        [(0.5, 0.08), (0.97, 0.06), (0.99, 0.05)],  # two at the right edge
        [(0.0, 0.08), (0.3, 0.08), (0.6, 0.05)],  # wide apart: one row
    ],
)
def test_window_labels_never_overlap(labels: list[tuple[float, float]]) -> None:
    placed = label_rows(labels)
    boxes = [(x, x + w, row) for (x, row), (_, w) in zip(placed, labels)]
    assert all(0.0 <= a and b <= 1.0 for a, b, _ in boxes)
    for i, (a1, b1, r1) in enumerate(boxes):
        for a2, b2, r2 in boxes[i + 1 :]:
            assert r1 != r2 or b1 <= a2 or b2 <= a1, boxes
    if labels[-1][0] == 0.6:
        assert [row for _, row in placed] == [0, 0, 0]


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
    # Attainment and goodput as the SLA attainment row reads them: cluster-wide nearest the client
    # (the gateway where it judges the slice, else the engines), per model at the engines only.
    attainment = rows[0]
    cluster, model = attainment.build(ctx, "cluster"), attainment.build(ctx, "model")
    assert cluster is not None and model is not None
    assert cluster.index('measured_at="gateway"') < cluster.index('measured_at="engine"')
    assert 'measured_at="engine"' in model and "gateway" not in model
    assert [f.reads for f in rows] == ["windowed", "windowed", "instant", "instant"]


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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "-1h/-2h"], "--baseline: the end '-2h' is not after the start '-1h'"),
        (["--selector", "{model=}"], "--selector: '{model=}' is not a PromQL selector"),
        (["--selector", "model=x"], "--selector: 'model=x' is not a selector"),
        (["--step", "fast"], "is not a duration"),
        (["--slice", "tenant"], "--slice: 'tenant' is not DIMENSION=VALUE"),
        (["--rate-interval", "0s"], "--rate-interval: must be above 0"),
        (["--exporter-window", "a minute"], "--exporter-window: 'a minute' is not a duration"),
        (["--out", "/nonexistent/dir/r.html"], "--out: /nonexistent/dir is not a directory"),
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
        f"http://127.0.0.1:{free_port()}",
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


# --- the demo's case review ---------------------------------------------------------------------


def test_the_demos_phases_are_the_reports_windows() -> None:
    scenario = load_scenario("prompt-growth")
    starts = [p.start_seconds for p in scenario.phases]
    assert phase_windows(scenario, 700.0) == {
        "baseline": (starts[0], starts[1]),
        "incident": (starts[1], starts[2]),
        "after": (starts[2], 700.0),
    }
    # The demo's real time starts after the fast-forwarded warm-up: so does its baseline.
    assert phase_windows(scenario, 700.0, begin=90.0)["baseline"] == (90.0, starts[1])
    # Stopped during the incident: no after window; before it: nothing to review.
    assert set(phase_windows(scenario, starts[1] + 30)) == {"baseline", "incident"}
    assert phase_windows(scenario, starts[1] - 1) == {"baseline": (starts[0], starts[1] - 1)}
    argv = report_command("http://127.0.0.1:9090", {"baseline": (100.0, 220.0), "incident": (220.0, 400.0)}, "r.html")
    assert " ".join(argv) == (
        "report --prometheus http://127.0.0.1:9090 --baseline 100/220 --incident 220/400 --out r.html"
    )


def test_the_demo_refuses_a_case_review_it_cannot_write(monkeypatch: pytest.MonkeyPatch) -> None:
    args = argparse.Namespace(report="r.html", prometheus_data=None)
    with pytest.raises(ConfigError, match="not for a cluster scenario"):
        check_case_review(args, load_scenario("cluster-balanced"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="needs Prometheus on the PATH"):
        check_case_review(args, load_scenario("prompt-growth"))


def test_for_a_case_review_the_demos_baseline_runs_its_whole_length_after_the_warm_up() -> None:
    """The warm-up is fast-forwarded inside the first phase: prompt-growth's 120-s baseline left
    30 s of real time, of which Prometheus held too little to judge."""
    scenario = load_scenario("prompt-growth")
    full = with_full_baseline(scenario)
    warmup = scenario.warmup_seconds
    assert [p.start_seconds for p in full.phases] == [0.0, *(p.start_seconds + warmup for p in scenario.phases[1:])]
    assert full.duration_seconds == scenario.duration_seconds + warmup
    # Real time of the baseline once the warm-up is behind: the phase's whole length.
    assert full.phases[1].start_seconds - warmup == scenario.phases[1].start_seconds - scenario.phases[0].start_seconds


def test_every_figure_a_stage_is_driven_by_says_which_way_loads_the_engines() -> None:
    """A cause is a change the way its figure's `load` says: a figure without one never is."""
    loads = {figure.key: figure.load for figure in all_figures()}
    driven = {(stage.id, key) for stage in stages() for key in stage.driven_by}
    assert driven and all(loads.get(key) for _, key in driven), sorted(driven)


def test_a_plot_leaves_a_gap_where_prometheus_has_no_point() -> None:
    times, values = line_points(Series({}, [(0.0, 1.0), (10.0, 2.0), (40.0, 3.0), (50.0, 4.0)]))
    assert len(times) == 5 and math.isnan(values[2]) and values[3] == 3.0
    assert line_points(Series({}, [(0.0, 1.0), (10.0, 2.0)]))[1] == [1.0, 2.0]
