"""The documented defaults are the settings' defaults: docs/configuration.md, docs/diagnosis.md
and docs/deployment.md are checked against the dataclass fields of exporter/settings.py, the one
place each default is stated, so a changed default cannot leave the docs behind."""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.config import build
from exporter.settings import (
    CapacitySettings,
    Config,
    GpuAttribution,
    GpuSettings,
    KubernetesSettings,
    ScrapeLimits,
    Thresholds,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
_ROW = re.compile(r"^\|\s*`([a-z0-9_]+)`(?:\s*/\s*`([a-z0-9_]+)`)?\s*\|(.*)$")


def documented(path: Path, heading: str | None = None) -> dict[str, list[str]]:
    """key -> the row's remaining cells, from every table row that starts with a `key` cell
    (below `heading` up to the next heading of the same level, when given)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if heading is not None:
        start = lines.index(heading)
        level = heading.split(" ")[0]
        end = next((i for i in range(start + 1, len(lines)) if lines[i].split(" ")[0] == level), len(lines))
        lines = lines[start:end]
    rows: dict[str, list[str]] = {}
    for line in lines:
        match = _ROW.match(line)
        if match:
            cells = [cell.strip() for cell in match.group(3).split("|")]
            keys = [match.group(1), match.group(2)] if match.group(2) else [match.group(1)]
            for index, key in enumerate(keys):
                rows[key] = cells if len(keys) == 1 else [_nth_of_pair(cell, index) for cell in cells]
    return rows


def _nth_of_pair(cell: str, index: int) -> str:
    parts = cell.split("/")
    return parts[index].strip() if len(parts) == 2 else cell


def first_value(cell: str) -> str:
    """`16777216` (16 MiB) -> 16777216; 0.6 -> 0.6."""
    match = re.match(r"`([^`]*)`", cell)
    return (match.group(1) if match else cell.split(" ")[0]).strip()


def same(documented_text: str, default: Any) -> bool:
    if isinstance(default, bool):
        return documented_text == str(default).lower()
    if isinstance(default, (int, float)):
        try:
            return float(documented_text) == float(default)
        except ValueError:
            return False
    if isinstance(default, dict):
        return documented_text == "{}" and default == {}
    if isinstance(default, tuple) and default and all(isinstance(pair, tuple) for pair in default):
        # a mapping in settled form (slice_labels): documented as its YAML flow mapping
        return yaml.safe_load(documented_text) == {key: list(value) for key, value in default}
    if isinstance(default, tuple):
        return documented_text == "[]" and default == ()
    return documented_text == str(default)


def defaults(cls: type) -> dict[str, Any]:
    result = {}
    for field in fields(cls):
        if field.default is not MISSING:
            result[field.name] = field.default
        elif field.default_factory is not MISSING:
            result[field.name] = field.default_factory()
    return result


CONFIGURATION = DOCS / "configuration.md"


def test_top_level_defaults_are_documented() -> None:
    rows = documented(CONFIGURATION, "## Top-level keys")
    config = Config()
    expected = {
        "listen": config.listen,
        "interval_seconds": config.interval_seconds,
        "window_seconds": config.window_seconds,
        "gpu": config.gpu.mode,
        "sysfs": config.sysfs,
        "log_level": config.log_level,
        "engines": config.engines,
    }
    for key, value in expected.items():
        assert same(first_value(rows[key][1]), value), (key, rows[key][1], value)


@pytest.mark.parametrize(
    "cls, heading",
    [(ScrapeLimits, "## Engine targets"), (GpuAttribution, "## GPU"), (CapacitySettings, "## Capacity decisions")],
)
def test_section_defaults_are_documented(cls: type, heading: str) -> None:
    rows = documented(CONFIGURATION, heading)
    for key, value in defaults(cls).items():
        assert key in rows, f"{cls.__name__}.{key} is not documented under {heading!r}"
        assert same(first_value(rows[key][0]), value), (key, rows[key][0], value)


def test_dcgm_address_default_is_documented() -> None:
    rows = documented(CONFIGURATION, "## GPU")
    assert same(first_value(rows["dcgm_address"][0]), GpuSettings().dcgm_address)


def test_kubernetes_defaults_are_documented() -> None:
    rows = documented(DOCS / "deployment.md")
    for key in ("resync_seconds", "max_engines", "enabled"):
        assert same(first_value(rows[key][0]), defaults(KubernetesSettings)[key]), key


def test_diagnosis_thresholds_are_documented_with_their_defaults() -> None:
    rows = documented(DOCS / "diagnosis.md")
    for key, value in defaults(Thresholds).items():
        assert key in rows, f"diagnosis.{key} is not documented in docs/diagnosis.md"
        assert same(first_value(rows[key][0]), value), (key, rows[key][0], value)


def test_an_empty_configuration_builds_the_dataclass_defaults() -> None:
    """config.py states no default of its own: an empty file is exactly Config()."""
    assert build({}) == Config()


def test_the_check_reads_what_it_claims() -> None:
    """The parser finds a changed default: a guard against a check that passes on anything."""
    rows = documented(CONFIGURATION, "## Engine targets")
    assert not same(first_value(rows["timeout_seconds"][0]), ScrapeLimits().timeout_seconds + 1)
    assert same(first_value("`16777216` (16 MiB)"), 16 * 1024 * 1024)


def test_every_slo_key_is_documented() -> None:
    from exporter.config import SLO_KEYS
    from exporter.settings import SloTarget

    rows = documented(CONFIGURATION, "## Latency SLOs")
    assert {f.name for f in fields(SloTarget)} == set(SLO_KEYS) <= set(rows)
    for field in fields(SloTarget):
        if field.default is None:
            assert not same(first_value(rows[field.name][0]), "required"), field.name


def test_otlp_defaults_are_documented() -> None:
    from exporter.settings import OtlpSettings

    rows = documented(CONFIGURATION, "### OTLP receiver")
    for key, value in defaults(OtlpSettings).items():
        assert key in rows, key
        if value is not None:
            assert same(first_value(rows[key][0]), value), (key, rows[key][0], value)


def test_profile_defaults_are_documented() -> None:
    from exporter.settings import ProfileSettings

    rows = documented(CONFIGURATION, "## Profile captures")
    for key, value in defaults(ProfileSettings).items():
        assert key in rows, key
        if value is not None:
            assert same(first_value(rows[key][0]), value), (key, rows[key][0], value)


def test_capacity_bounds_are_the_code_s() -> None:
    """The Bounds table's capacity rows state the ranges exporter/config.py checks."""
    from exporter import config

    lines = CONFIGURATION.read_text(encoding="utf-8").splitlines()
    stated = {line.split("`")[1]: line.split("|")[2].strip() for line in lines if line.startswith("| `capacity.")}
    low, high = config.TARGET_UTILIZATION_BOUNDS
    assert stated["capacity.target_utilization"] == f"[{low:g}, {high:g}]"
    assert stated["capacity.scale_down_stabilization_seconds"] == f"[0, {config.MAX_STABILIZATION_SECONDS:g}]"
    assert stated["capacity.max_num_seqs.*"] == f"[1, {config.MAX_NUM_SEQS}]"
    assert stated["capacity.gpu_hour_price.*"] == f"[0, {config.MAX_GPU_HOUR_PRICE:g}]"
    for key, value in (("target_utilization", high + 0.01), ("scale_down_stabilization_seconds", -1)):
        with pytest.raises(config.ConfigError):
            build({"capacity": {key: value}})
