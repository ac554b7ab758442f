"""The package's layers, bottom to top: a module may import its own layer and the ones below,
never one above (docs/design.md#layout). Lazy imports inside functions count too: an import that
climbs back up is a two-way tie whether it runs at start-up or later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import import_graph

PACKAGE = Path(__file__).resolve().parents[2] / "exporter"

# Bottom to top. A module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("settings", ("exporter.settings",)),
    (
        "foundation",
        (
            "exporter",
            "exporter.validation",
            "exporter.registry",
            "exporter.model",
            "exporter.catalogue",
            "exporter.window",
            "exporter.promtext",
            "exporter.sysfs",
            "exporter.engine_processes",
            "exporter.process_group",
            "exporter.sanity",
            "exporter.budget",
            "exporter.slicing",
            "exporter.buckets",
            "exporter.collector_gc",
        ),
    ),
    # A stage's record and scorer (exporter/stages/<id>.py): plain data and pure functions of
    # normalized samples, read by the diagnosis and by the rules, dashboards, report and demo.
    # The node's health findings (exporter/health/): records of plain data like the stages'.
    ("stages", ("exporter.stages", "exporter.health")),
    ("attribution", ("exporter.attribution",)),
    ("sources", ("exporter.sources",)),
    # The configuration reads the names the sources register (engine and gateway types, GPU modes).
    ("config", ("exporter.config", "exporter.config_targets", "exporter.config_health", "exporter.config_profile")),
    ("discovery", ("exporter.discovery",)),
    (
        "pipeline",
        (
            "exporter.loop",
            "exporter.diagnosis",
            "exporter.exposition",
            "exporter.render",
            "exporter.slo",
            "exporter.profile",
        ),
    ),
    (
        "serving",
        (
            "exporter.webconfig",
            "exporter.webauth",
            "exporter.webguard",
            "exporter.connections",
            "exporter.server",
            "exporter.otlp_listener",
        ),
    ),
    # The composition root sits on what it composes, the OTLP receiver's HTTP door included.
    ("app", ("exporter.app",)),
    ("monitoring", ("exporter.monitoring", "exporter.generate", "exporter.reference", "exporter.vendor_reference")),
    ("report", ("exporter.report",)),
    ("simulator", ("exporter.simulate",)),
    ("cli", ("exporter.cli", "exporter.__main__")),
)
# Test helpers shared by unrelated tests must not pull in the simulator (a quarter of the package).
SHARED_TEST_HELPERS = ("tests/support.py", "tests/conftest.py", "tests/integration/conftest.py")


def layer_of(module: str) -> int:
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # The package itself (its version) is its own prefix only, not every module's.
            nested = prefix != "exporter" and module.startswith(prefix + ".")
            if (module == prefix or nested) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best < 0:
        raise KeyError(f"{module} is in no layer: add it to LAYERS (and to docs/design.md#layout)")
    return best


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """(line, module) of every `exporter` import in `source`, relative ones resolved."""
    package = module if module.endswith("__init__") else module.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # `from exporter import app` imports the submodule exporter.app
            names = [f"{base}.{alias.name}" for alias in node.names] if base == "exporter" else [base]
            found += [(node.lineno, name) for name in names]
    return [(line, name) for line, name in found if name == "exporter" or name.startswith("exporter.")]


def upward_imports(source: str, module: str) -> list[str]:
    own = layer_of(module)
    problems = []
    for line, name in imported_modules(source, module):
        try:
            target = layer_of(name)
        except KeyError:  # `from exporter import x` where x is a name, not a module
            target = layer_of(name.rpartition(".")[0])
        if target > own:
            problems.append(f"{module}:{line} imports {name} ({LAYERS[target][0]}) from below ({LAYERS[own][0]})")
    return problems


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_module_imports_a_layer_above_its_own() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += upward_imports(path.read_text(encoding="utf-8"), module_name(path))
    assert problems == []


def test_every_module_has_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        layer_of(module_name(path))


@pytest.mark.parametrize(
    "module, source",
    [
        ("exporter.settings", "from exporter.app import Exporter\n"),
        ("exporter.sources.engine", "def late():\n    from exporter.app import Exporter\n"),
        ("exporter.config", "import exporter.simulate.node\n"),
        ("exporter.loop", "from exporter import cli\n"),
        ("exporter.sources.engines.vllm", "from ...discovery import targets\n"),
    ],
)
def test_an_upward_import_is_reported(module: str, source: str) -> None:
    assert len(upward_imports(source, module)) == 1


def test_imports_downward_and_sideways_are_allowed() -> None:
    assert upward_imports("from exporter.settings import Config\nfrom . import base\n", "exporter.sources.engine") == []


def test_shared_test_helpers_do_not_import_the_simulator() -> None:
    root = PACKAGE.parent
    for helper in SHARED_TEST_HELPERS:
        names = [name for _, name in imported_modules((root / helper).read_text(encoding="utf-8"), "tests.x")]
        assert not [name for name in names if name.startswith("exporter.simulate")], helper


# ---- the daemon apart from its tools, and no import cycle -------------------------------------


def test_every_tool_package_is_a_layer_above_the_daemon() -> None:
    serving = [name for name, _ in LAYERS].index("serving")
    assert all(layer_of(tool) > serving for tool in import_graph.TOOL_PACKAGES)


def test_the_daemon_imports_no_tool_module_nor_tool_library() -> None:
    daemon = import_graph.daemon_modules()
    assert {"exporter.app", "exporter.server", "exporter.config", "exporter.sources.engine"} <= daemon
    assert sorted(module for module in daemon if import_graph.is_tool(module)) == []
    libraries = import_graph.external_imports(daemon)
    tools = import_graph.TOOL_LIBRARIES
    assert {name: sorted(users) for name, users in libraries.items() if name.partition(".")[0] in tools} == {}


def test_there_is_no_import_cycle() -> None:
    """Lazy imports in functions and TYPE_CHECKING imports count: each is a two-way tie that
    makes the modules one unit, whatever the order they happen to load in."""
    found = import_graph.cycles()
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(cycle) for cycle in found)


def _modules(sources: dict[str, str], cli_module_level_only: bool = True) -> dict[str, import_graph.Imports]:
    return {
        name: import_graph.parse_imports(
            source, name, sources, module_level_only=cli_module_level_only and name == import_graph.CLI
        )
        for name, source in sources.items()
    }


@pytest.mark.parametrize(
    "a_imports_b",
    [
        "from exporter.b import B\n",
        "def late():\n    from exporter.b import B\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from exporter.b import B\n",
        "from exporter import b\n",
        "from . import b\n",
    ],
)
def test_a_cycle_is_found_however_the_import_is_written(a_imports_b: str) -> None:
    modules = _modules({"exporter.a": a_imports_b, "exporter.b": "import exporter.a\n"})
    assert import_graph.cycles(modules) == [["exporter.a", "exporter.b"]]


def test_a_package_importing_its_modules_is_no_cycle() -> None:
    sources = {
        "exporter.pkg": "from exporter.pkg.a import A\n",
        "exporter.pkg.a": "from exporter.pkg.b import B\n",
        "exporter.pkg.b": "",
        "exporter.user": "from exporter.pkg.b import B\n",
    }
    modules = {
        name: import_graph.parse_imports(source, name, sources, is_package=name == "exporter.pkg")
        for name, source in sources.items()
    }
    assert import_graph.cycles(modules) == []
    assert "exporter.pkg" in modules["exporter.user"].internal  # importing pkg.b runs pkg/__init__ first


def test_a_tool_reached_from_the_daemon_is_found_but_not_the_clis_own_tool_loaders() -> None:
    sources = {
        "exporter.cli": "from exporter.app import Exporter\ndef load():\n    from exporter.simulate.cli import run\n",
        "exporter.app": "def later():\n    import exporter.sources.engine\n",
        "exporter.sources.engine": "from exporter.monitoring.promql import parse\n",
        "exporter.monitoring.promql": "import promql_parser\n",
        "exporter.simulate.cli": "import rich\n",
    }
    daemon = import_graph.daemon_modules(_modules(sources))
    assert sorted(module for module in daemon if import_graph.is_tool(module)) == ["exporter.monitoring.promql"]
