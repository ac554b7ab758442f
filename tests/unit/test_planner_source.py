"""Dynamo's planner read beside the exporter: its exposition (built from its own metric
definitions, tests/fixtures/planners/) normalized into `llm_planner_*`, and compared with ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config import ConfigError, build
from exporter.model import Sample
from exporter.settings import PlannerTarget
from exporter.slo.planners import compare
from exporter.slo.replicas import PoolNeed
from exporter.sources.base import SourceError, collect_now
from exporter.sources.planner import PlannerSource
from tests.support import UNHURRIED, RouteServer, respond_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "planners"


def scrape(fixture: str, model: str | None = None) -> list[Sample]:
    server = RouteServer({"/metrics": respond_with((FIXTURES / fixture).read_text("utf-8"))})
    source = PlannerSource(PlannerTarget(url=server.url("/metrics"), name="dynamo", model=model, limits=UNHURRIED))
    try:
        found = collect_now(source, 0.0)
    finally:
        source.close()
        server.close()
    assert all(isinstance(m, Sample) for m in found)
    return [m for m in found if isinstance(m, Sample)]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    (found,) = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return found


@pytest.mark.parametrize(
    "fixture, configured, model",
    [
        ("dynamo-planner-unlabeled.txt", "qwen3-32b", "qwen3-32b"),  # the model from the configuration
        ("dynamo-planner-model-name.txt", None, "Qwen/Qwen3-32B"),  # the planner's own model_name
    ],
)
def test_replicas_latencies_and_capacities_are_normalized(fixture: str, configured: str | None, model: str) -> None:
    samples = scrape(fixture, configured)
    assert value(samples, "llm_planner_up") == 1.0
    assert value(samples, "llm_planner_replicas", model=model, role="decode", kind="recommended") == 4
    assert value(samples, "llm_planner_replicas", model=model, role="prefill", kind="current") == 2
    assert value(samples, "llm_planner_latency_seconds", dimension="ttft", kind="estimated") == pytest.approx(0.38)
    assert value(samples, "llm_planner_latency_seconds", dimension="itl", kind="observed") == pytest.approx(0.01825)
    assert value(samples, "llm_planner_engine_capacity_requests_per_second", role="decode") == 6.25
    assert value(samples, "llm_planner_requests_per_second", kind="predicted") == 24.0


def test_a_page_without_planner_figures_is_a_parse_error() -> None:
    server = RouteServer({"/metrics": respond_with("process_cpu_seconds_total 1\n")})
    source = PlannerSource(PlannerTarget(url=server.url("/metrics"), name="dynamo", limits=UNHURRIED))
    try:
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
    finally:
        source.close()
        server.close()
    assert caught.value.reason == "parse"


def test_its_recommendation_reads_beside_ours_with_the_difference() -> None:
    samples = scrape("dynamo-planner-unlabeled.txt", "qwen3-32b")
    ours = [
        PoolNeed("qwen3-32b", "prefill", "chat", 3, 20.0, 7.0, 3.6, 0.8, 0.8),
        PoolNeed("qwen3-32b", "decode", "chat", 3, 20.0, 5.0, 5.2, 0.8, 0.8),
    ]
    (entry,) = compare(samples, ours)
    lines = entry["comparison"]
    assert "dynamo recommends 3 prefill replicas for qwen3-32b; ours under SLO chat: 4 (+1)" in lines
    assert "dynamo recommends 4 decode replicas for qwen3-32b; ours under SLO chat: 6 (+2)" in lines
    assert "one decode engine's capacity: dynamo 6.25 req/s, ours 5.00 req/s under SLO chat (-20%)" in lines
    assert "dynamo TTFT: estimated 380.0 ms, observed 412.5 ms (-8%)" in lines
    # aggregated serving on our side: compared with its two pools together
    (aggregated,) = compare(samples, [PoolNeed("qwen3-32b", "", "chat", 4, 20.0, 3.0, 8.3, 0.8, 0.8)])
    assert aggregated["comparison"][0] == (
        "dynamo recommends 7 replicas (its prefill and decode pools together) for qwen3-32b; "
        "ours under SLO chat: 9 (+2)"
    )


def test_planners_are_configured_like_other_targets() -> None:
    config = build({"planners": [{"url": "http://planner:9085/metrics", "name": "dynamo", "model": "m"}]})
    assert config.planners == (PlannerTarget(url="http://planner:9085/metrics", name="dynamo", model="m"),)
    with pytest.raises(ConfigError, match=r"planners\[0\]\.type"):
        build({"planners": [{"url": "http://planner:9085/metrics", "type": "dynamo"}]})
