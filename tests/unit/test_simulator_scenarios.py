"""Built-in scenarios load, list and name their stages; scenario files fail with `where: problem`.

Running each scenario to check the signature of the stage it expects takes seconds of CPU per
scenario: tests/integration/test_simulator_scenario_runs.py."""

from __future__ import annotations

import pytest

from exporter.simulate import builtin_names, load_scenario, parse_scenario
from exporter.simulate.cli import list_scenarios
from exporter.stages import ENGINE, of
from exporter.validation import MAX_FILE_BYTES, ConfigError

BUILT_IN = (
    "admission-limit",
    "cross-node-congestion",
    "decode-bandwidth",
    "healthy",
    "host-overhead",
    "hybrid-kv-saturation",
    "kv-cache-saturation",
    "prefill-long-prompts",
    "prompt-growth",
    "queue-overload",
    "sleeping-replica",
)


def test_the_issue_s_built_in_scenarios_all_exist():
    assert tuple(builtin_names()) == BUILT_IN


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_phase_names_a_known_stage_and_the_scenario_exercises_one(name):
    scenario = load_scenario(name)
    stages = {p.expected_stage for p in scenario.phases}
    assert stages <= {"none", *(stage.id for stage in of(ENGINE))}
    assert name == "healthy" or stages - {"none"}
    assert scenario.warmup_seconds <= 90  # steady state well within 60 s of wall time after it


def test_list_shows_every_scenario_with_its_stages():
    text = list_scenarios()
    for name in BUILT_IN:
        assert name in text
    assert "prompt-growth            none -> decode_memory_bandwidth -> none" in text


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("clients: 1000", "clients: many"), "workload.clients"),
        (("expected_stage: decode_memory_bandwidth", "expected_stage: slow"), "phases[1].expected_stage"),
        (("      scheduling: sjf", "      scheduling: random"), "phases[2].engine.scheduling"),
        (("      max_num_seqs: 256", "      max_num_seqs: 256\n      colour: blue"), "replicas[0].engine.colour"),
        (("  gpu: a100-80gb", "  gpu: a100-40gb"), "node.gpu"),
        (("  gpus: 8", "  gpus: 4"), "replicas"),
        (("  gpus: 8", "  gpus: 8.5"), "node.gpus"),
        (("clients: 1000", "clients:"), "workload.clients"),
    ],
)
def test_scenario_errors_name_the_key(edit, where):
    original = load_scenario_text("prompt-growth")
    assert edit[0] in original, f"the edit's anchor {edit[0]!r} is no longer in prompt-growth.yaml"
    text = original.replace(*edit)
    with pytest.raises(ConfigError) as error:
        parse_scenario(text, "edited.yaml")
    assert error.value.where == where


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("  gpus: 8", "  gpus: 8.5"), "node.gpus: must be a whole number, not 8.5"),
        (("clients: 1000", "clients:"), "workload.clients: missing"),
        (("clients: 1000", "clients: -1"), "workload.clients: must be at least 0, not -1"),
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
