"""Hypothesis fuzzing of every parser of outside input (issue 11), through the source that uses it.

Properties (tests/fuzz/properties.py, shared with the coverage-guided atheris harnesses in
tests/fuzz/): a source's `collect` raises nothing but SourceError, and what it returns renders to
exposition text that prometheus_client parses back, every sample intact; the configuration and
web config loaders raise nothing but ConfigError.

Inputs are built from real captures (engine and dcgm-exporter payloads, upstream sysfs trees) and
then mutated, so the examples reach deep into the parsers rather than failing at the first byte.
The parser's own properties (never raising, on noise and bytes) live in test_promtext.py.
Example counts are modest: the whole file runs in seconds on a loaded 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from exporter.config import ConfigError, build
from exporter.config import load_file as load_config_file
from exporter.loop import SourceStatus
from exporter.settings import EngineTarget, GatewayTarget, GpuSettings
from exporter.sources.base import Source
from exporter.sources.engine import EngineSource
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.gateway import GatewaySource
from exporter.sources.gpu import GPU_MODES
from exporter.sources.gpu_exporters.dcgm_exporter import DcgmExporterSource
from exporter.sources.rdma import RdmaSource
from exporter.webconfig import load_web_config
from tests.fuzz.properties import FILE_FATES, assert_renders_and_parses_back, canned_open_body, change_file, collect
from tests.support import ENGINE_FIXTURES, FIXTURES
from tests.sysfs_trees import build_fixture_tree, roce_mlx5_tree

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ENGINE_CAPTURES = sorted(ENGINE_FIXTURES.glob("*.prom"))
GATEWAY_CAPTURES = sorted((FIXTURES / "gateways").glob("*.txt"))
DCGM_CAPTURES = sorted((FIXTURES / "dcgm-exporter").glob("*.prom"))
# The vendors' exporters (AMD, Ascend, Gaudi): every capture, one mutated payload source.
# Each vendor exporter's captures sit in tests/fixtures/<its mode>/.
DEVICE_CAPTURES = sorted(p for m in GPU_MODES.values() if m.spec for p in (FIXTURES / m.name).glob("*.txt"))
_LINES = {
    path: path.read_text(encoding="utf-8").split("\n")
    for path in (*ENGINE_CAPTURES, *GATEWAY_CAPTURES, *DCGM_CAPTURES, *DEVICE_CAPTURES)
}

_NUMBERS = st.sampled_from(
    [
        "NaN",
        "+Inf",
        "-Inf",
        "-1",
        "0",
        "1e308",
        "-1e308",
        "1e-320",
        "nan",
        "inf",
        "18446744073709551615",
        "1_000",
        "0x10",
        "",
        "💥",
        "3 1700000000000",
        '1 # {a="b"} 2',
    ]
)
_JUNK = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", errors="replace")),  # invalid UTF-8, as fetched
    st.sampled_from(["{", "}", '"', "\\", '\\"', '="', ",", "\n", "# EOF", "# TYPE x counter", "\x00", "\ufffd"]),
)


@st.composite
def mutated_capture(draw: st.DrawFn, captures: list[Path]) -> str:
    """A real capture with lines dropped, duplicated, reordered, given odd values or junk, made
    huge or given deep label sets."""
    lines = list(_LINES[draw(st.sampled_from(captures))])
    for _ in range(draw(st.integers(0, 12))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        action = draw(st.sampled_from(["value", "junk", "dup", "swap", "drop", "cut", "huge", "deep", "long_label"]))
        if action == "value" and " " in line and not line.startswith("#"):
            lines[index] = line.rsplit(" ", 1)[0] + " " + draw(_NUMBERS)
        elif action == "junk":
            position = draw(st.integers(0, len(line)))
            lines[index] = line[:position] + draw(_JUNK) + line[position:]
        elif action == "dup":
            lines.insert(draw(st.integers(0, len(lines))), line)
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], line
        elif action == "drop":
            del lines[index]
        elif action == "cut":
            lines[index] = line[: draw(st.integers(0, len(line)))]
        elif action == "huge":
            lines[index] = line + "x" * draw(st.sampled_from([1 << 10, 1 << 16, 1 << 20]))
        elif action == "deep" and "{" in line:
            extra = ",".join(f'l{i}="{i}"' for i in range(draw(st.integers(1, 500))))
            lines[index] = line.replace("{", "{" + extra + ",", 1)
        elif action == "long_label" and '="' in line:
            lines[index] = line.replace('="', '="' + "y" * draw(st.sampled_from([100, 1025, 70_000])), 1)
    return "\n".join(lines)


def _collect(source: Source, now: float = 0.0) -> tuple[list, SourceStatus]:
    return collect(source, now, note=event)


# --- engines and dcgm-exporter: the Prometheus text parser through its sources ----------------


@FUZZ
@given(mutated_capture(ENGINE_CAPTURES), st.sampled_from([None, *ENGINES.names()]))
def test_engine_source_on_mutated_payloads(payload: str, engine_type: str | None) -> None:
    source = EngineSource(
        EngineTarget(
            url="http://127.0.0.1:9/metrics", name="e", type=engine_type, model="m" if engine_type == "tgi" else None
        ),
        60.0,
    )
    statuses = []
    metrics: list = []
    with mock.patch("exporter.sources.engine.open_body", canned_open_body(payload.encode)):
        for now in (0.0, 5.0):  # the second round exercises the windows (deltas, resets)
            metrics, status = _collect(source, now)
        statuses.append(status)
    assert_renders_and_parses_back(metrics, statuses)


@FUZZ
@given(st.binary(max_size=4096))
def test_engine_source_on_arbitrary_bytes(data: bytes) -> None:
    source = EngineSource(EngineTarget(url="http://127.0.0.1:9/metrics", name="e"), 60.0)
    with mock.patch("exporter.sources.engine.open_body", canned_open_body(lambda: data, "text/plain")):
        metrics, status = _collect(source)
    assert_renders_and_parses_back(metrics, [status])


@FUZZ
@given(mutated_capture(GATEWAY_CAPTURES), st.sampled_from([None, "epp", "envoy-ai-gateway", "litellm", "haproxy"]))
def test_gateway_source_on_mutated_payloads(payload: str, gateway_type: str | None) -> None:
    source = GatewaySource(GatewayTarget(url="http://127.0.0.1:9/metrics", name="g", type=gateway_type), 60.0)
    statuses = []
    metrics: list = []
    with mock.patch("exporter.sources.gateway.open_body", canned_open_body(payload.encode)):
        for now in (0.0, 5.0):
            metrics, status = _collect(source, now)
        statuses.append(status)
    assert_renders_and_parses_back(metrics, statuses)


@FUZZ
@given(mutated_capture(DCGM_CAPTURES))
def test_dcgm_exporter_source_on_mutated_payloads(payload: str) -> None:
    source = DcgmExporterSource("http://127.0.0.1:9/metrics")
    with mock.patch("exporter.sources.device_exporter.open_body", canned_open_body(payload.encode, "text/plain")):
        metrics, status = _collect(source)
    assert_renders_and_parses_back(metrics, [status])


@FUZZ
@given(mutated_capture(DEVICE_CAPTURES), st.sampled_from([mode.name for mode in GPU_MODES.values() if mode.spec]))
def test_vendor_exporter_sources_on_mutated_payloads(payload: str, mode: str) -> None:
    source = GPU_MODES[mode].build(GpuSettings(mode, "http://127.0.0.1:9/metrics"), None, 5.0)
    with mock.patch("exporter.sources.device_exporter.open_body", canned_open_body(payload.encode, "text/plain")):
        metrics, status = _collect(source)
    assert_renders_and_parses_back(metrics, [status])


# --- sysfs: arbitrary file contents in a real tree --------------------------------------------


def _tree_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def sysfs_templates(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("sysfs-templates")
    return [
        build_fixture_tree(base / "procfs", "procfs"),
        build_fixture_tree(base / "node_exporter", "node_exporter"),
        roce_mlx5_tree(base / "roce"),
    ]


_FILE_CONTENT = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b"\n",
            b"-1\n",
            b"18446744073709551615\n",
            b"99999999999999999999999999\n",
            b"4: ACTIVE\n",
            b"7: \n",
            b"garbage: ACTIVE\n",
            b"100 Gb/sec (4X EDR)\n",
            b"NaN Gb/sec\n",
            b"inf\n",
            b"\xff\xfe\n",
            b"1e400 Gb/sec\n",
            b"0x10\n",
            b"N/A (no PMA)\n",
        ]
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.data())
def test_rdma_source_on_arbitrary_file_contents(sysfs_templates: list[Path], data: st.DataObject) -> None:
    template = data.draw(st.sampled_from(sysfs_templates))
    root = Path(tempfile.mkdtemp(prefix="fuzz-sysfs-"))
    try:
        tree = root / "sys"
        shutil.copytree(template, tree, symlinks=True)
        files = _tree_files(tree)
        source = RdmaSource(str(tree), 60.0)
        statuses, metrics = [], []
        for now in (0.0, 5.0):  # the second round computes rates from the first one's counters
            for path in data.draw(st.lists(st.sampled_from(files), max_size=8, unique=True)):
                change_file(path, data.draw(st.sampled_from(FILE_FATES)), data.draw(_FILE_CONTENT))
            metrics, status = _collect(source, now)
            statuses = [status]
        assert_renders_and_parses_back(metrics, statuses)
    finally:
        shutil.rmtree(root)


# --- configuration and web configuration --------------------------------------------------------

_YAML_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 1 << 40),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        ["http://a:1/metrics", "vllm", "auto", "0.0.0.0:1", "dcgm-exporter=http://h:9400/metrics", "1e999", "-0"]
    ),
)
_KEYS = st.sampled_from(
    [
        "listen",
        "interval_seconds",
        "window_seconds",
        "gpu",
        "sysfs",
        "log_level",
        "engine_defaults",
        "engines",
        "diagnosis",
        "dcgm_address",
        "gpu_attribution",
        "kubernetes",
        "web_config_file",
        "url",
        "type",
        "name",
        "model",
        "timeout_seconds",
        "max_response_bytes",
        "max_series",
        "max_label_value_length",
        "static",
        "processes",
        "engine_pods",
        "enabled",
        "api_url",
        "tls_server_config",
        "basic_auth_users",
        "http_server_config",
        "cert_file",
        "key_file",
        "client_auth_type",
        "min_version",
        "cipher_suites",
        "rate_limit",
        "headers",
        "bogus",
    ]
)
_YAML_VALUES = st.recursive(
    _YAML_SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_KEYS, children, max_size=5)),
    max_leaves=20,
)
_YAML_DOCUMENTS = st.one_of(
    st.dictionaries(_KEYS, _YAML_VALUES, max_size=6),
    _YAML_VALUES,
)


def _yaml_ish(data: st.DataObject) -> str:
    """Valid YAML of odd structure, or text that is only YAML-ish (tabs, anchors, tags, cut short)."""
    import yaml

    document = yaml.safe_dump(data.draw(_YAML_DOCUMENTS), allow_unicode=True)
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(document)))
        document = (
            document[:cut]
            + data.draw(
                st.sampled_from(
                    [
                        "\t",
                        ": :",
                        "&a *a",
                        "!!python/object:os.system ls",
                        "[",
                        "{",
                        "'",
                        "- - -",
                        "\x00",
                        "%YAML 9",
                        "\ufeff",
                        "<<: *x",
                        "? complex\n: key",
                        "!!binary AAAA",
                        "--- \n---",
                    ]
                )
            )
            + document[cut:]
        )
    return document


def _write_temp(text: str, suffix: str) -> str:
    handle, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(handle, "w", encoding="utf-8", errors="surrogatepass") as out:
        out.write(text)
    return path


@FUZZ
@given(st.data())
def test_configuration_loader_raises_only_config_error(data: st.DataObject) -> None:
    path = _write_temp(_yaml_ish(data), ".yaml")
    try:
        build(load_config_file(path))
    except ConfigError:
        pass
    finally:
        os.unlink(path)


@FUZZ
@given(st.data())
def test_web_config_loader_raises_only_config_error(data: st.DataObject) -> None:
    path = _write_temp(_yaml_ish(data), ".yml")
    try:
        load_web_config(path)
    except ConfigError:
        pass
    finally:
        os.unlink(path)
