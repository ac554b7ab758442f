"""A simulated AMD node (8x MI300X, `/gpu/metrics` in AMD device-metrics-exporter text) read by the
exporter's own `amd-exporter` source on the simulator's clock: the decode-bandwidth scenario is
diagnosed as on an NVIDIA node, with AMD's memory-controller activity as the evidence."""

from __future__ import annotations

import pytest

from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from tests.support import REPO

pytestmark = pytest.mark.integration

SCENARIO = REPO / "tests" / "fixtures" / "simulator" / "decode-bandwidth-mi300x.yaml"


def primaries(snapshot) -> set[str]:
    return {m.labels["stage"] for m in snapshot.metrics if m.name == "llm_bottleneck_primary" and m.value == 1.0}


@pytest.fixture(scope="module")
def amd_run():
    scenario = load_scenario(str(SCENARIO))
    change = next(p.start_seconds for p in scenario.phases if p.expected_stage == "decode_memory_bandwidth")
    node = SimulatedNode(scenario, None)
    view = ExporterView(node)
    try:
        snapshots = list(view.run(change + 105, 5.0))
        report = view.exporter.diagnosis()
        mode = view.exporter.config.gpu.mode
    finally:
        view.close()
    assert mode == "amd-exporter"  # the node is read through the AMD exporter's source, not DCGM's
    return change, snapshots, report


def test_the_amd_exporter_source_reads_the_node(amd_run) -> None:
    _, snapshots, _ = amd_run
    last = snapshots[-1][1]
    up = [m for m in last.metrics if m.name == "llm_gpu_up"]
    assert len(up) == 8 and all(m.labels["vendor"] == "amd" and m.value == 1.0 for m in up)
    assert all(m.labels["gpu_model"] == "AMD Instinct MI300X" and m.labels["compute_partition"] == "spx" for m in up)
    assert all(m.labels.get("engine") for m in up), "each GPU tied to its engine through the exporter's pod labels"
    assert not any(m.name == "llm_gpu_sm_active_ratio" for m in last.metrics)  # AMD's exporter has none


def test_decode_bandwidth_is_diagnosed_as_on_nvidia(amd_run) -> None:
    change, snapshots, report = amd_run
    # from 40 s on: an engine is judged once its history spans the 30 s level window
    before = [s for t, s in snapshots if 40 <= t < change]
    after = [s for t, s in snapshots if t >= change + 70]
    assert before and after
    assert all(primaries(s) == {"none"} for s in before)
    assert all(primaries(s) == {"decode_memory_bandwidth"} for s in after)
    engine = report["engines"][0]
    assert engine["primary"] == "decode_memory_bandwidth"
    evidence = " | ".join(engine["evidence"])
    assert "UMC (memory-controller) activity 0.9" in evidence and "(practical peak ~0.8)" in evidence
