"""The output budget (exporter/budget.py): per-target model and series caps, the node-wide cap in
publish, and the counts they leave in llm_exporter_source_errors_total{reason="cardinality"}."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exporter.app import Exporter, Pipeline
from exporter.budget import SeriesBudget, series_count
from exporter.config import ConfigError, build
from exporter.loop import CollectionLoop
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import Config, EngineTarget, ScrapeLimits
from exporter.sources.base import Source, collect_now
from exporter.sources.engine import EngineSource
from tests.many_models import SERIES_PER_MODEL, model_names, vllm_text
from tests.support import UNHURRIED_SECONDS, RouteServer, respond_with


@pytest.fixture
def engine() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def source_for(server: RouteServer, **limits: int) -> EngineSource:
    target = EngineTarget(
        url=server.url("/metrics"),
        name="e",
        type="vllm",
        limits=ScrapeLimits(**{"timeout_seconds": UNHURRIED_SECONDS, **limits}),
    )
    return EngineSource(target, window_seconds=60)


def exported_models(metrics: list[Metric]) -> list[str]:
    return sorted({m.labels["model"] for m in metrics if m.name == "llm_engine_up"})


def test_models_past_max_models_are_left_out_and_counted_while_the_target_stays_up(engine) -> None:
    engine.routes["/metrics"] = respond_with(vllm_text(model_names(10)))
    source = source_for(engine, max_models=3)
    loop = CollectionLoop([source], interval_seconds=5)
    try:
        snapshot = loop.collect_once()
    finally:
        loop.stop()
    assert exported_models(list(snapshot.metrics)) == model_names(3)
    assert sum(series_count(m) for m in snapshot.metrics) == 3 * SERIES_PER_MODEL
    assert snapshot.statuses[0].up
    assert snapshot.error_counts == {("engine", "e", "cardinality"): 1}
    assert source.discards == {"cardinality": 7}


def test_a_new_model_never_pushes_out_one_already_exported(engine) -> None:
    engine.routes["/metrics"] = respond_with(vllm_text(["b", "c"]))
    source = source_for(engine, max_models=2)
    collect_now(source, 0.0)
    engine.routes["/metrics"] = respond_with(vllm_text(["a", "b", "c"]))  # "a" sorts first
    assert exported_models(collect_now(source, 5.0)) == ["b", "c"]
    # ...and the engine-down series stay bounded too: only the models kept.
    assert exported_models(source.down_metrics()) == ["b", "c"]


def test_the_per_target_series_cap_keeps_whole_models_and_always_the_first(engine) -> None:
    engine.routes["/metrics"] = respond_with(vllm_text(model_names(5)))
    capped = source_for(engine, max_models=100, max_exported_series=2 * SERIES_PER_MODEL + 3)
    metrics = collect_now(capped, 0.0)
    assert exported_models(metrics) == model_names(2)
    assert {m.labels["model"] for m in metrics} == set(model_names(2))  # no model cut in half
    assert capped.discards == {"cardinality": 3 * SERIES_PER_MODEL}
    tiny = source_for(engine, max_exported_series=1)
    assert exported_models(collect_now(tiny, 0.0)) == model_names(1)


def test_default_caps_hold_5000_model_names_to_a_few_hundred_series(engine) -> None:
    engine.routes["/metrics"] = respond_with(vllm_text(model_names(5000)))
    metrics = collect_now(source_for(engine), 0.0)
    assert sum(series_count(m) for m in metrics) <= ScrapeLimits().max_exported_series
    assert len(exported_models(metrics)) == ScrapeLimits().max_models


def summary(engine: str, model: str) -> QuantileSummary:
    labels = {"engine": engine, "engine_type": "vllm", "model": model}
    return QuantileSummary("llm_engine_time_to_first_token_seconds", labels, ((0.5, 1.0),), 1.0, 1.0)


def engine_series(engine: str, models: int) -> list[Metric]:
    out: list[Metric] = []
    for model in model_names(models):
        labels = {"engine": engine, "engine_type": "vllm", "model": model}
        out += [Sample("llm_engine_up", labels, 1.0), summary(engine, model)]  # 1 + 3 series
    return out


def test_the_node_cap_keeps_node_series_and_every_up_then_shares_the_rest_across_engines() -> None:
    gpu = Sample("llm_gpu_up", {"gpu": "0"}, 1.0)
    metrics = [*engine_series("big", 20), *engine_series("small", 2), gpu]
    budget = SeriesBudget()
    kept, counts = budget.apply(metrics, {("engine", "big", "timeout"): 2}, limit=1 + 22 + 3 * 6)
    assert gpu in kept
    assert len([m for m in kept if m.name == "llm_engine_up"]) == 22
    summaries = [(m.labels["engine"], m.labels["model"]) for m in kept if isinstance(m, QuantileSummary)]
    # Round-robin: the small engine's two models are in before the big one's third.
    assert sorted(summaries) == sorted([("big", n) for n in model_names(4)] + [("small", n) for n in model_names(2)])
    assert sum(series_count(m) for m in kept) <= 1 + 22 + 3 * 6
    assert counts == {("engine", "big", "timeout"): 2, ("exporter", "", "cardinality"): 1}
    _, counts = budget.apply(metrics, {}, limit=1 + 22 + 3 * 6)
    assert counts == {("exporter", "", "cardinality"): 2}  # one per round that left something out
    kept, counts = budget.apply(metrics, {}, limit=10_000)
    assert kept == metrics and counts == {("exporter", "", "cardinality"): 2}


class ManyModels(Source):
    name = "engine"
    target = "big"

    def collect(self, now: float) -> list[Metric]:
        return engine_series("big", 50)


def test_publish_applies_the_node_cap() -> None:
    exporter = Exporter(Config(max_exported_series=60), pipeline=Pipeline([ManyModels()], []))
    try:
        snapshot = exporter.collect_once()
    finally:
        exporter.stop()
    assert sum(series_count(m) for m in snapshot.metrics) <= 60
    assert snapshot.error_counts[("exporter", "", "cardinality")] == 1
    assert len([m for m in snapshot.metrics if m.name == "llm_engine_up"]) == 50


def test_budget_keys_are_validated_and_engine_defaults_carry_them() -> None:
    config = build({"engine_defaults": {"max_models": 2, "max_exported_series": 40}, "max_exported_series": 500})
    assert (config.engine_defaults.max_models, config.engine_defaults.max_exported_series) == (2, 40)
    assert config.kubernetes.limits.max_models == 2 and config.max_exported_series == 500
    assert build({}).max_exported_series == Config().max_exported_series
    with pytest.raises(ConfigError, match=r"^max_exported_series: must be greater than 0"):
        build({"max_exported_series": 0})
    with pytest.raises(ConfigError, match=r"^engines\[0\].max_models: must be a whole number"):
        build({"engines": [{"url": "http://a:1/metrics", "max_models": 1.5}]})
