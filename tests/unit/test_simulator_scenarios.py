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
    "degraded-fabric",
    "healthy",
    "host-overhead",
    "hybrid-kv-saturation",
    "kv-cache-saturation",
    "pd-decode-kv-bound",
    "pd-healthy",
    "pd-prefill-starved",
    "pd-transfer-bound",
    "prefill-long-prompts",
    "prompt-growth",
    "queue-overload",
    "replica-restart",
    "sleeping-replica",
)


def test_the_issue_s_built_in_scenarios_all_exist():
    assert tuple(builtin_names()) == BUILT_IN


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_phase_names_a_known_stage_and_the_scenario_exercises_one(name):
    scenario = load_scenario(name)
    stages = {p.expected_stage for p in scenario.phases}
    assert stages <= {"none", *(stage.id for stage in of(ENGINE))}
    # a scenario shows a stage, findings of the node's health (evidence, not stages), or an
    # engine's start (a state: loading, warming up)
    shows = stages - {"none"} or any(p.expected_findings or p.restart for p in scenario.phases)
    assert name in ("healthy", "pd-healthy") or shows
    assert scenario.warmup_seconds <= 90  # steady state well within 60 s of wall time after it


def test_list_shows_every_scenario_with_its_stages():
    text = list_scenarios()
    for name in BUILT_IN:
        assert name in text
    assert "prompt-growth            none -> decode_memory_bandwidth -> none" in text
    assert "pd-transfer-bound        none -> kv_transfer (prefill: none) -> none" in text


@pytest.mark.parametrize(
    ("scenario", "edit", "where"),
    [
        ("prompt-growth", ("clients: 1000", "clients: many"), "workload.clients"),
        (
            "prompt-growth",
            ("expected_stage: decode_memory_bandwidth", "expected_stage: slow"),
            "phases[1].expected_stage",
        ),
        ("prompt-growth", ("      scheduling: sjf", "      scheduling: random"), "phases[2].engine.scheduling"),
        (
            "prompt-growth",
            ("      max_num_seqs: 256", "      max_num_seqs: 256\n      colour: blue"),
            "replicas[0].engine.colour",
        ),
        ("prompt-growth", ("  gpu: a100-80gb", "  gpu: a100-40gb"), "node.gpu"),
        ("prompt-growth", ("  gpus: 8", "  gpus: 4"), "replicas"),
        ("prompt-growth", ("  gpus: 8", "  gpus: 8.5"), "node.gpus"),
        ("prompt-growth", ("clients: 1000", "clients:"), "workload.clients"),
        ("degraded-fabric", ("{nic: 2, pcie_width: 8}", "{nic: 8, pcie_width: 8}"), "node.nic_faults[0].nic"),
        ("degraded-fabric", ("{nic: 2, pcie_width: 8}", "{nic: 2, pcie_width: 32}"), "node.nic_faults[0].pcie_width"),
        ("degraded-fabric", ("{nic: 6, ecn: false}", "{nic: 6, ecn: off, colour: red}"), "node.nic_faults[2].colour"),
        ("degraded-fabric", ("{kind: port_rate_low,", "{kind: port_slow,"), "phases[0].expected_findings[1].kind"),
        ("degraded-fabric", ("{gpu: 3, pcie_width: 8}", "{gpu: 8, pcie_width: 8}"), "node.gpu_faults[0].gpu"),
        ("degraded-fabric", ("{gpu: 3, pcie_width: 8}", "{gpu: 3, lanes: 8}"), "node.gpu_faults[0].lanes"),
        (
            "degraded-fabric",
            ("{kind: ecn_disabled, device: mlx5_6/1}", "{kind: ecn_disabled}"),
            "phases[0].expected_findings[2].device",
        ),
        ("replica-restart", ("{replica: 7,", "{replica: 8,"), "phases[1].restart.replica"),
        ("replica-restart", ("load_seconds: 40}", "load_seconds: -1}"), "phases[1].restart.load_seconds"),
        ("replica-restart", ("load_seconds: 40}", "load_seconds: 40, pod: x}"), "phases[1].restart.pod"),
        (
            "replica-restart",
            ("    expected_stage: none\n    note: eight", "    restart: {replica: 1}\n    note: eight"),
            "phases[0].restart",
        ),
    ],
)
def test_scenario_errors_name_the_key(scenario, edit, where):
    original = load_scenario_text(scenario)
    assert edit[0] in original, f"the edit's anchor {edit[0]!r} is no longer in {scenario}.yaml"
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


def test_a_nic_fault_sets_its_port_s_link_rate_and_ecn():
    from exporter.simulate.node import SimulatedNode

    node = SimulatedNode(load_scenario("degraded-fabric"))
    faulty = {p.device: (p.pcie_width, p.spec.rate_gbps, p.ecn_enabled) for p in node.ports}
    assert faulty["mlx5_2"] == (8, 400, True) and faulty["mlx5_5"] == (16, 200, True)
    assert faulty["mlx5_6"] == (16, 400, False) and faulty["mlx5_0"] == (16, 400, True)


def test_a_gpu_fault_shows_in_dcgm_exporters_pcie_link_fields():
    from exporter.simulate.dcgm_text import render_dcgm
    from exporter.simulate.node import SimulatedNode

    text = render_dcgm(SimulatedNode(load_scenario("degraded-fabric")))
    widths = {
        line.split('gpu="')[1].split('"')[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith("DCGM_FI_DEV_PCIE_LINK_WIDTH{")
    }
    assert widths["3"] == "8" and {w for g, w in widths.items() if g != "3"} == {"16"}
    assert 'DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH{gpu="3"' in text and "DCGM_FI_DEV_PCIE_LINK_GEN{" in text
