"""Coverage-guided fuzzing (atheris/libFuzzer) of every parser of outside input, a few seconds each.

The harnesses live in tests/fuzz/ and check the same properties as the hypothesis tests
(tests/fuzz/properties.py); here each runs as its own process for FUZZ_SECONDS with a fixed seed,
starting from real inputs. A crash fails the test with libFuzzer's report and the saved input,
which reproduces it: `.venv/bin/python tests/fuzz/<harness>.py <crash file>`. Longer runs are for
people, not CI (see tests/fuzz/harness.py). The first such run found a defect: a configuration or
web configuration file that is not UTF-8 escaped as UnicodeDecodeError instead of ConfigError.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ENGINE_FIXTURES, FIXTURES, REPO

pytestmark = pytest.mark.integration

FUZZ_SECONDS = 12
#: what libFuzzer reports as a slow unit (-report_slow_units; its default)
SLOW_UNIT_MS = 10_000
WEB_CONFIG_SEED = b"""basic_auth_users:
  alice: $2y$10$Zbb4gBCsnKpiS9rBsRpbSezWK9lJ3ElLeG9dMCCY0tC5Rkp0Rv/tS
http_server_config:
  headers:
    X-Frame-Options: deny
rate_limit:
  interval: 1s
  burst: 10
"""


def _seeds(harness: str, directory: Path) -> list[Path]:
    """Real inputs to start from; the first byte of each is the harness' selector."""
    if harness == "exposition":
        return [ENGINE_FIXTURES, FIXTURES / "gateways", FIXTURES / "dcgm-exporter"]
    if harness == "config":
        directory.mkdir()
        (directory / "config").write_bytes(b"\x00" + (REPO / "docs" / "example-config.yaml").read_bytes())
        (directory / "web-config").write_bytes(b"\x01" + WEB_CONFIG_SEED)
        return [directory]
    return []  # sysfs: the harness mutates real trees it builds itself


def _harness_env(trees: Path) -> dict[str, str]:
    """The sysfs harness builds its trees in `trees` (the test's own folder): libFuzzer ends the
    process with C's exit(), so the harness cannot remove a folder of its own making."""
    trees.mkdir(exist_ok=True)
    return {**os.environ, "SYSFS_FUZZER_DIR": str(trees)}


def _slowed_by_the_machine(harness: str, artifact: Path) -> bool:
    """A slow-unit artifact that runs fast alone: the machine stalled the fuzzer (a CI run once
    held one three-byte sysfs input 14 s, beside the vLLM tier; alone it takes milliseconds), not
    the input. A slow input is slow again; a crash or a timeout is never excused."""
    if not artifact.name.startswith("slow-unit-"):
        return False
    script = REPO / "tests" / "fuzz" / f"{harness}_fuzzer.py"
    rerun = subprocess.run(
        [sys.executable, str(script), str(artifact)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=_harness_env(artifact.parent.parent / f"trees-{artifact.name}"),
    )
    took = re.search(r"Executed .* in (\d+) ms", rerun.stdout + rerun.stderr)
    return rerun.returncode == 0 and took is not None and int(took.group(1)) < SLOW_UNIT_MS


@pytest.mark.parametrize("harness", ["exposition", "sysfs", "config"])
def test_atheris_finds_no_crash(harness: str, tmp_path: Path) -> None:
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    command = [
        sys.executable,
        str(REPO / "tests" / "fuzz" / f"{harness}_fuzzer.py"),
        f"-max_total_time={FUZZ_SECONDS}",
        "-seed=1",
        "-max_len=65536",
        "-rss_limit_mb=1024",
        f"-report_slow_units={SLOW_UNIT_MS // 1000}",
        f"-artifact_prefix={artifacts}/",
        str(corpus),
        *map(str, _seeds(harness, tmp_path / "seeds")),
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 120,
        cwd=REPO,
        env=_harness_env(tmp_path / "trees"),
    )
    output = result.stdout + result.stderr
    crashes = [a for a in sorted(artifacts.iterdir()) if not _slowed_by_the_machine(harness, a)]
    kept = []
    for crash in crashes:  # keep the reproducer beyond tmp_path's cleanup
        keep = REPO / ".cache" / "fuzz-crashes" / f"{harness}-{crash.name}"
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(crash, keep)
        kept.append(str(keep))
    assert result.returncode == 0 and not crashes, f"exit {result.returncode}, inputs kept: {kept}\n{output[-6000:]}"
    # Proof that it fuzzed: runs past the seed inputs (libFuzzer's INITED count), i.e. mutations.
    # How many fit in FUZZ_SECONDS is the machine's speed, not the harness': quiet, the config
    # harness ran 45,716 times in 13 s; in a fresh-clone CI with the vLLM tier beside it, 180 times,
    # which a floor of 200 runs failed.
    inited = re.search(r"#(\d+)\s+INITED", output)
    done = re.search(r"Done (\d+) runs", output)
    assert inited and done and int(done.group(1)) > int(inited.group(1)), output[-3000:]
