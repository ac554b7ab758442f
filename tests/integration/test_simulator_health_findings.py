"""The node's health findings read from the simulator, fast-forwarded (the exporter's own sources
over loopback and the simulator's sysfs tree): every built-in scenario's phases name the findings
they expect (`expected_findings`), each with its device; a scenario that declares none leaves the
fabric and links without a finding (a healthy tree reads healthy)."""

from __future__ import annotations

import pytest

from exporter.health.finding import GPU_LINK, NETWORK
from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import builtin_names

pytestmark = pytest.mark.integration

#: long enough for the links source's first read and a round of counters after it
SETTLE_SECONDS = 40.0


def findings_per_phase(name: str) -> dict[str, list[dict]]:
    node = SimulatedNode(load_scenario(name))
    view = ExporterView(node)
    phases = node.scenario.phases
    read: dict[str, list[dict]] = {}
    try:
        for index, phase in enumerate(phases):
            end = phases[index + 1].start_seconds if index + 1 < len(phases) else phase.start_seconds + 90.0
            until = min(end, phase.start_seconds + SETTLE_SECONDS + 30.0)
            for _ in view.run(until, 5.0):
                pass
            read[phase.name] = view.exporter.diagnosis()["node"]["findings"]
    finally:
        view.close()
    return read


WITH_FINDINGS = [n for n in builtin_names() if any(p.expected_findings for p in load_scenario(n).phases)]


def test_some_built_in_scenario_expects_the_fabric_findings() -> None:
    expected = {f.kind for n in WITH_FINDINGS for p in load_scenario(n).phases for f in p.expected_findings}
    assert {"pcie_downtrained", "port_rate_low", "ecn_disabled"} <= expected


@pytest.mark.parametrize("name", WITH_FINDINGS)
def test_each_phase_names_the_findings_it_expects(name: str) -> None:
    read = findings_per_phase(name)
    for phase in load_scenario(name).phases:
        named = {(f["kind"], f["device"]) for f in read[phase.name]}
        for finding in phase.expected_findings:
            assert (finding.kind, finding.device) in named, (phase.name, finding, read[phase.name])
        expected = {(f.kind, f.device) for f in phase.expected_findings}
        links = {(f["kind"], f["device"]) for f in read[phase.name] if f["topic"] in (NETWORK, GPU_LINK)}
        assert links == expected, f"{phase.name}: findings no phase expects: {links - expected}"


def test_a_healthy_simulated_fabric_has_no_link_or_fabric_finding() -> None:
    read = findings_per_phase("healthy")
    links = [f for found in read.values() for f in found if f["topic"] in (NETWORK, GPU_LINK)]
    assert links == []
