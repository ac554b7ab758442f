"""`--gateway [TYPE=]URL` and `gateways:`: parsed into GatewayTargets, each mistake one ConfigError
naming the key or flag."""

from __future__ import annotations

import pytest

from exporter.cli import config_from_args, make_parser
from exporter.config import build, parse_gateway_flag
from exporter.validation import ConfigError

ENGINE = {"url": "http://127.0.0.1:8000/metrics", "name": "vllm-0"}


def test_the_flag_takes_an_optional_type() -> None:
    assert parse_gateway_flag("haproxy=http://127.0.0.1:8404/metrics") == {
        "type": "haproxy",
        "url": "http://127.0.0.1:8404/metrics",
    }
    assert parse_gateway_flag("http://127.0.0.1:4000/metrics/") == {"url": "http://127.0.0.1:4000/metrics/"}
    with pytest.raises(ConfigError) as caught:
        parse_gateway_flag("nginx=http://127.0.0.1:1/metrics")
    assert caught.value.where == "--gateway"


def test_repeated_flags_replace_the_files_gateways() -> None:
    args = make_parser().parse_args(
        ["once", "--gateway", "epp=http://127.0.0.1:9090/metrics", "--gateway", "http://127.0.0.1:1064/metrics"]
    )
    gateways = config_from_args(args).gateways
    assert [(g.type, g.name) for g in gateways] == [("epp", "127.0.0.1:9090"), (None, "127.0.0.1:1064")]


def test_a_gateway_entry_with_its_limits_and_engines() -> None:
    config = build(
        {
            "engine_defaults": {"timeout_seconds": 3},
            "engines": [ENGINE],
            "gateways": [
                {"url": "http://127.0.0.1:4000/metrics/", "type": "litellm", "name": "litellm", "engines": ["vllm-0"]}
            ],
        }
    )
    (gateway,) = config.gateways
    assert (gateway.name, gateway.type, gateway.engines, gateway.limits.timeout_seconds) == (
        "litellm",
        "litellm",
        ("vllm-0",),
        3,
    )


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"url": "http://127.0.0.1:1/metrics", "type": "nginx"}, "gateways[0].type"),
        ({"url": "http://127.0.0.1:1/metrics", "engines": ["nope"]}, "gateways[0].engines"),
        ({"url": "http://user:pw@127.0.0.1:1/metrics"}, "gateways[0].url"),
        ({"url": "http://127.0.0.1:1/metrics", "timeout_seconds": -1}, "gateways[0].timeout_seconds"),
        ({"type": "epp"}, "gateways[0].url"),
        ({"url": "http://127.0.0.1:1/metrics", "colour": "red"}, "gateways[0]"),
    ],
)
def test_each_mistake_names_its_key(entry: dict, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build({"engines": [ENGINE], "gateways": [entry]})
    assert caught.value.where.startswith(where)


def test_two_gateways_of_one_name_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        build(
            {"gateways": [{"url": "http://127.0.0.1:1/m", "name": "g"}, {"url": "http://127.0.0.1:2/m", "name": "g"}]}
        )
    assert caught.value.where == "gateways[1]"


def test_a_probe_goes_through_the_only_gateway_by_default() -> None:
    config = build(
        {
            "gateways": [{"url": "http://127.0.0.1:1/metrics", "name": "g"}],
            "probes": [{"name": "p", "url": "http://127.0.0.1:2/v1", "model": "m"}],
        }
    )
    assert config.probes[0].gateway == "g"
