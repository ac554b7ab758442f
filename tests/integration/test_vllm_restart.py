"""A real vLLM on CPU restarted mid-run, read by the exporter's own `serve` and a real Prometheus.

Light load runs before and after the restart. The exporter must read the restart from the engine's
own process start time, show the replica loading while its port is bound but its metrics do not
answer (vLLM binds before it loads), then warming up from its first request for `warmup_seconds`
with no bottleneck verdict (its cold regime: the state `warming_up`), then up with the verdict
`none` again. The case
review over a window that spans the restart must name it. One vLLM (the session's), `nice`d by
the suite; the figures seen are printed for the report.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.integration.exporter_view import BackgroundLoad
from tests.integration.loadgen import LoadSpec
from tests.integration.monitoring_stack import Prometheus
from tests.integration.vllm_server import VllmServer
from tests.support import REPO, ExporterProcess

pytestmark = pytest.mark.vllm

INTERVAL_S = 1.0
WARMUP_S = 20.0
#: how far before the restart the incident window starts (the new start time can read a second early)
RESTART_MARGIN_S = 3.0
LIGHT = LoadSpec(
    concurrency=1, prompt_tokens=(16, 32), output_tokens=(8, 16), duration_s=15.0, request_timeout_s=60.0, seed=31
)


@pytest.fixture
def stack(vllm_server: VllmServer, tmp_path: Path) -> Iterator[tuple[ExporterProcess, Prometheus]]:
    config = tmp_path / "exporter.yaml"
    config.write_text(yaml.safe_dump({"health": {"warmup_seconds": WARMUP_S, "refresh_seconds": 2.0}}))
    exporter = ExporterProcess(
        "--config", str(config), "--engine", f"vllm={vllm_server.metrics_url}", "--window", "20", interval=INTERVAL_S
    )
    prometheus = None
    try:
        exporter.wait_ready(120)
        scrape = {"job_name": "llm-bottleneck-exporter", "scrape_interval": "1s",
                  "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}  # fmt: skip
        prometheus = Prometheus({"global": {"scrape_interval": "1s"}, "scrape_configs": [scrape]}, tmp_path)
        yield exporter, prometheus
    finally:
        if prometheus is not None:
            prometheus.close()
        exporter.close()


def entry(exporter: ExporterProcess) -> dict[str, Any] | None:
    try:
        document = requests.get(exporter.base_url + "/diagnosis", timeout=5).json()
    except requests.RequestException:
        return None
    found = [e for e in document["engines"] if e["engine_type"] == "vllm"]
    return found[0] if found else None


def wait_for(exporter: ExporterProcess, what: str, predicate, timeout: float, seen: list) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = entry(exporter)
        if found is not None:
            seen.append((time.time(), found["state"], found["primary"]))
            if predicate(found):
                return found
        time.sleep(INTERVAL_S)
    pytest.fail(f"{what} not seen within {timeout:.0f}s; last: {seen[-3:]}")


def test_a_restart_is_read_warmed_up_without_a_verdict_and_named_in_the_case_review(
    vllm_server: VllmServer, stack: tuple[ExporterProcess, Prometheus], tmp_path: Path
) -> None:
    exporter, prometheus = stack
    seen: list[tuple[float, str, str | None]] = []
    baseline_start = time.time()
    load = BackgroundLoad(vllm_server.base_url, dataclasses.replace(LIGHT, duration_s=WARMUP_S + 30))
    serving = wait_for(exporter, "serving before the restart",
                       lambda e: e["state"] == "up" and e["primary"] is not None, WARMUP_S + 120, seen)  # fmt: skip
    load.join()
    assert serving["primary"] == "none"
    before = serving["startup"]

    restart_began = time.time()
    restarting = threading.Thread(target=vllm_server.restart, name="restart", daemon=True)
    restarting.start()
    while restarting.is_alive():
        found = entry(exporter)
        if found is not None:
            seen.append((time.time(), found["state"], found["primary"]))
        time.sleep(INTERVAL_S)
    restarting.join()
    up_at = time.time()
    load = BackgroundLoad(vllm_server.base_url, dataclasses.replace(LIGHT, duration_s=WARMUP_S + 40, seed=32))
    warming = wait_for(exporter, "warming up after the restart",
                       lambda e: e["state"] == "warming_up"
                       and e["startup"].get("first_served_at"), 120, seen)  # fmt: skip
    assert warming["primary"] is None and warming["active"] == [] and warming["state_reason"] == "restart"
    assert warming["state_message"].startswith("restarted") and "cold for" in warming["state_message"]
    assert warming["no_verdict"].startswith("the engine is warming up")
    after = warming["startup"]
    assert after["started_at"] > before["started_at"] and after["restarts_seen"] == 1, (before, after, seen)
    assert after["startup_seconds"] is not None and after["startup_seconds"] > 0
    cold = [s for s in seen if s[0] > up_at and s[1] == "warming_up"]
    assert cold and all(primary is None for _, _, primary in cold)
    served = wait_for(exporter, "serving after the cold regime",
                      lambda e: e["state"] == "up" and e["primary"] is not None, WARMUP_S + 120, seen)  # fmt: skip
    load.join()
    assert served["primary"] == "none"
    states_during_restart = sorted({state for t, state, _ in seen if restart_began <= t <= up_at})
    end = time.time()

    # Whole seconds, the incident starting RESTART_MARGIN_S before the restart began: the new
    # process's start time (prometheus_client's: /proc/stat's boot time, whole seconds cut down,
    # plus the process's start ticks) reads up to a second early, once 0.08 s before the second
    # the restart began in.
    cut = math.floor(restart_began - RESTART_MARGIN_S)
    windows = f"{baseline_start:.0f}/{cut}", f"{cut}/{end:.0f}"
    review = tmp_path / "review.md"  # its plots are written beside it, in the test's own directory
    report = subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--prometheus", prometheus.url, "--out", str(review),
         "--baseline", windows[0], "--incident", windows[1]],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    restart_lines = [line for line in review.read_text().splitlines() if "restarted within the window" in line]
    starts = prometheus.query("llm_engine_process_start_time_seconds")
    assert restart_lines and "incident:" in restart_lines[0] and "baseline:" not in "".join(restart_lines), (
        f"start times in Prometheus: {starts}; windows {windows}\n" + review.read_text()[:3000]
    )
    print(
        f"\nrestart: states while restarting {states_during_restart}; restart took {up_at - restart_began:.0f}s; "
        f"start to first request {after['startup_seconds']}s (before the restart: {before['startup_seconds']}); "
        f"cold reads {len(cold)} all none; serving again {served['startup']}; review: {restart_lines[0]}"
    )
