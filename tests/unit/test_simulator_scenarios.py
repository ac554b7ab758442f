"""Built-in scenarios: each loads, and each phase shows the signature of the stage it expects."""

from __future__ import annotations

import pytest

from exporter.catalogue import STAGES
from exporter.simulate import builtin_names, load_scenario, parse_scenario, run_offline
from exporter.simulate.cli import list_scenarios
from exporter.validation import MAX_FILE_BYTES, ConfigError

BUILT_IN = (
    "cross-node-congestion",
    "decode-bandwidth",
    "healthy",
    "host-overhead",
    "kv-cache-saturation",
    "prefill-long-prompts",
    "prompt-growth",
    "queue-overload",
)
TAIL = 45.0


def run(name: str, seconds: float):
    return run_offline(load_scenario(name), duration_seconds=seconds)


def test_the_issue_s_built_in_scenarios_all_exist():
    assert tuple(builtin_names()) == BUILT_IN


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_phase_names_a_known_stage_and_the_scenario_exercises_one(name):
    scenario = load_scenario(name)
    stages = {p.expected_stage for p in scenario.phases}
    assert stages <= {"none", *STAGES}
    assert name == "healthy" or stages - {"none"}
    assert scenario.warmup_seconds <= 90  # steady state well within 60 s of wall time after it


def test_list_shows_every_scenario_with_its_stages():
    text = list_scenarios()
    for name in BUILT_IN:
        assert name in text
    assert "prompt-growth            none -> decode_memory_bandwidth -> none" in text


def test_healthy_has_no_queue_no_preemption_and_a_small_kv_footprint():
    w = run("healthy", 90).window(45, 90)
    assert w.waiting < 0.5 and w.preemptions_per_second == 0 and w.kv_usage < 0.3
    assert w.tpot_p50 < 0.012  # near the batch-1 step (about 6 ms on H100)


def test_kv_cache_saturation_fills_the_cache_queues_and_preempts():
    w = run("kv-cache-saturation", 120).window(75, 120)
    assert w.kv_usage >= 0.9 and w.waiting > 1 and w.preemptions_per_second > 0.5
    assert w.running < 0.25 * 256  # capped far below max_num_seqs


def test_queue_overload_grows_the_queue_with_normal_itl_and_low_kv():
    result = run("queue-overload", 150)
    before, after = result.phase_window("within-capacity", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.waiting_last > after.waiting > 20 and before.waiting < 0.5
    assert after.kv_usage < 0.2 and after.preemptions_per_second == 0
    assert after.ttft_p99 > 10 * before.ttft_p99
    assert after.tpot_p50 < 1.5 * before.tpot_p50


def test_prefill_long_prompts_is_compute_bound_with_prefill_dominated_ttft():
    result = run("prefill-long-prompts", 150)
    before, after = result.phase_window("short-documents", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.tensor_active > 0.3 and after.sm_active > 0.7 and after.dram_active < 0.5
    assert after.ttft_p99 > 1.0 and after.waiting < 2
    assert after.tpot_p50 > 3 * before.tpot_p50  # decodes stall behind unchunked prefills


def test_decode_bandwidth_saturates_dram_and_slows_every_token():
    result = run("decode-bandwidth", 210)
    before, after = result.phase_window("moderate", tail_seconds=30), result.window(210 - TAIL, 210)
    assert after.dram_active >= 0.85 and after.tensor_active < 0.35 and after.sm_active < 0.65
    assert after.tpot_p50 > 2 * before.tpot_p50
    assert after.kv_usage < 0.9 and after.waiting < 1 and after.preemptions_per_second == 0


def test_cross_node_congestion_fills_the_links_and_signals_congestion():
    result = run("cross-node-congestion", 180)
    before, after = result.phase_window("quiet-fabric", tail_seconds=30), result.window(180 - TAIL, 180)
    assert after.nic_transmit_utilization > 0.8 > 2 * before.nic_transmit_utilization
    assert after.tpot_p50 > 1.5 * before.tpot_p50
    ports = result.node.ports[:8]
    assert all(p.values["np_cnp_sent"] > 0 and p.values["port_xmit_wait"] > 0 for p in ports)


def test_host_overhead_idles_the_gpu_while_the_engine_burns_a_core():
    result = run("host-overhead", 150)
    before, after = result.phase_window("lean-engine", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.running > 1 and after.gpu_utilization < 0.3 and after.sm_active < 0.2
    assert after.engine_cpu_cores > 0.6 > before.engine_cpu_cores
    assert after.tpot_p50 > 3 * before.tpot_p50


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("rate_per_second: 20", "rate_per_second: fast"), "workload.rate_per_second"),
        (("expected_stage: decode_memory_bandwidth", "expected_stage: slow"), "phases[1].expected_stage"),
        (("      scheduling: sjf", "      scheduling: random"), "phases[2].engine.scheduling"),
        (("      max_num_seqs: 256", "      max_num_seqs: 256\n      colour: blue"), "replicas[0].engine.colour"),
        (("  gpu: a100-80gb", "  gpu: a100-40gb"), "node.gpu"),
        (("  gpus: 8", "  gpus: 4"), "replicas"),
        (("  gpus: 8", "  gpus: 8.5"), "node.gpus"),
        (("rate_per_second: 20", "rate_per_second:"), "workload.rate_per_second"),
    ],
)
def test_scenario_errors_name_the_key(edit, where):
    text = load_scenario_text("prompt-growth").replace(*edit)
    with pytest.raises(ConfigError) as error:
        parse_scenario(text, "edited.yaml")
    assert error.value.where == where


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("  gpus: 8", "  gpus: 8.5"), "node.gpus: must be a whole number, not 8.5"),
        (("rate_per_second: 20", "rate_per_second:"), "workload.rate_per_second: missing"),
        (("rate_per_second: 20", "rate_per_second: -1"), "workload.rate_per_second: must be at least 0, not -1"),
    ],
)
def test_scenario_errors_have_the_one_shape_where_colon_problem(edit, problem):
    with pytest.raises(ConfigError) as error:
        parse_scenario(load_scenario_text("prompt-growth").replace(*edit), "edited.yaml")
    assert str(error.value) == problem


def test_an_empty_scenario_says_what_is_missing():
    with pytest.raises(ConfigError) as error:
        parse_scenario("", "empty.yaml")
    assert str(error.value) == "replicas: missing"


def test_a_scenario_file_is_read_within_the_shared_bounds(tmp_path):
    too_large = tmp_path / "large.yaml"
    too_large.write_text("#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match=r"large\.yaml: larger than"):
        load_scenario(str(too_large))
    not_text = tmp_path / "binary.yaml"
    not_text.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_scenario(str(not_text))


def test_a_phase_may_not_change_what_needs_a_restart():
    text = load_scenario_text("prompt-growth").replace("      scheduling: sjf", "      gpu_memory_utilization: 0.9")
    with pytest.raises(ConfigError, match="unknown key"):
        parse_scenario(text, "edited.yaml")


def load_scenario_text(name: str) -> str:
    from importlib import resources

    return (resources.files("exporter.simulate") / "scenarios" / f"{name}.yaml").read_text("utf-8")
