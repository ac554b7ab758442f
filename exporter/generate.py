"""`generate [--out DIR] [--check] [--config FILE] [--exporter-config FILE]`: write every generated
file, or check them.

Each generator maps the monitoring configuration to `{path relative to the repository: text}`.
Add a generator to GENERATORS (the dashboards add theirs next to the alerts') and both `generate`
and `generate --check` cover its files.

The diagnosis lines are the running exporter's: `generate` reads the `diagnosis:` section of the
deployed exporter configuration (DIR/deploy/kubernetes/configmap.yaml, or `--exporter-config`), so
`--check` fails when a threshold changes there and the committed rules are not regenerated.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from exporter import validation as v
from exporter.config import build, slos, thresholds
from exporter.monitoring.config import DEPLOYED_EXPORTER_CONFIG, MonitoringConfig, load_config
from exporter.monitoring.dashboards.render import dashboard_files
from exporter.monitoring.rule_files import alert_files
from exporter.monitoring.stage_docs import stage_files
from exporter.settings import SloTarget, Thresholds

Generator = Callable[[MonitoringConfig], dict[str, str]]

GENERATORS: list[Generator] = [
    alert_files,
    dashboard_files,
    stage_files,
]


#: The key of the deployed ConfigMap (DEPLOYED_EXPORTER_CONFIG) holding the exporter's YAML.
CONFIGMAP_KEY = "config.yaml"


def exporter_thresholds(path: str) -> Thresholds:
    """The `diagnosis:` section of an exporter configuration file: the exporter's plain YAML, or a
    ConfigMap manifest carrying it under `config.yaml`. Validated as the exporter validates it."""
    data, where = _exporter_config(path)
    return thresholds(data.get("diagnosis", {}), f"{where}: diagnosis")


def exporter_slos(path: str) -> tuple[SloTarget, ...]:
    """The `slos:` section of the same file, validated as the exporter validates it."""
    data, where = _exporter_config(path)
    return slos(data.get("slos", []), f"{where}: slos")


def _exporter_config(path: str) -> tuple[dict[str, Any], str]:
    data = v.load_file(path)
    where = path
    if data.get("kind") == "ConfigMap":
        where = f"{path}: data.{CONFIGMAP_KEY}"
        text = v.string(v.mapping(data.get("data"), f"{path}: data").get(CONFIGMAP_KEY), where)
        embedded = v.load_yaml_text(text, where)
        data = {} if embedded is None else v.mapping(embedded, where)
    return data, where


def deployed_thresholds(root: Path, exporter_config: str | None) -> Thresholds:
    """The thresholds of `--exporter-config`, else of the repository's deployed ConfigMap, else
    (generating from a plain install, with no repository) the exporter's defaults."""
    if exporter_config is not None:
        return exporter_thresholds(exporter_config)
    deployed = root / DEPLOYED_EXPORTER_CONFIG
    if deployed.is_file():
        return exporter_thresholds(str(deployed))
    print(
        f"{deployed}: not found; the exporter's default diagnosis thresholds are used "
        "(--exporter-config FILE names the deployed configuration)",
        file=sys.stderr,
    )
    return Thresholds()


def monitoring_config(
    root: Path, config_path: str | None = None, exporter_config: str | None = None
) -> MonitoringConfig:
    """What `generate` generates from: the monitoring configuration (defaults, or `config_path`'s
    overrides) with the diagnosis lines of the exporter configuration deployed under `root`.
    The grafanalib entry points (dashboards/*.dashboard.py) build from the same."""
    config = load_config(config_path)  # the monitoring configuration's mistakes are reported first
    config = replace(config, diagnosis=deployed_thresholds(root, exporter_config))
    return replace(config, slos=deployed_slos(root, exporter_config), gateways=deployed_gateways(root, exporter_config))


def deployed_slos(root: Path, exporter_config: str | None) -> tuple[SloTarget, ...]:
    """The SLOs of `--exporter-config`, else of the deployed ConfigMap, else none."""
    if exporter_config is not None:
        return exporter_slos(exporter_config)
    deployed = root / DEPLOYED_EXPORTER_CONFIG
    return exporter_slos(str(deployed)) if deployed.is_file() else ()


def deployed_gateways(root: Path, exporter_config: str | None) -> tuple[str, ...]:
    """The names of the gateways of `--exporter-config`, else of the deployed ConfigMap, else none."""
    path = exporter_config or str(root / DEPLOYED_EXPORTER_CONFIG)
    if exporter_config is None and not Path(path).is_file():
        return ()
    data, _ = _exporter_config(path)
    return tuple(gateway.name for gateway in build(data).gateways)


def generated_files(config: MonitoringConfig) -> dict[str, str]:
    files: dict[str, str] = {}
    for generator in GENERATORS:
        for path, text in generator(config).items():
            if path in files:
                raise ValueError(f"{path} is generated twice (by {generator.__qualname__} too)")
            files[path] = text
    return dict(sorted(files.items()))


def stale_files(out: Path, files: dict[str, str]) -> list[str]:
    """One line per file under `out` that is missing or differs from what the code generates."""
    problems = []
    for path, text in files.items():
        target = out / path
        if not target.is_file():
            problems.append(f"{path}: missing")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: stale (differs from what the code generates)")
    return problems


def write_files(out: Path, files: dict[str, str]) -> list[str]:
    """Write files that changed; return the paths written."""
    written = []
    for path, text in files.items():
        target = out / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def run_generate(out: str, check: bool, config_path: str | None, exporter_config: str | None = None) -> int:
    """The CLI command; ConfigError propagates to the CLI (exit 2 with the key named)."""
    root = Path(out)
    files = generated_files(monitoring_config(root, config_path, exporter_config))
    if check:
        problems = stale_files(root, files)
        for line in problems:
            print(line)
        if problems:
            print("run `llm-bottleneck-exporter generate` and commit the result", file=sys.stderr)
            return 1
        print(f"{len(files)} generated file(s) up to date")
        return 0
    written = write_files(root, files)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(files)} generated file(s), {len(written)} changed")
    return 0


def add_generate_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    parser = add_parser(
        "generate", help="write the generated alert rules and manifests; --check exits 1 when a committed file is stale"
    )
    parser.add_argument("--out", metavar="DIR", default=".", help="repository root to write under (default .)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale file")
    parser.add_argument("--config", metavar="FILE", help="YAML overrides of the monitoring configuration")
    parser.add_argument(
        "--exporter-config",
        metavar="FILE",
        help="exporter configuration whose diagnosis: thresholds the rules and dashboards use, plain YAML or a "
        f"ConfigMap with a config.yaml key (default DIR/{DEPLOYED_EXPORTER_CONFIG})",
    )


def run_command(args: argparse.Namespace) -> int:
    return run_generate(args.out, args.check, args.config, args.exporter_config)
