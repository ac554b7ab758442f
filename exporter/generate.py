"""`generate [--out DIR] [--check] [--config FILE]`: write every generated file, or check them.

Each generator maps the monitoring configuration to `{path relative to the repository: text}`.
Add a generator to GENERATORS (the dashboards add theirs next to the alerts') and both `generate`
and `generate --check` cover its files.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from exporter.monitoring.config import MonitoringConfig, load_config
from exporter.monitoring.dashboards.render import dashboard_files
from exporter.monitoring.rule_files import alert_files

Generator = Callable[[MonitoringConfig], dict[str, str]]

GENERATORS: list[Generator] = [
    alert_files,
    dashboard_files,
]


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


def run_generate(out: str, check: bool, config_path: str | None) -> int:
    """The CLI command; ConfigError propagates to the CLI (exit 2 with the key named)."""
    config = load_config(config_path)
    files = generated_files(config)
    root = Path(out)
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
