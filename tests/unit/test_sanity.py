"""Impossible values (exporter/sanity.py): dropped before export, counted as invalid_value."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from exporter.loop import CollectionLoop
from exporter.model import EngineReading, Histogram, QuantileSummary, Sample
from exporter.sanity import screened
from exporter.settings import EngineTarget
from exporter.sources.base import collect_now
from exporter.sources.engine import EngineSource
from tests.support import UNHURRIED, RouteServer, respond_with

INF = math.inf

IMPOSSIBLE = """\
vllm:num_requests_running{model_name="m"} 3
vllm:num_requests_waiting{model_name="m"} +Inf
vllm:kv_cache_usage_perc{model_name="m"} -5
vllm:prompt_tokens_total{model_name="m"} -3
vllm:generation_tokens_total{model_name="m"} NaN
vllm:num_preemptions_total{model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 5
vllm:time_to_first_token_seconds_bucket{le="1",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 9
vllm:time_to_first_token_seconds_count{model_name="m"} 9
vllm:time_to_first_token_seconds_sum{model_name="m"} 4
vllm:e2e_request_latency_seconds_bucket{le="1",model_name="m"} 1
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4
vllm:e2e_request_latency_seconds_count{model_name="m"} 4
vllm:e2e_request_latency_seconds_sum{model_name="m"} 6
"""


@pytest.fixture
def engine() -> Iterator[RouteServer]:
    server = RouteServer()
    server.routes["/metrics"] = respond_with(IMPOSSIBLE)
    yield server
    server.close()


def test_impossible_engine_values_never_reach_the_output_and_are_counted(engine) -> None:
    source = EngineSource(
        EngineTarget(url=engine.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), window_seconds=60
    )
    loop = CollectionLoop([source], interval_seconds=5)
    try:
        snapshot = loop.collect_once()
    finally:
        loop.stop()
    names = {m.name for m in snapshot.metrics}
    for dropped in (
        "llm_engine_requests_waiting",
        "llm_engine_kv_cache_usage_ratio",
        "llm_engine_prompt_tokens_total",
        "llm_engine_generation_tokens_total",
        "llm_engine_time_to_first_token_seconds",  # buckets fall from 5 to 2 as le rises
    ):
        assert dropped not in names
    values = {m.name: m.value for m in snapshot.metrics if isinstance(m, Sample)}
    assert values["llm_engine_requests_running"] == 3 and values["llm_engine_preemptions_total"] == 2
    assert values["llm_engine_up"] == 1.0
    assert "llm_engine_e2e_request_latency_seconds" in names
    assert snapshot.statuses[0].up
    assert snapshot.error_counts == {("engine", "e", "invalid_value"): 1}
    assert source.discards == {"invalid_value": 5}


def histogram(cumulative: tuple[float, ...], count: float, total: float = 1.0) -> Histogram:
    return Histogram(bounds=(0.1, 1.0, INF), cumulative=cumulative, sum=total, count=count)


@pytest.mark.parametrize(
    "bad",
    [
        histogram((1, 2, 3), count=2),  # count below the +Inf bucket
        histogram((1, 2, INF), count=INF),
        histogram((-1, 2, 3), count=3),
        histogram((1, 3, 2), count=3),  # a bucket below the one before
        histogram((1, math.nan, 3), count=3),
        histogram((1, 2, 3), count=3, total=-0.5),
        histogram((1, 2, 3), count=3, total=INF),
    ],
)
def test_histograms_that_cannot_come_from_latencies_are_dropped(bad: Histogram) -> None:
    good = histogram((1, 2, 3), count=3)
    reading, problems = screened(EngineReading(model="m", histograms={"queue_time": bad, "time_to_first_token": good}))
    assert reading.histograms == {"time_to_first_token": good}
    assert problems == ["histogram queue_time"]


def test_a_histogram_without_a_sum_is_kept() -> None:
    nameless = histogram((1, 2, 3), count=3, total=math.nan)
    assert screened(EngineReading(model="m", histograms={"queue_time": nameless}))[1] == []


def test_ratios_outside_0_1_and_hits_above_queries_are_dropped_valid_values_kept() -> None:
    reading, problems = screened(
        EngineReading(
            model="m",
            requests_running=0.0,
            kv_cache_usage_ratio=1.0,
            prefix_cache_hit_ratio=1.5,
            prefix_cache_hits_total=10.0,
            prefix_cache_queries_total=4.0,
            process_cpu_seconds_total=-1.0,
        )
    )
    assert (reading.requests_running, reading.kv_cache_usage_ratio) == (0.0, 1.0)
    assert reading.prefix_cache_hit_ratio is None and reading.process_cpu_seconds_total is None
    assert (reading.prefix_cache_hits_total, reading.prefix_cache_queries_total) == (None, None)
    assert len(problems) == 3


def test_a_counter_that_drops_between_scrapes_is_a_reset_not_an_error(engine) -> None:
    source = EngineSource(
        EngineTarget(url=engine.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), window_seconds=60
    )
    engine.routes["/metrics"] = respond_with('vllm:num_preemptions_total{model_name="m"} 50\n')
    collect_now(source, 0.0)
    engine.routes["/metrics"] = respond_with('vllm:num_preemptions_total{model_name="m"} 3\n')
    metrics = collect_now(source, 5.0)
    assert [m.value for m in metrics if isinstance(m, Sample) and m.name == "llm_engine_preemptions_total"] == [3.0]
    assert source.discards == {}
    assert not any(isinstance(m, QuantileSummary) for m in metrics)
