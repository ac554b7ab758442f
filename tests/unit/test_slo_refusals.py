"""Refusals counted as SLO misses per measuring point (exporter/slo/refusals.py): an engine's
admission counter, a gateway's 429 and 503 responses; token gaps (itl) keep their attainment."""

from __future__ import annotations

import math

import pytest

from exporter.model import Sample
from exporter.settings import SloTarget
from exporter.slo.attainment import DimensionAttainment, WithinCount
from exporter.slo.refusals import Refusals, with_refusals

SLO = SloTarget("chat", 0.9, ttft_seconds=1.0, itl_seconds=0.05)
GATEWAY = {"gateway": "litellm", "gateway_type": "litellm"}
ENGINE = {"engine": "e", "engine_type": "vllm", "model": "m"}


def responses(n429: float, n503: float, n200: float) -> list[Sample]:
    codes = (("4xx", "429", n429), ("5xx", "503", n503), ("2xx", "", n200), ("5xx", "502", 7.0))
    return [Sample("llm_gateway_requests_total", {**GATEWAY, "code_class": c, "code": code}, v) for c, code, v in codes]


def item(labels: dict[str, str], dimension: str, window: WithinCount, rate: float) -> DimensionAttainment:
    point = "gateway" if "gateway" in labels else "engine"
    return DimensionAttainment(SLO, dimension, labels, window, window, rate, point, window_seconds=10.0)


def test_a_gateway_s_429_and_503_are_misses_of_its_request_dimensions() -> None:
    refusals = Refusals(60.0)
    refusals.update(responses(0, 0, 0), 0.0)
    refusals.update(responses(15, 5, 80), 10.0)  # 20 refused in the window; 502s are not refusals
    ttft = with_refusals([item(GATEWAY, "ttft", WithinCount(72, 72, 80), 8.0)], refusals)[0]
    assert ttft.attainment == pytest.approx(72 / 100)
    assert ttft.goodput == pytest.approx(8.0 * 72 / 100)
    assert ttft.lifetime.total == 80 + 20  # the burn-rate rules see them too


def test_an_engine_s_refusals_leave_token_gaps_but_take_their_share_off_goodput() -> None:
    refusals = Refusals(60.0)
    counter = "llm_engine_admission_rejections_total"
    refusals.update([Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, 0.0)], 0.0)
    refusals.update([Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, 20.0)], 10.0)
    # 80 requests in the 10 s window (8 req/s), 20 refused: a fifth of arrivals.
    itl = with_refusals([item(ENGINE, "itl", WithinCount(900, 900, 1000), 8.0)], refusals)[0]
    assert itl.attainment == pytest.approx(0.9)  # gaps: a refused request has none
    assert itl.refused_share == pytest.approx(0.2)
    assert itl.goodput == pytest.approx(0.9 * 8.0 * 0.8)


def test_refusals_of_a_counter_that_first_appears_mid_window_count_from_zero() -> None:
    """vLLM's labelled rejections counter appears with its first refusals: an engine up since the
    window began had refused none before it, so the whole first value is the window's."""
    refusals = Refusals(60.0)
    counter = "llm_engine_admission_rejections_total"
    up = Sample("llm_engine_up", ENGINE, 1.0)
    refusals.update([up], 0.0)
    refusals.update([up, Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, 20.0)], 10.0)
    assert refusals.window(ENGINE) == (20.0, 0.0)
    # a gateway's 429 series appearing beside the 200s it already served, likewise
    ok = Sample("llm_gateway_requests_total", {**GATEWAY, "code_class": "2xx", "code": "200"}, 50.0)
    refusals.update([ok], 20.0)
    refusals.update([ok, *responses(7, 0, 60)[:1]], 30.0)
    assert refusals.window(GATEWAY) == (7.0, 0.0)
    # an engine first seen with refusals already counted: those are before the window
    later = Refusals(60.0)
    later.update([up, Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, 20.0)], 0.0)
    later.update([up, Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, 26.0)], 10.0)
    assert later.window(ENGINE) == (6.0, 0.0)


def test_a_round_an_engine_is_down_is_a_gap_in_its_refusals_not_a_new_window() -> None:
    """An overloaded engine's scrape times out now and then: the refusals counted before that
    round stay in the window (as the requests it served do in its histograms'), and its lifetime
    count, which the events counter adds, never steps back."""
    refusals = Refusals(60.0)
    counter = "llm_engine_admission_rejections_total"

    def up(refused: float) -> list[Sample]:
        return [
            Sample("llm_engine_up", ENGINE, 1.0),
            Sample(counter, {**ENGINE, "reason": "max_num_queued_reqs"}, refused),
        ]

    refusals.update(up(0.0), 0.0)
    refusals.update(up(30.0), 1.0)
    refusals.update([Sample("llm_engine_up", ENGINE, 0.0)], 2.0)  # this scrape timed out
    assert refusals.lifetime(ENGINE) == (30.0, 0.0)
    refusals.update(up(45.0), 3.0)
    assert refusals.window(ENGINE) == (45.0, 0.0)
    # gone for longer than the window: forgotten
    refusals.update([], 64.0)
    assert refusals.window(ENGINE) is None and refusals.lifetime(ENGINE) is None


def test_a_point_without_refusals_is_left_as_it_was() -> None:
    refusals = Refusals(60.0).update([], 0.0)
    before = item(ENGINE, "ttft", WithinCount(9, 10, 10), 1.0)
    assert with_refusals([before], refusals) == [before]
    assert not math.isnan(before.attainment)


def gateway_responses(kind: str, n429: float, n503: float) -> list[Sample]:
    labels = {"gateway": "gw", "gateway_type": kind}
    codes = (("4xx", "429", n429), ("5xx", "503", n503))
    return [Sample("llm_gateway_requests_total", {**labels, "code_class": c, "code": code}, v) for c, code, v in codes]


@pytest.mark.parametrize(
    ("kind", "held", "added"),
    [
        ("ingress-nginx", 20.0, 0.0),  # every request is in its histogram, whatever its status
        ("haproxy", 15.0, 5.0),  # its access log's histograms take statuses below 500: the 429s
        ("litellm", 0.0, 20.0),  # it times only the requests it served
    ],
)
def test_a_gateway_whose_histogram_holds_its_refusals_counts_them_once(kind: str, held: float, added: float) -> None:
    """Refusals a gateway's histogram already holds as (fast) requests are moved from its good
    events to its misses; those it lacks are added. Either way each counts once, and the share
    within stays a lower bound."""
    refusals = Refusals(60.0)
    refusals.update(gateway_responses(kind, 0, 0), 0.0)
    refusals.update(gateway_responses(kind, 15, 5), 10.0)
    labels = {"gateway": "gw", "gateway_type": kind}
    # The histogram's 100 events: 80 served (72 within) and, where it holds them, the fast refusals.
    events = 80.0 + held
    ttft = with_refusals([item(labels, "ttft", WithinCount(72 + held, 72 + held, events), 8.0)], refusals)[0]
    assert ttft.window == WithinCount(72.0, 72.0 + held, 100.0)
    assert ttft.attainment == pytest.approx(0.72)
    assert ttft.refused_share == pytest.approx(0.2)
    assert (ttft.lifetime.lower, ttft.lifetime.total) == (72.0, 100.0)
