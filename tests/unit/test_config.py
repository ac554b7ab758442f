"""Configuration: defaults, file + flag precedence, and one-line errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config import ConfigError, build, engine_names, load_file, parse_engine_flag, parse_listen
from tests.support import REPO


def test_defaults_match_the_documented_contract() -> None:
    config = build({})
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 9477)
    assert config.interval_seconds == 5.0
    assert config.window_seconds == 60.0
    assert config.gpu.mode == "auto"
    assert config.sysfs == "/sys"
    assert config.engines == ()


def test_engine_defaults_apply_to_every_engine_unless_overridden() -> None:
    config = build(
        {
            "engine_defaults": {"timeout_seconds": 3},
            "engines": [{"url": "http://a:1/metrics"}, {"url": "http://b:2/metrics", "timeout_seconds": 1}],
        }
    )
    assert [e.limits.timeout_seconds for e in config.engines] == [3.0, 1.0]
    assert config.engines[0].limits.max_response_bytes == 16 * 1024 * 1024


def test_flags_override_the_file() -> None:
    config = build({"interval_seconds": 10, "listen": "127.0.0.1:1"}, {"interval_seconds": ("2", "--interval")})
    assert config.interval_seconds == 2.0
    assert config.listen_port == 1


def test_engine_flags_replace_the_files_engines() -> None:
    flags = {"engines": ([parse_engine_flag("sglang=http://x:30000/metrics")], "--engine")}
    config = build({"engines": ["http://y:8000/metrics"]}, flags)
    assert [(e.type, e.url) for e in config.engines] == [("sglang", "http://x:30000/metrics")]


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"intervall_seconds": 5}, "intervall_seconds"),
        ({"interval_seconds": "fast"}, "interval_seconds"),
        ({"interval_seconds": 0}, "interval_seconds"),
        ({"interval_seconds": True}, "interval_seconds"),
        ({"window_seconds": 1, "interval_seconds": 5}, "window_seconds"),
        ({"listen": "9477"}, "listen"),
        ({"listen": "0.0.0.0:70000"}, "listen"),
        ({"listen": "example.com:9477"}, "listen"),
        ({"gpu": "cuda"}, "gpu"),
        ({"gpu": "dcgm-exporter"}, "gpu"),
        ({"engines": {"url": "http://a/"}}, "engines"),
        ({"engines": [{"url": "ftp://a/metrics"}]}, "engines[0].url"),
        ({"engines": [{"url": "http://a/metrics", "typ": "vllm"}]}, "engines[0].typ"),
        ({"engines": [{"url": "http://a/metrics", "type": "ollama"}]}, "engines[0].type"),
        ({"engines": [{"type": "vllm"}]}, "engines[0].url"),
        ({"engines": [{"url": "http://a/metrics", "max_series": 1.5}]}, "engines[0].max_series"),
        ({"engine_defaults": {"timeout": 2}}, "engine_defaults.timeout"),
        ({"engines": ["http://a:1/metrics", "http://a:1/metrics"]}, "engines[1]"),
        ({"log_level": "verbose"}, "log_level"),
    ],
)
def test_invalid_values_name_the_offending_key(data: dict, where: str) -> None:
    with pytest.raises(ConfigError) as error:
        build(data)
    assert error.value.where == where
    assert "\n" not in str(error.value)


def test_flag_errors_name_the_flag() -> None:
    with pytest.raises(ConfigError) as error:
        build({}, {"interval_seconds": ("-1", "--interval")})
    assert error.value.where == "--interval"


def test_unknown_engine_type_in_flag_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown engine type 'ollama'"):
        parse_engine_flag("ollama=http://a:1/metrics")


def test_engine_flag_without_type_keeps_urls_with_query_strings() -> None:
    assert parse_engine_flag("http://a:1/metrics?x=1") == {"url": "http://a:1/metrics?x=1"}


def test_engine_label_is_host_port_plus_path_only_when_shared() -> None:
    urls = ["http://a:1/x/metrics", "http://a:1/y/metrics", "http://b:2/metrics", "http://a:1/z"]
    assert engine_names(urls, [None, None, None, "named"]) == ["a:1/x/metrics", "a:1/y/metrics", "b:2", "named"]


def test_ipv6_listen_address() -> None:
    assert parse_listen("[::1]:9477", "listen") == ("::1", 9477)


def test_load_file_reports_yaml_errors_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("engines:\n  - url: [unclosed\n")
    with pytest.raises(ConfigError) as error:
        load_file(str(path))
    assert error.value.where.startswith(str(path) + ":")


def test_load_file_rejects_text_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"listen: \xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8 text") as error:
        load_file(str(path))
    assert error.value.where == str(path)


def test_load_file_rejects_a_list_at_the_top(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_file(str(path))


def test_empty_file_is_the_default_configuration(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert build(load_file(str(path))) == build({})


def test_the_documented_example_is_valid() -> None:
    config = build(load_file(str(REPO / "docs" / "example-config.yaml")))
    assert [e.name for e in config.engines] == ["vllm-0", "127.0.0.1:30000"]


# -- bounds (hardening review: each passed check-config and then failed at run time) ------------


def test_yaml_alias_bombs_are_refused_before_anything_walks_them(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10**9 leaves
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"bomb.yaml: more than \d+ YAML aliases"):
        load_file(str(path))


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("engines: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"deep.yaml: nested deeper than \d+ levels"):
        load_file(str(path))


def test_a_file_past_the_size_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match=r"huge.yaml: larger than"):
        load_file(str(path))


@pytest.mark.parametrize(
    "data, where",
    [
        ({"interval_seconds": 1e300}, "interval_seconds"),  # killed the loop thread (timer overflow)
        ({"interval_seconds": 1e-9}, "interval_seconds"),  # a busy loop
        ({"engine_defaults": {"timeout_seconds": 1e10}}, "engine_defaults.timeout_seconds"),  # every round failed
        ({"engines": [{"url": "http://a:1/m", "timeout_seconds": 1e10}]}, "engines[0].timeout_seconds"),
        ({"window_seconds": 1e300, "interval_seconds": 5}, "window_seconds"),
        ({"engine_defaults": {"max_series": 1e300}}, "engine_defaults.max_series"),
        ({"gpu_attribution": {"refresh_seconds": 1e300}}, "gpu_attribution.refresh_seconds"),
    ],
)
def test_numeric_settings_out_of_range_name_the_key(data: dict, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(data)
    assert caught.value.where == where
    assert "must be at" in str(caught.value)


# -- bounds: every ratio, fraction and duration (docs/configuration.md, "Bounds") ---------------


@pytest.mark.parametrize(
    "data, where, problem",
    [
        # ratios of a whole: KV usage, DCGM activities, link utilization, scores
        ({"diagnosis": {"kv_usage_warning": 1.5}}, "diagnosis.kv_usage_warning", "must be at most 1"),
        ({"diagnosis": {"dram_active_busy": -0.1}}, "diagnosis.dram_active_busy", "must be at least 0"),
        ({"diagnosis": {"enter_score": 2}}, "diagnosis.enter_score", "must be at most 1"),
        ({"diagnosis": {"rdma_utilization_high": 80}}, "diagnosis.rdma_utilization_high", "must be at most 1"),
        # a slowdown is a ratio over 1
        ({"diagnosis": {"itl_slowdown_ratio": 1}}, "diagnosis.itl_slowdown_ratio", "must be greater than 1"),
        ({"diagnosis": {"itl_slowdown_ratio": 0.5}}, "diagnosis.itl_slowdown_ratio", "must be greater than 1"),
        # durations: positive, at most a day (the baseline a week)
        ({"diagnosis": {"level_seconds": 0}}, "diagnosis.level_seconds", "must be greater than 0"),
        ({"diagnosis": {"ttft_p95_seconds": 1e9}}, "diagnosis.ttft_p95_seconds", "must be at most 86400"),
        ({"diagnosis": {"baseline_seconds": 1e7}}, "diagnosis.baseline_seconds", "must be at most 604800"),
        ({"kubernetes": {"resync_seconds": 0.001}}, "kubernetes.resync_seconds", "must be at least 10"),
        ({"gpu_attribution": {"refresh_seconds": 0.01}}, "gpu_attribution.refresh_seconds", "must be at least 1"),
        ({"engine_defaults": {"timeout_seconds": 1e-6}}, "engine_defaults.timeout_seconds", "must be at least 0.01"),
        # rates: non-negative and finite
        ({"diagnosis": {"cnp_per_second": -1}}, "diagnosis.cnp_per_second", "must be at least 0"),
        ({"diagnosis": {"waiting_requests": float("inf")}}, "diagnosis.waiting_requests", "must be finite"),
        # lines that must keep their order
        ({"diagnosis": {"kv_usage_warning": 0.97}}, "diagnosis.kv_usage_warning", "must not exceed kv_usage_critical"),
        (
            {"diagnosis": {"dram_active_busy": 0.9}},
            "diagnosis.dram_active_busy",
            "must not exceed dram_active_saturated",
        ),
        ({"diagnosis": {"level_seconds": 900}}, "diagnosis.level_seconds", "must not exceed baseline_seconds"),
        # intervals against timeouts, where one must end before the next starts
        (
            {
                "gateways": ["http://g:1/m"],
                "probes": [
                    {"name": "p", "url": "http://g:1/v1", "model": "m", "interval_seconds": 5, "timeout_seconds": 6}
                ],
            },
            "probes[0].timeout_seconds",
            "must not exceed interval_seconds",
        ),
        ({"interval_seconds": 10, "window_seconds": 5}, "window_seconds", "must be at least the interval"),
    ],
)
def test_every_ratio_fraction_and_duration_is_bounded_naming_the_key(data: dict, where: str, problem: str) -> None:
    """Was: `diagnosis:` took any non-negative number (kv_usage_warning: 1.5 was accepted; a
    slowdown ratio of 1 made the decode stage fire at every step)."""
    with pytest.raises(ConfigError) as caught:
        build(data)
    assert caught.value.where == where
    assert problem in str(caught.value)


def test_the_documented_bounds_are_the_bounds_checked() -> None:
    """docs/configuration.md's "Bounds" table lists each `diagnosis:` key with the range config.py checks."""
    from exporter.config import THRESHOLD_BOUNDS
    from tests.unit.test_config_docs import CONFIGURATION, documented

    rows = documented(CONFIGURATION, "## Bounds")
    for key, (low, high, low_excluded) in THRESHOLD_BOUNDS.items():
        assert key in rows, f"diagnosis.{key} has no row in the Bounds table"
        expected = f"{'(' if low_excluded else '['}{low:g}, {high:g}]"
        assert rows[key][0] == f"`{expected}`", (key, rows[key][0], expected)


def test_check_config_exits_2_with_one_line_naming_the_bounded_key(tmp_path: Path, capsys) -> None:
    from exporter.cli import main

    path = tmp_path / "config.yaml"
    path.write_text("diagnosis:\n  kv_usage_warning: 1.5\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "diagnosis.kv_usage_warning: must be at most 1, not 1.5" in err


def test_an_engine_at_several_urls_and_its_slices_are_configured_per_target() -> None:
    config = build(
        {
            "engine_defaults": {"max_slices_per_dimension": 5, "slice_labels": {"tenant": ["team_alias"]}},
            "engines": [
                {
                    "name": "dsv3",
                    "url": "http://node0:30000/metrics",
                    "rank_urls": ["http://node1:30000/metrics"],
                    "slice_labels": {"priority": []},
                }
            ],
        }
    )
    (engine,) = config.engines
    assert engine.rank_urls == ("http://node1:30000/metrics",)
    assert engine.limits.max_slices_per_dimension == 5
    # A target's own slice_labels go over engine_defaults' dimension by dimension, those over the built-in.
    assert dict(engine.limits.slice_labels) == {
        "tenant": ("team_alias",),
        "adapter": ("adapter", "lora_name"),
        "priority": (),
    }


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"rank_urls": ["node1:30000"]}, "engines[0].rank_urls[0]"),
        ({"rank_urls": ["http://node0:30000/metrics"]}, "engines[0].rank_urls[0]"),
        ({"rank_urls": "http://node1/metrics"}, "engines[0].rank_urls"),
        ({"slice_labels": {"user": ["user"]}}, "engines[0].slice_labels.user"),
        ({"slice_labels": {"tenant": "team_alias"}}, "engines[0].slice_labels.tenant"),
        ({"max_slices_per_dimension": 1000}, "engines[0].max_slices_per_dimension"),
    ],
)
def test_bad_ranks_and_slices_name_their_key(entry: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError) as error:
        build({"engines": [{"url": "http://node0:30000/metrics", **entry}]})
    assert str(error.value).startswith(where), str(error.value)


def test_profile_captures_are_off_by_default_with_the_documented_defaults() -> None:
    profile = build({}).profile
    assert (profile.auto, profile.after_seconds, profile.min_interval_seconds, profile.seconds) == (
        False,
        300.0,
        3600.0,
        10.0,
    )
    assert profile.trace_dir is None and profile.stages == ()


def test_the_profile_section_is_read() -> None:
    data = {"auto": True, "after_seconds": 60, "seconds": 5, "trace_dir": "/traces", "stages": ["queueing"]}
    profile = build({"profile": data}).profile
    assert (profile.auto, profile.after_seconds, profile.seconds) == (True, 60.0, 5.0)
    assert (profile.trace_dir, profile.stages) == ("/traces", ("queueing",))


@pytest.mark.parametrize(
    "data, where",
    [
        ({"auto": "yes"}, "profile.auto"),
        ({"after_seconds": -1}, "profile.after_seconds"),
        ({"min_interval_seconds": 10}, "profile.min_interval_seconds"),
        ({"seconds": 121}, "profile.seconds"),
        ({"seconds": 0}, "profile.seconds"),
        ({"trace_dir": 3}, "profile.trace_dir"),
        ({"stages": ["queueing", "gpu_bound"]}, "profile.stages[1]"),
        ({"stages": "queueing"}, "profile.stages"),
        ({"every": 1}, "profile.every"),
    ],
)
def test_a_malformed_profile_section_names_its_key(data: dict, where: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build({"profile": data})
    assert raised.value.where == where
