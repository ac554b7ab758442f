"""What the package declares against what its code imports, and what the image pins.

The daemon's imports are its `dependencies`; a tool's are those plus its extra; nothing is
declared that nothing imports; the image pins exactly the daemon's dependencies and theirs. The
installed distributions (importlib.metadata, as scripts/test installs `.[test]`) say which
distribution holds an imported module and what each distribution requires in turn.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import textwrap
import tomllib
from functools import cache

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from exporter.cli import TOOLS
from tests import import_graph

PYPROJECT = tomllib.loads((import_graph.REPO / "pyproject.toml").read_text(encoding="utf-8"))
IMAGE_REQUIREMENTS = import_graph.REPO / "deploy" / "image-requirements.txt"


def base_requirements() -> list[Requirement]:
    return [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]


def extra_requirements(extra: str) -> list[Requirement]:
    return [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"][extra]]


def names(requirements: list[Requirement]) -> set[str]:
    return {canonicalize_name(requirement.name) for requirement in requirements}


@cache
def _module_owners() -> dict[str, str]:
    """Module name -> the installed distribution whose files hold it."""
    owners: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        for file in distribution.files or []:
            parts = file.parts
            if not parts or ".dist-info" in parts[0] or ".." in parts:
                continue
            stem = parts[-1].partition(".")[0]  # `x.py`, `x.cpython-311-x86_64-linux-gnu.so`
            if not parts[-1].endswith((".py", ".so", ".pyd")):
                continue
            dotted = ".".join([*parts[:-1]] if stem == "__init__" else [*parts[:-1], stem])
            owners.setdefault(dotted, canonicalize_name(distribution.metadata["Name"]))
    return owners


def distribution_of(module: str) -> str:
    owners = _module_owners()
    candidate = module
    while candidate:
        if candidate in owners:
            return owners[candidate]
        candidate = candidate.rpartition(".")[0]
    raise LookupError(f"no installed distribution holds {module}")


def imported_distributions(modules: set[str]) -> dict[str, set[str]]:
    """Distribution -> the modules among `modules` that import it."""
    found: dict[str, set[str]] = {}
    for module, users in import_graph.external_imports(modules).items():
        found.setdefault(distribution_of(module), set()).update(users)
    return found


def tool_modules(command: str) -> set[str]:
    """What the command's loader in exporter/cli.py imports, and all that reaches."""
    source = textwrap.dedent(inspect.getsource(TOOLS[command].load))
    loaded = import_graph.parse_imports(source, "exporter.cli", import_graph.graph()).internal
    return import_graph.closure(loaded)


def test_every_dependency_has_a_floor() -> None:
    for requirement in base_requirements():
        floors = [spec for spec in requirement.specifier if spec.operator == ">="]
        assert len(floors) == 1, f"{requirement}: one >= floor (tests/integration/install_envs.py installs it)"


def test_the_daemon_imports_what_the_dependencies_declare_and_nothing_else() -> None:
    imported = imported_distributions(import_graph.daemon_modules())
    assert {name: sorted(users) for name, users in imported.items() if name not in names(base_requirements())} == {}
    assert names(base_requirements()) - set(imported) == set(), "declared, never imported by the daemon"


@pytest.mark.parametrize("command", sorted(TOOLS))
def test_each_tool_imports_what_the_dependencies_and_its_extra_declare(command: str) -> None:
    extra = names(extra_requirements(TOOLS[command].extra))
    imported = imported_distributions(tool_modules(command))
    undeclared = {
        name: sorted(users) for name, users in imported.items() if name not in extra | names(base_requirements())
    }
    assert undeclared == {}, f"add them to the {TOOLS[command].extra} extra"


@pytest.mark.parametrize("extra", sorted({tool.extra for tool in TOOLS.values()}))
def test_each_extra_carries_only_what_its_tools_import(extra: str) -> None:
    imported: set[str] = set()
    for command, tool in TOOLS.items():
        if tool.extra == extra:
            imported |= set(imported_distributions(tool_modules(command)))
    assert names(extra_requirements(extra)) - imported == set()


def test_the_test_extra_installs_every_tools_extra() -> None:
    (own,) = [
        r
        for r in map(Requirement, PYPROJECT["project"]["optional-dependencies"]["test"])
        if r.name == PYPROJECT["project"]["name"]
    ]
    assert own.extras == {tool.extra for tool in TOOLS.values()}


def image_pins() -> dict[str, Version]:
    pins = {}
    for line in IMAGE_REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not pinned: {line}"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def dependency_closure() -> set[str]:
    """The daemon's dependencies and, from each installed distribution's metadata, theirs."""
    pending = base_requirements()
    seen: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        pending += [Requirement(text) for text in importlib.metadata.requires(requirement.name) or []]
    return seen


def test_the_image_pins_exactly_the_daemons_dependencies_and_theirs() -> None:
    pins = image_pins()
    closure = dependency_closure()
    assert sorted(closure - set(pins)) == [], "missing from deploy/image-requirements.txt"
    assert sorted(set(pins) - closure) == [], (
        "pinned in deploy/image-requirements.txt, needed by nothing the daemon uses"
    )
    for requirement in base_requirements():
        assert requirement.specifier.contains(pins[canonicalize_name(requirement.name)]), requirement
