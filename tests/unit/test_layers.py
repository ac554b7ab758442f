"""The package's layers, bottom to top: a module may import its own layer and the ones below,
never one above (DESIGN.md, "Layout"). Lazy imports inside functions count too: an import that
climbs back up is a two-way tie whether it runs at start-up or later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "exporter"

# Bottom to top. A module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("settings", ("exporter.settings",)),
    (
        "foundation",
        (
            "exporter",
            "exporter.validation",
            "exporter.model",
            "exporter.catalogue",
            "exporter.window",
            "exporter.promtext",
            "exporter.sysfs",
            "exporter.engine_processes",
            "exporter.process_group",
            "exporter.sanity",
            "exporter.budget",
        ),
    ),
    # A stage's record and scorer (exporter/stages/<id>.py): plain data and pure functions of
    # normalized samples, read by the diagnosis and by the rules, dashboards, report and demo.
    ("stages", ("exporter.stages",)),
    ("config", ("exporter.config",)),
    ("attribution", ("exporter.attribution",)),
    ("sources", ("exporter.sources",)),
    ("discovery", ("exporter.discovery",)),
    ("pipeline", ("exporter.loop", "exporter.diagnosis", "exporter.exposition", "exporter.render", "exporter.slo")),
    ("app", ("exporter.app",)),
    (
        "serving",
        ("exporter.webconfig", "exporter.webauth", "exporter.webguard", "exporter.connections", "exporter.server"),
    ),
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
        raise KeyError(f"{module} is in no layer: add it to LAYERS (and to DESIGN.md)")
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
