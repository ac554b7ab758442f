"""The tools beside the daemon (generate, simulate, demo, report): loaded only when chosen, and a
tool whose extra is not installed says which extra to install, in one line and exit 2.

A library is hidden here as Python hides one (`sys.modules[name] = None` makes its import raise
ModuleNotFoundError); tests/integration/test_install_envs.py checks the same in a real install
without extras.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from exporter.cli import _join_dash_values, main, make_parser

TOOL_PACKAGES = ("exporter.generate", "exporter.monitoring", "exporter.report", "exporter.simulate")


@pytest.fixture
def fresh_tools(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Forget the tools' modules for this test (restored after), so they are imported again."""
    for name in list(sys.modules):
        if name.startswith(TOOL_PACKAGES):
            monkeypatch.delitem(sys.modules, name)
    return monkeypatch


def hide(monkeypatch: pytest.MonkeyPatch, library: str) -> None:
    """Make `library` and its submodules unimportable for this test, loaded before or not."""
    for name in [library, *(name for name in sys.modules if name.startswith(library + "."))]:
        monkeypatch.setitem(sys.modules, name, None)


def loaded_tools() -> list[str]:
    return sorted(name for name in sys.modules if name.startswith(TOOL_PACKAGES))


@pytest.mark.parametrize(
    "argv, library, extra",
    [
        (["generate", "--check"], "grafanalib", "generate"),
        (["generate", "--check"], "promql_parser", "generate"),
        (["demo", "--duration", "1"], "rich", "demo"),
        (
            ["report", "--prometheus", "http://127.0.0.1:9", "--baseline", "-2h/-1h", "--incident", "-1h/now"],
            "promql_parser",
            "report",
        ),
    ],
)
def test_a_tool_without_its_extra_names_the_extra(
    fresh_tools: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], library: str, extra: str
) -> None:
    hide(fresh_tools, library)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{argv[0]} needs {library}" in err
    assert f"pip install 'llm-bottleneck-exporter[{extra}]'" in err


def test_the_overview_lists_a_tool_whose_extra_is_missing(
    fresh_tools: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hide(fresh_tools, "grafanalib")
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    unwrapped = "".join(out.split())  # argparse wraps the help, at spaces and hyphens
    assert "needsthegenerateextra:pipinstall'llm-bottleneck-exporter[generate]'" in unwrapped
    assert "case review" in out  # the tools that load keep their own help


def test_a_missing_module_of_the_exporter_itself_is_a_bug_not_an_extra(fresh_tools: pytest.MonkeyPatch) -> None:
    fresh_tools.setitem(sys.modules, "exporter.monitoring.rule_files", None)
    with pytest.raises(ModuleNotFoundError):
        main(["generate", "--check"])


def test_the_daemons_commands_import_no_tool(fresh_tools: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "exporter.yaml"
    config.write_text("engines:\n  - url: http://127.0.0.1:8000/metrics\n")
    for library in ("rich", "grafanalib", "promql_parser", "matplotlib", "scipy", "jinja2"):
        hide(fresh_tools, library)
    assert main(["check-config", str(config)]) == 0
    make_parser(["serve", "--engine", "http://127.0.0.1:8000/metrics"]).parse_args(["serve"])
    make_parser(["once"]).parse_args(["once", "--format", "json"])
    assert loaded_tools() == []


@pytest.mark.parametrize(
    "argv, joined",
    [
        (["report", "--baseline", "-2h/-1h"], ["report", "--baseline=-2h/-1h"]),
        (["once", "--interval", "-5"], ["once", "--interval=-5"]),
        (["report", "--baseline=-2h/-1h", "-1h"], ["report", "--baseline=-2h/-1h", "-1h"]),
        (["report", "--", "--baseline", "-2h"], ["report", "--", "--baseline", "-2h"]),
        (["report", "--baseline", "--incident"], ["report", "--baseline", "--incident"]),
    ],
)
def test_a_value_starting_with_a_dash_and_digit_stays_with_its_option(argv: list[str], joined: list[str]) -> None:
    assert _join_dash_values(argv) == joined
