"""Provision the virtualenv that runs the real LiteLLM proxy (PyPI `litellm[proxy]`).

LiteLLM pulls ~150 packages (boto3, azure, fastapi, …) that have no place in the test
interpreter, so it lives in `<repo>/.cache/litellm-venv`, provisioned like vLLM's
(tests/integration/vllm_env.py): idempotent, a marker written after a smoke import, a file lock
against concurrent pytest processes. Its Prometheus callback needs `prometheus_client`, which
`litellm[proxy]` does not pull in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.vllm_env import CACHE_DIR, file_lock

VENV_DIR = CACHE_DIR / "litellm-venv"
MARKER = VENV_DIR / ".provisioned"
LOCK_FILE = CACHE_DIR / "litellm-venv.lock"
PIP_LOG = CACHE_DIR / "litellm-venv-pip.log"
LITELLM_VERSION = "1.108.7"
PROMETHEUS_CLIENT_VERSION = "0.26.0"
INSTALL_TIMEOUT_S = 900.0


class LitellmEnvError(RuntimeError):
    """Provisioning failed; the message carries the tail of the pip log."""


def venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def _expected() -> dict[str, str]:
    return {"litellm": LITELLM_VERSION, "prometheus_client": PROMETHEUS_CLIENT_VERSION}


def _is_provisioned() -> bool:
    try:
        return json.loads(MARKER.read_text()) == _expected() and venv_python().exists()
    except (OSError, ValueError):
        return False


def _step(cmd: list[str | os.PathLike[str]], timeout_s: float) -> None:
    with PIP_LOG.open("a") as log:
        log.write(f"\n=== {' '.join(map(str, cmd))}\n")
        log.flush()
        try:
            result = subprocess.run([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise LitellmEnvError(f"timed out after {timeout_s:.0f}s: {cmd}") from exc
    if result.returncode != 0:
        tail = "\n".join(PIP_LOG.read_text(errors="replace").splitlines()[-40:])
        raise LitellmEnvError(f"{cmd} failed (exit {result.returncode}):\n{tail}")


def ensure_litellm_venv() -> Path:
    """The LiteLLM venv's python, provisioning the venv first if needed."""
    if _is_provisioned():
        return venv_python()
    with file_lock(LOCK_FILE, INSTALL_TIMEOUT_S * 2):
        if not _is_provisioned():
            MARKER.unlink(missing_ok=True)
            PIP_LOG.write_text("")
            python = venv_python()
            if not python.exists():
                _step([sys.executable, "-m", "venv", VENV_DIR], 120.0)
            pip: list[str | os.PathLike[str]] = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
            _step(
                [
                    *pip,
                    "install",
                    f"litellm[proxy]=={LITELLM_VERSION}",
                    f"prometheus_client=={PROMETHEUS_CLIENT_VERSION}",
                ],
                INSTALL_TIMEOUT_S,
            )
            _step([python, "-c", "import litellm.proxy.proxy_server"], 300.0)
            MARKER.write_text(json.dumps(_expected()))
    return venv_python()


if __name__ == "__main__":
    print(f"LiteLLM venv ready: {ensure_litellm_venv()}")
