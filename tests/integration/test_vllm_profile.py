"""`profile` against a real vLLM on CPU: launched with its profiler configured, a bounded capture
writes a trace whose summary names the top operators while the exporter keeps serving /metrics;
an overload held past `profile.after_seconds` takes one automatic capture, named in /diagnosis and
the metrics; launched without, a clear message and nothing else. One vLLM at a time (each test its
own)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.integration.exporter_view import BackgroundLoad, RepeatingLoad
from tests.integration.loadgen import LoadSpec
from tests.integration.vllm_server import VllmServer
from tests.support import REPO, ExporterProcess, series_value

pytestmark = pytest.mark.vllm

#: one of the back-to-back runs of load kept up while the capture is taken
LOAD = LoadSpec(concurrency=2, prompt_tokens=(16, 48), output_tokens=(16, 32), duration_s=5.0,
                request_timeout_s=60.0, seed=41)  # fmt: skip
#: the exporter answers /metrics from its rendered snapshot (a dictionary lookup): even on this
#: loaded two-core machine beside a profiling vLLM, nine scrapes in ten must not wait on the capture
SCRAPE_BUDGET_S = 1.0


def profile(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "profile", *args], capture_output=True, text=True, timeout=540, cwd=REPO
    )


def profiler_config(traces: Path) -> str:
    """vLLM's --profiler-config for a torch capture into `traces`, without Python stacks (vLLM
    records them by default): the operators the summary names are all still there, and the trace
    vLLM writes at the stop is a fraction of the size. With stacks, two test runs side by side on
    two cores kept the engine writing for over nine minutes."""
    return json.dumps({"profiler": "torch", "torch_profiler_dir": str(traces), "torch_profiler_with_stack": False})


# vLLM writes its trace after the stop: under a minute on a quiet machine, minutes on two cores
# shared with the main tier (the capture waits for it, up to its own FLUSH_SECONDS)
@pytest.mark.timeout(600)
def test_a_bounded_capture_with_its_summary_while_metrics_keep_being_served(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    config = profiler_config(traces)
    with VllmServer(extra_args=["--profiler-config", config]) as server:
        exporter = ExporterProcess("--engine", f"vllm={server.metrics_url}", interval=1.0)
        try:
            exporter.wait_ready(120)
            latencies: list[float] = []
            failures: list[str] = []
            stop = threading.Event()

            def scrape() -> None:
                while not stop.is_set():
                    began = time.monotonic()
                    try:
                        requests.get(exporter.base_url + "/metrics", timeout=10).raise_for_status()
                    except requests.RequestException as exc:
                        failures.append(repr(exc))
                    else:
                        latencies.append(time.monotonic() - began)
                    time.sleep(0.2)

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
            # The load runs until the capture is done, however long the profile command takes to
            # start on a loaded machine: a capture over an idle engine has no operators to name.
            with RepeatingLoad(server.base_url, LOAD) as load:
                time.sleep(2.0)
                began = time.monotonic()
                # The trace directory is read from the engine's own command line (--profiler-config).
                result = profile("--engine", f"vllm={server.metrics_url}", "--seconds", "4", "--format", "json")
                took = time.monotonic() - began
            stop.set()
            scraper.join()
        finally:
            exporter.close()
    assert result.returncode == 0, result.stderr[-3000:]
    # vLLM's engine loop writes the trace at the stop (minutes on a loaded machine) and serves no
    # step meanwhile, so requests of that stretch may time out; the load was served before it, and
    # the summary below shows the capture saw the engine at work.
    assert sum(len(r.ok_records) for r in load.results) > 0, [r.error_count for r in load.results]
    capture = json.loads(result.stdout)
    assert capture["directory"] == str(traces) and capture["traces"]
    trace = Path(capture["traces"][0])
    assert trace.is_file() and trace.name.endswith(".json.gz")
    summary = capture["summary"]
    assert summary["basis"] == "cpu operators" and len(summary["top"]) >= 5, (summary, capture["traces"])
    assert all(entry["seconds"] > 0 for entry in summary["top"])
    assert any(name.startswith("aten::") for name in (e["name"] for e in summary["top"]))
    assert abs(sum(summary["shares"].values()) - 1.0) < 1e-6
    assert (traces / "captures.jsonl").is_file()
    # Every scrape answered, and the typical one within the budget: the slowest few follow the
    # machine (a scrape waits for a core while vLLM profiles and writes its trace beside it).
    assert not failures and len(latencies) >= 10, (failures, len(latencies))
    assert statistics.median(latencies) < SCRAPE_BUDGET_S / 10, latencies
    assert statistics.quantiles(latencies, n=10)[-1] < SCRAPE_BUDGET_S, latencies
    print(
        f"\nprofile: 4 s capture took {took:.1f}s end to end; trace {trace.stat().st_size / 1e6:.1f} MB, "
        f"{summary['events']} events, top {summary['top'][0]}; shares {summary['shares']}; "
        f"/metrics during it: {len(latencies)} scrapes, p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms"
    )


#: an overload of the tiny model's 1,536-token KV cache (test_vllm_exporter.py's): requests wait
#: and are preempted for as long as it lasts, so one stage holds as the primary
OVERLOAD = LoadSpec(concurrency=24, prompt_tokens=(500, 900), output_tokens=(32, 96), duration_s=60.0,
                    request_timeout_s=300.0, seed=42)  # fmt: skip
AFTER_SECONDS = 8.0


@pytest.mark.timeout(600)
def test_an_overload_that_holds_takes_one_automatic_capture(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    config = profiler_config(traces)
    settings = {
        "window_seconds": 10,
        # not a warm-up test: the engine is judged as soon as it serves (test_vllm_restart.py has the cold regime)
        "health": {"warmup_seconds": 0},
        "profile": {"auto": True, "after_seconds": AFTER_SECONDS, "seconds": 3, "min_interval_seconds": 3600},
    }
    (tmp_path / "exporter.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    with VllmServer(extra_args=["--profiler-config", config]) as server:
        exporter = ExporterProcess(
            "--config", str(tmp_path / "exporter.yaml"), "--engine", f"vllm={server.metrics_url}", interval=1.0
        )
        try:
            exporter.wait_ready(120)
            before = requests.get(exporter.base_url + "/diagnosis", timeout=10).json()["engines"][0]
            load = BackgroundLoad(server.base_url, OVERLOAD)
            # The capture runs beside the collection; vLLM writes its trace after the stop, in
            # minutes on two cores shared with the main tier.
            deadline = time.monotonic() + 480
            record = None
            while time.monotonic() < deadline and record is None:
                time.sleep(2.0)
                engine = requests.get(exporter.base_url + "/diagnosis", timeout=30).json()["engines"][0]
                record = engine.get("profile")
            load.join()
            text = requests.get(exporter.base_url + "/metrics", timeout=30).text
        finally:
            exporter.close()
    assert before.get("profile") is None  # nothing is captured before a stage has held
    assert record is not None, "no automatic capture within the overload and its trace's flush"
    assert record["result"] == "ok", record
    assert record["stage"] != "none" and record["directory"] == str(traces)
    assert record["trace"] and Path(record["trace"]).is_file() and record["trace"] in record["traces"]
    # the summary: its heading (the trace read), then the top operators or kernels by time
    heading, *top = record["summary"]
    assert heading.startswith(record["trace"]) and top, record["summary"]
    assert all(re.fullmatch(r"\s*\d+(\.\d+)? m?s  \S.*", line) for line in top), top
    # one engine: one capture, and none that failed or found the profiler off
    assert series_value(text, "llm_engine_profile_captures_total", result="ok") == 1.0
    assert series_value(text, "llm_engine_profile_captures_total", result="failed") == 0.0
    assert series_value(text, "llm_engine_profile_captures_total", result="off") == 0.0
    assert series_value(text, "llm_engine_profile_info", trace=record["trace"], stage=record["stage"]) == 1.0
    print(f"\nautomatic capture: {record['stage']} held {AFTER_SECONDS:g} s; {record['summary'][:2]}")


def test_without_the_profiler_a_clear_message_and_nothing_else(tmp_path: Path) -> None:
    with VllmServer() as server:
        result = profile("--engine", f"vllm={server.metrics_url}", "--seconds", "2", "--trace-dir", str(tmp_path))
    assert result.returncode == 1 and result.stdout == ""
    assert "was not launched with profiling on" in result.stderr and "--profiler-config" in result.stderr
    assert list(tmp_path.iterdir()) == []
