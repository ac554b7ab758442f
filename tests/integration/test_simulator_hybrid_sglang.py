"""A hybrid sliding-window model on SGLang read through the exporter, fast-forwarded: the built-in
`hybrid-kv-saturation` scenario's SWA pool fills while its full-attention pool has room, and the
verdict is KV capacity, from the fullest pool."""

from __future__ import annotations

import re

import pytest

from exporter.model import Sample
from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode

pytestmark = pytest.mark.integration

# The warm-up regime is judged on the wall clock (exporter.health.startup), which a fast-forwarded
# view barely moves: every engine would stay `warming_up` for a real minute and be given no verdict.
NO_WARMUP = {"health": {"warmup_seconds": 0}}
FULLEST = re.compile(r"fullest KV pool: swa (?P<swa>[\d.]+) \(full (?P<full>[\d.]+)\)")


def test_the_swa_pool_saturates_and_the_verdict_is_kv_capacity_from_the_fullest_pool() -> None:
    scenario = load_scenario("hybrid-kv-saturation")
    incident = scenario.phases[1]
    node = SimulatedNode(scenario)
    view = ExporterView(node, extra_settings=NO_WARMUP)
    healthy: list[str | None] = []
    saturated: list[dict] = []
    try:
        for t, snapshot in view.run(scenario.duration_seconds, 5.0):
            last, engines = snapshot, view.exporter.diagnosis()["engines"]
            if 60 <= t <= incident.start_seconds:
                healthy += [e["primary"] for e in engines]
            elif t >= incident.start_seconds + 60:
                saturated += engines
        types = {m.labels["engine"]: m.labels.get("engine_type") for m in last.metrics if m.name == "llm_engine_up"}
    finally:
        view.close()
    assert set(types.values()) == {"sglang"}, types
    assert healthy and all(primary == "none" for primary in healthy), healthy
    assert saturated and all(e["primary"] == "kv_cache_capacity" for e in saturated), [e["primary"] for e in saturated]
    # The evidence names the SWA pool as the fullest, with the full-attention pool well below it.
    for engine in saturated:
        (found,) = [m for m in (FULLEST.search(line) for line in engine["evidence"]) if m]
        assert float(found["swa"]) > 0.85 and float(found["full"]) < 0.4, found.group(0)
    for replica in node.replicas:
        assert replica.swa is not None and replica.stats.preemptions > 0  # SGLang retracts when the SWA pool is full


def test_served_engine_type_and_pods_follow_the_replica_s_engine() -> None:
    node = SimulatedNode(load_scenario("hybrid-kv-saturation"))
    view = ExporterView(node, extra_settings=NO_WARMUP)
    try:
        snapshot = view.collect()
    finally:
        view.close()
    up = {m.labels["engine"]: m.value for m in snapshot.metrics if m.name == "llm_engine_up" and isinstance(m, Sample)}
    assert up == {"sglang-gemma-3-27b-0": 1.0, "sglang-gemma-3-27b-1": 1.0}
