"""Two virtualenvs built from this checkout, for tests/integration/test_install_envs.py:

- `plain-venv`: `pip install .` with no extra, as a user (or the image) gets the daemon: a real
  wheel built from the files the Dockerfile copies, not an editable install of the checkout;
- `floor-venv`: every base dependency at the floor pyproject.toml declares (a constraints file
  written from it), with the test runner, to run the daemon's tests at those floors.

Like the vLLM and LiteLLM venvs: under .cache/, idempotent (a marker written last records what
was installed), behind a file lock. scripts/test builds both in the background at set-up
(`python -m tests.integration.install_envs`); a test builds one on first use otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.integration.vllm_env import CACHE_DIR, REPO_ROOT, file_lock

PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet")
# What the wheel is built from: the files the Dockerfile copies (.dockerignore keeps only these).
PACKAGE_FILES = ("pyproject.toml", "README.md", "exporter")
# The test runner and the tests' own HTTP client (tests/support.py) in the floor venv, at the
# versions of the interpreter running the tests: none of them is the daemon's dependency.
TEST_TOOLS = ("pytest", "pytest-timeout", "hypothesis", "packaging", "requests")
STEP_TIMEOUT_S = 900.0


class InstallEnvError(RuntimeError):
    """A provisioning step failed; the message carries the tail of its log."""


def base_requirements() -> list[str]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(pyproject["project"]["dependencies"])


def floors() -> dict[str, str]:
    """Base dependency -> its floor, the version of its `>=` in pyproject.toml."""
    from packaging.requirements import Requirement

    found = {}
    for text in base_requirements():
        requirement = Requirement(text)
        (floor,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        found[requirement.name] = floor
    return found


def floor_constraints() -> str:
    return "".join(f"{name}=={floor}\n" for name, floor in floors().items())


def _package_digest() -> str:
    digest = hashlib.sha256()
    for name in PACKAGE_FILES:
        root = REPO_ROOT / name
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Venv:
    name: str
    describe: Callable[[], dict[str, str]]  # what the venv holds; a change rebuilds it
    install: Callable[[Venv], None]

    @property
    def path(self) -> Path:
        return CACHE_DIR / self.name

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def log(self) -> Path:
        return CACHE_DIR / f"{self.name}.log"

    def run(self, *args: str | Path, python: Path | None = None) -> None:
        command = [str(python or self.python), *map(str, args)]
        with self.log.open("a") as log:
            log.write(f"\n=== {' '.join(command)}\n")
            log.flush()
            try:
                result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise InstallEnvError(f"{self.name}: timed out: {command}") from exc
        if result.returncode != 0:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])
            raise InstallEnvError(f"{self.name}: {command} exited {result.returncode}:\n{tail}")

    def _marker(self) -> Path:
        return self.path / ".provisioned"

    def ready(self) -> bool:
        try:
            return json.loads(self._marker().read_text()) == self.describe() and self.python.exists()
        except (OSError, ValueError):
            return False

    def ensure(self) -> Path:
        """The venv's python, building the venv first unless it holds what `describe` says."""
        if not self.ready():
            with file_lock(CACHE_DIR / f"{self.name}.lock", STEP_TIMEOUT_S * 3):
                if not self.ready():
                    shutil.rmtree(self.path, ignore_errors=True)
                    self.log.write_text("")
                    self.run("-m", "venv", self.path, python=Path(sys.executable))
                    self.install(self)
                    self.run(*PIP, "check")
                    self._marker().write_text(json.dumps(self.describe()))
        return self.python


def _install_plain(venv: Venv) -> None:
    with tempfile.TemporaryDirectory(prefix="plain-install-") as source:
        for name in PACKAGE_FILES:
            copy = shutil.copytree if (REPO_ROOT / name).is_dir() else shutil.copy2
            copy(REPO_ROOT / name, Path(source) / name)
        venv.run(*PIP, "install", source)


def _test_tools() -> list[str]:
    return [f"{name}=={importlib.metadata.version(name)}" for name in TEST_TOOLS]


def _install_floors(venv: Venv) -> None:
    constraints = venv.path / "floor-constraints.txt"
    constraints.write_text(floor_constraints())
    venv.run(*PIP, "install", "-c", constraints, *base_requirements(), *_test_tools())


PLAIN = Venv("plain-venv", lambda: {"package": _package_digest()}, _install_plain)
FLOOR = Venv(
    "floor-venv", lambda: {"constraints": floor_constraints(), "tools": " ".join(_test_tools())}, _install_floors
)


def main(names: Sequence[str]) -> int:
    for venv in (PLAIN, FLOOR):
        if not names or venv.name in names:
            print(f"{venv.name} ready: {venv.ensure()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
