"""The seed case end to end: the prompt-growth scenario read by the exporter's own sources and
collection loop (on the simulator's clock, so three simulated minutes take seconds), diagnosed
exactly as `serve` publishes it, then checked through the /diagnosis document."""

from __future__ import annotations

import pytest

from exporter.simulate import load_scenario, run_offline

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def seed_case():
    scenario = load_scenario("prompt-growth")
    long_template = next(p for p in scenario.phases if p.expected_stage == "decode_memory_bandwidth")
    result = run_offline(scenario, duration_seconds=long_template.start_seconds + 150, exporter_view=True)
    return long_template.start_seconds, result


def primaries(snapshot) -> dict[str, str]:
    return {
        m.labels["engine"]: m.labels["stage"]
        for m in snapshot.metrics
        if m.name == "llm_bottleneck_primary" and m.value == 1.0
    }


def test_no_bottleneck_before_the_prompt_change(seed_case) -> None:
    change, result = seed_case
    before = [s for t, s in result.snapshots if 60 <= t < change]
    assert before
    for snapshot in before:
        assert set(primaries(snapshot).values()) == {"none"}


def test_decode_bandwidth_is_primary_after_the_prompt_change(seed_case) -> None:
    change, result = seed_case
    after = [s for t, s in result.snapshots if t >= change + 90]
    assert after
    for snapshot in after:
        stages = primaries(snapshot)
        assert len(stages) == 8
        assert set(stages.values()) == {"decode_memory_bandwidth"}


def test_the_report_quotes_dram_sm_and_the_waiting_trend_and_the_seed_remedies() -> None:
    scenario = load_scenario("prompt-growth")
    change = next(p.start_seconds for p in scenario.phases if p.expected_stage == "decode_memory_bandwidth")
    from exporter.simulate.exporter_view import ExporterView
    from exporter.simulate.node import SimulatedNode

    node = SimulatedNode(scenario, None)
    view = ExporterView(node)
    try:
        for _ in view.run(change + 120, 5.0):
            pass
        report = view.exporter.diagnosis()
    finally:
        view.close()
    engine = report["engines"][0]
    assert engine["primary"] == "decode_memory_bandwidth"
    evidence = " | ".join(engine["evidence"])
    assert "DRAM active" in evidence and "SM active" in evidence
    assert "waiting requests rising" in evidence
    actions = " | ".join(engine["actions"])
    assert "prefix caching" in actions and "--max-model-len" in actions and "shortest-job-first" in actions


def test_plain_flags_read_the_seed_case_from_the_nodes_unanimous_gpus() -> None:
    """`serve --engine vllm=URL ... --gpu dcgm-exporter=URL`: unnamed engines, no attribution, so
    the simulator's pod labels tie no GPU to an engine. Every GPU of the node reads saturated HBM
    in the long-template phase, so every engine's does: decode bandwidth, from node-wide evidence."""
    scenario = load_scenario("prompt-growth")
    change = next(p.start_seconds for p in scenario.phases if p.expected_stage == "decode_memory_bandwidth")
    from exporter.simulate.exporter_view import ExporterView
    from exporter.simulate.node import SimulatedNode

    node = SimulatedNode(scenario, None)
    view = ExporterView(node, plain_flags=True)
    baseline: list[str] = []
    try:
        t = 0.0
        while t < change + 120:
            t += 5.0
            node.advance(t)
            snapshot = view.collect()
            if 60 <= t < change:
                baseline += primaries(snapshot).values()
        report = view.exporter.diagnosis()
    finally:
        view.close()
    assert baseline and set(baseline) == {"none"}
    assert len(report["engines"]) == 8
    host = view.server.url.removeprefix("http://")
    assert {e["engine"] for e in report["engines"]} == {f"{host}/engine/{i}/metrics" for i in range(8)}
    for engine in report["engines"]:
        assert engine["primary"] == "decode_memory_bandwidth", engine
        evidence = " | ".join(engine["evidence"])
        assert "at least, on every one of the node's 8 unattributed GPUs" in evidence, evidence
        assert "GPU signals unattributed: node-wide (8 GPUs" in evidence, evidence


def test_after_the_remedies_the_verdict_leaves_with_its_evidence_and_asks_for_nothing_already_done() -> None:
    """The remedied phase (issue #42): every engine's verdict clears within one level window of its
    own tokens recovering (the 5 s inter-token latency p95, from the engine's histogram, back
    within 1.3x of its baseline), stays clear, and no action asks for a remedy the engine reports
    taken (prefix caching, the max_model_len cap); shortest-job-first, which no engine reports,
    is asked for "if not already"."""
    from exporter.simulate.exporter_view import ExporterView
    from exporter.simulate.node import SimulatedNode
    from exporter.window import histogram_quantile

    scenario = load_scenario("prompt-growth")
    phases = scenario.phases
    incident = next(i for i, p in enumerate(phases) if p.expected_stage == "decode_memory_bandwidth")
    baseline, remedied = phases[incident - 1], phases[incident + 1]
    assert remedied.expected_stage == "none"
    node = SimulatedNode(scenario, None)
    view = ExporterView(node)
    level = view.exporter.config.thresholds.level_seconds
    step = 5.0
    itl: dict[str, list[tuple[float, object]]] = {}
    verdicts: dict[str, list[tuple[float, str]]] = {}
    actions_after: list[str] = []
    try:
        for t, snapshot in view.run(remedied.start_seconds + 150, step):
            for m in snapshot.metrics:
                if m.name == "llm_engine_inter_token_latency_seconds" and m.histogram is not None:
                    itl.setdefault(m.labels["engine"], []).append((t, m.histogram))
            for engine, stage in primaries(snapshot).items():
                verdicts.setdefault(engine, []).append((t, stage))
            if t >= remedied.start_seconds + step:
                actions_after += [a for e in view.exporter.diagnosis()["engines"] for a in e["actions"]]
    finally:
        view.close()

    def p95(first, last) -> float:
        increase = [b - a for a, b in zip(first.cumulative, last.cumulative)]
        return histogram_quantile(0.95, last.bounds, increase)

    assert len(verdicts) == 8
    for engine, readings in verdicts.items():
        by_time = dict(itl[engine])
        times = sorted(by_time)
        base_start = max(x for x in times if x <= baseline.start_seconds + 60)
        base_end = max(x for x in times if x <= phases[incident].start_seconds)
        healthy = p95(by_time[base_start], by_time[base_end])
        recovered = next(
            t
            for before, t in zip(times, times[1:])
            if t > remedied.start_seconds and p95(by_time[before], by_time[t]) <= 1.3 * healthy
        )
        during = [stage for t, stage in readings if phases[incident].start_seconds + 90 <= t < remedied.start_seconds]
        assert set(during) == {"decode_memory_bandwidth"}, (engine, during)
        cleared = next(t for t, stage in readings if t >= recovered and stage == "none")
        assert cleared - recovered <= level + step, (engine, recovered, cleared, readings)
        assert {stage for t, stage in readings if t >= cleared} == {"none"}, (engine, readings)
    assert not any("enable prefix caching" in a or "--max-model-len" in a for a in actions_after), actions_after
    assert all("if not already" in a for a in actions_after if "shortest-job-first" in a), actions_after
