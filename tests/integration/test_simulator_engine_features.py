"""The simulator's 2026 engine signals read by the exporter, scenario by scenario (fast-forwarded,
the exporter's own sources over loopback): a replica asleep, an admission limit refusing the
excess, prefix reuse by tokens."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.model import Sample
from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode

pytestmark = pytest.mark.integration


def view_at(name: str, until: float, slos: list[dict[str, Any]] | None = None) -> tuple[ExporterView, Any]:
    node = SimulatedNode(load_scenario(name))
    view = ExporterView(node, extra_settings={"slos": slos} if slos else None)
    snapshots = [snapshot for _, snapshot in view.run(until, 5.0)]
    return view, snapshots[-1]


def values(snapshot: Any, name: str) -> dict[str, float]:
    return {m.labels["engine"]: m.value for m in snapshot.metrics if m.name == name and isinstance(m, Sample)}


def test_a_sleeping_replica_is_asleep_unscored_and_the_others_are_judged() -> None:
    view, snapshot = view_at("sleeping-replica", 120.0)
    try:
        report = view.exporter.diagnosis()
    finally:
        view.close()
    states = {e["engine"]: e["state"] for e in report["engines"]}
    asleep = [engine for engine, state in states.items() if state == "asleep"]
    assert len(asleep) == 1 and len(states) == 8
    (sleeper,) = asleep
    entry = next(e for e in report["engines"] if e["engine"] == sleeper)
    assert (entry["primary"], entry["state_reason"]) == (None, "weights_offloaded")
    assert values(snapshot, "llm_engine_up")[sleeper] == 1.0
    assert sleeper not in {m.labels["engine"] for m in snapshot.metrics if m.name == "llm_bottleneck_score"}
    # The seven awake queue past their capacity; the sleeping one's idle GPU changes nothing.
    primaries = [e["primary"] for e in report["engines"] if e["engine"] != sleeper]
    assert primaries.count("queueing") >= 6, primaries


def test_an_admission_limit_refuses_the_excess_counts_it_as_misses_and_reads_queueing() -> None:
    slo = {"name": "chat", "objective": 0.9, "e2e_seconds": 120.0}
    view, snapshot = view_at("admission-limit", 150.0, [slo])
    try:
        report = view.exporter.diagnosis()
    finally:
        view.close()
    refused = {
        m.labels["engine"]: m.value
        for m in snapshot.metrics
        if m.name == "llm_engine_admission_rejections_total" and m.labels.get("reason") == "max_num_queued_reqs"
    }
    assert len(refused) == 8 and all(count > 0 for count in refused.values())
    attainment = {
        m.labels["engine"]: m.value
        for m in snapshot.metrics
        if m.name == "llm_slo_attainment_ratio" and m.labels.get("dimension") == "e2e"
    }
    assert attainment and all(value < 0.95 for value in attainment.values()), attainment
    primaries = [e["primary"] for e in report["engines"]]
    assert primaries.count("queueing") >= 7, primaries
    assert any(
        "refused at admission (max_num_queued_reqs)" in line for e in report["engines"] for line in e["evidence"]
    )


def test_prefix_reuse_is_read_by_tokens_on_a_shared_prompt() -> None:
    view, snapshot = view_at("healthy", 90.0)
    view.close()
    reuse = values(snapshot, "llm_engine_prompt_reuse_ratio")
    hit = values(snapshot, "llm_engine_prefix_cache_hit_ratio")
    assert len(reuse) == 8 and all(0.05 < value < 0.95 for value in reuse.values()), reuse
    # The simulated vLLM counts a cached token once in each counter: the two figures agree.
    assert all(reuse[e] == pytest.approx(hit[e], abs=0.01) for e in reuse)


def test_simulated_engines_had_long_been_serving_so_none_reads_as_warming_up() -> None:
    """A scenario is its engines' steady state: their process started an hour before it (on the
    simulation's clock), so from the first round they are up and judged, not in their cold regime."""
    view, _ = view_at("healthy", 75.0)
    try:
        report = view.exporter.diagnosis()
        zero = view.server.started_wall
    finally:
        view.close()
    assert {(e["state"], e["primary"]) for e in report["engines"]} == {("up", "none")}
    for engine in report["engines"]:
        assert engine["startup"]["started_at"] == pytest.approx(zero - 3600.0, abs=0.01)
        assert engine["startup"]["startup_seconds"] is None and engine["startup"]["cold_until"] is None
