"""The package's imports as a graph, read from the source (every import: at module level, inside
functions, under TYPE_CHECKING), for the layer, cycle and dependency tests.

The daemon is what `serve`, `once` and `check-config` import: exporter.cli's module-level imports
and everything they reach. exporter.cli imports each tool inside a function, when that tool's
command is chosen (its `load`), so those imports are the tools', not the daemon's.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "exporter"
CLI = "exporter.cli"
# The tools: their modules and the libraries their extras bring (pyproject.toml). The daemon's
# commands (serve, once, check-config) import none of them, so a plain install, and the DaemonSet's
# image, carries none.
TOOL_PACKAGES = (
    "exporter.generate",
    "exporter.monitoring",
    "exporter.reference",
    "exporter.vendor_reference",
    "exporter.report",
    "exporter.simulate",
)
TOOL_LIBRARIES = ("attr", "attrs", "grafanalib", "jinja2", "matplotlib", "promql_parser", "rich", "scipy")


def is_tool(module: str) -> bool:
    return any(module == tool or module.startswith(tool + ".") for tool in TOOL_PACKAGES)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Imports:
    """One module's imports: the package's own modules, and outside modules by full name."""

    internal: set[str] = field(default_factory=set)
    external: set[str] = field(default_factory=set)


def _inside_functions(tree: ast.AST) -> set[int]:
    """ids of the import nodes nested in a function body."""
    nested: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nested.update(id(child) for child in ast.walk(node) if isinstance(child, ast.Import | ast.ImportFrom))
    return nested


def parse_imports(
    source: str, name: str, known: Iterable[str], is_package: bool = False, module_level_only: bool = False
) -> Imports:
    """The imports of module `name` (whose text is `source`); `known` are the module names that
    exist, to tell `from p import module` from `from p import name`."""
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)
    skipped = _inside_functions(tree) if module_level_only else set()
    found = Imports()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            top = target.partition(".")[0]
            if top in ("exporter", "tests"):
                resolved = target
                while resolved and resolved not in known:
                    resolved = resolved.rpartition(".")[0]
                if resolved and resolved != name:
                    found.internal.add(resolved)
                    # Importing a module runs its packages' __init__ first (those outside `path`'s own).
                    parent = resolved.rpartition(".")[0]
                    while parent and not name.startswith(parent + ".") and parent != name:
                        if parent in known:
                            found.internal.add(parent)
                        parent = parent.rpartition(".")[0]
            elif top not in sys.stdlib_module_names and top != "__future__":
                found.external.add(target)
    return found


# A package that imports every module of itself (so each registers itself: exporter/registry.py,
# exporter/stages/__init__.py) imports them as surely as a written import would.
_SELF_LOADING = ("import_modules(__name__, __path__)", "pkgutil.iter_modules(__path__)")


def _self_loaded(name: str, path: Path, files: Mapping[str, Path]) -> set[str]:
    """The modules a package's __init__ imports by listing its own directory."""
    if path.name != "__init__.py" or not any(call in path.read_text(encoding="utf-8") for call in _SELF_LOADING):
        return set()
    return {module for module in files if module.rpartition(".")[0] == name}


def _files(root: Path) -> dict[str, Path]:
    return {module_name(path): path for path in sorted(root.rglob("*.py"))}


@cache
def graph(with_tools: bool = False) -> dict[str, Imports]:
    """Every module of the package and of tests/, with its imports; exporter.cli's imports of the
    tools (inside functions) only `with_tools`."""
    files = {**_files(PACKAGE), **_files(REPO / "tests")}
    found = {
        name: parse_imports(
            path.read_text(encoding="utf-8"),
            name,
            files,
            is_package=path.name == "__init__.py",
            module_level_only=name == CLI and not with_tools,
        )
        for name, path in files.items()
    }
    for name, path in files.items():
        found[name].internal |= _self_loaded(name, path, files)
    return found


def closure(starts: Iterable[str], with_tools: bool = False, imports: Mapping[str, Imports] | None = None) -> set[str]:
    """The modules `starts` import, directly or not, themselves included."""
    imports = graph(with_tools) if imports is None else imports
    seen: set[str] = set()
    pending = list(starts)
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending.extend(imports[module].internal)
    return seen


def external_imports(modules: Iterable[str]) -> dict[str, set[str]]:
    """Outside module -> the modules among `modules` that import it."""
    found: dict[str, set[str]] = {}
    imports = graph(with_tools=True)
    for module in modules:
        for target in imports[module].external:
            found.setdefault(target, set()).add(module)
    return found


def daemon_modules(imports: Mapping[str, Imports] | None = None) -> set[str]:
    return {module for module in closure([CLI], imports=imports) if module.startswith("exporter")}


def cycles(imports: Mapping[str, Imports] | None = None) -> list[list[str]]:
    """The package's import cycles: each strongly connected set of two or more modules, sorted."""
    imports = {
        name: found for name, found in (graph() if imports is None else imports).items() if name.startswith("exporter")
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(imports[module].internal):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return sorted(found)
