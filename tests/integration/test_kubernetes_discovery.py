"""Engine discovery from pod annotations, against a server replaying Kubernetes API responses.

The real `serve` process lists and watches pods on its node through a loopback HTTP server that
answers with the recorded responses in tests/fixtures/kubernetes (see its README), and scrapes the
engines those pods name: real vLLM and SGLang captures served from loopback addresses standing in
for the pod IPs. A trap server stands in for the pod on another node that every malicious
annotation points at; nothing may ever reach it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import FIXTURES, START_BOUND_SECONDS, ExporterProcess, fixture_text, series_value, wait_until

pytestmark = pytest.mark.integration

K8S = FIXTURES / "kubernetes"
NODE = "gpu-node-1"
TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.service-account-token"
VLLM_ENGINE = "inference/llama-8b-vllm-7d9f8c6b5d-x2k4q"
SGLANG_ENGINE = "inference/qwen-7b-sglang-6d8f9c7b4-r5t8y"
PROXY_ENGINE = "research/tgi-proxy-7c9b8d6f5-k4j2h"
# Pod IPs in the fixtures and the loopback addresses that stand in for them.
LOOPBACK = {
    "10.244.3.17": "127.0.0.2",  # vLLM pod
    "10.244.3.22": "127.0.0.3",  # SGLang pod
    "10.244.3.32": "127.0.0.4",  # proxy pod that redirects
    "10.244.3.30": "127.0.0.5",  # notebook with a malicious path
    "10.244.3.31": "127.0.0.6",  # batch job with a malicious port
    "10.244.3.5": "127.0.0.7",  # device plugin, not annotated
    "10.244.7.41": "127.0.0.9",  # the pod on another node: the trap
}


class Server:
    """A threaded loopback HTTP server on `host` whose handler is a plain function."""

    def __init__(self, host: str, handle: Callable[[BaseHTTPRequestHandler], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                try:
                    handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str = "text/plain",
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


class ReplayedApi:
    """The API server: list, watch (streamed in steps the test releases), 410, relist."""

    def __init__(self, localize: Callable[[str], str]) -> None:
        self.localize = localize
        self.requests: list[dict[str, list[str]]] = []
        self.unauthorized = 0
        self.gates = {"delete": threading.Event(), "expire": threading.Event()}
        self.closing = threading.Event()
        self.server = Server("127.0.0.1", self._handle)
        self.url = f"http://127.0.0.1:{self.server.port}"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.unauthorized += 1
            reply(handler, 401, b'{"kind":"Status","code":401}', "application/json")
            return
        if parts.path != "/api/v1/pods" or query.get("fieldSelector") != [f"spec.nodeName={NODE}"]:
            reply(handler, 400, b'{"kind":"Status","code":400}', "application/json")
            return
        self.requests.append(query)
        lists = sum(1 for q in self.requests if "watch" not in q)
        if "watch" not in query:
            name = "pods-list-initial.json" if lists == 1 else "pods-list-relist.json"
            reply(handler, 200, self.localize((K8S / name).read_text()).encode(), "application/json")
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        if lists == 1:  # the first watch plays the whole story, a step at a time
            self._stream(handler, "pods-watch-1-added.jsonl")
            if self._wait("delete"):
                self._stream(handler, "pods-watch-1-deleted.jsonl")
            if self._wait("expire"):
                self._stream(handler, "pods-watch-1-expired.jsonl")
        else:  # later watches stay open, quiet, until the test ends
            self.closing.wait(30)
        handler.wfile.write(b"0\r\n\r\n")

    def _wait(self, gate: str) -> bool:
        while not self.closing.is_set():
            if self.gates[gate].wait(0.1):
                return True
        return False

    def _stream(self, handler: BaseHTTPRequestHandler, name: str) -> None:
        for line in self.localize((K8S / name).read_text()).splitlines():
            data = line.encode() + b"\n"
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

    def watches(self) -> list[dict[str, list[str]]]:
        return [q for q in self.requests if "watch" in q]

    def close(self) -> None:
        self.closing.set()
        self.server.close()


@pytest.fixture
def node() -> Iterator[dict]:
    """Engines on loopback addresses for the node's pods, the trap, and the replayed API."""
    trap_hits: list[str] = []
    proxy_hits: list[str] = []

    def proxy_handler(handler: BaseHTTPRequestHandler) -> None:
        proxy_hits.append(handler.path)
        reply(handler, 302, b"", headers={"Location": f"http://127.0.0.9:{trap.port}/metrics"})

    def trap_handler(handler: BaseHTTPRequestHandler) -> None:
        trap_hits.append(handler.path)  # answers like an engine, so a naive client would be pleased
        reply(handler, 200, fixture_text("vllm-v1-docs-design-metrics-sample.prom").encode())

    trap = Server("127.0.0.9", trap_handler)
    vllm = Server(
        "127.0.0.2", lambda h: reply(h, 200, fixture_text("vllm-v1-docs-design-metrics-sample.prom").encode())
    )
    sglang = Server("127.0.0.3", lambda h: reply(h, 200, fixture_text("sglang-2025-07-pr7944.prom").encode()))
    proxy = Server("127.0.0.4", proxy_handler)
    ports = {"8000": vllm.port, "30000": sglang.port, "8080": proxy.port, "9100": trap.port}

    def localize(text: str) -> str:
        for fixture_ip, loopback in LOOPBACK.items():
            text = re.sub(rf"(?<![\d.]){re.escape(fixture_ip)}(?![\d])", loopback, text)
        return re.sub(r"(?<![\d.])(8000|30000|8080|9100)(?![\d])", lambda m: str(ports[m.group(1)]), text)

    api = ReplayedApi(localize)
    yield {"api": api, "trap_hits": trap_hits, "proxy_hits": proxy_hits}
    for server in (api, trap, vllm, sglang, proxy):
        server.close()


def start_exporter(tmp_path: Path, api_url: str) -> ExporterProcess:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "engine_defaults": {"timeout_seconds": 1},
                "kubernetes": {"enabled": True, "api_url": api_url, "token_file": str(token), "resync_seconds": 300},
            }
        )
    )
    return ExporterProcess("--config", str(config), env={"NODE_NAME": NODE})


def engine_up(text: str, engine: str) -> float | None:
    return series_value(text, "llm_engine_up", engine=engine)


def test_discovers_annotated_pods_on_this_node_and_labels_their_series(node, tmp_path):
    with start_exporter(tmp_path, node["api"].url) as exporter:
        text = exporter.wait_for(lambda t: engine_up(t, VLLM_ENGINE) == 1 and engine_up(t, SGLANG_ENGINE) == 1)
        assert (
            series_value(
                text,
                "llm_engine_up",
                engine=VLLM_ENGINE,
                engine_type="vllm",
                pod=VLLM_ENGINE.split("/")[1],
                namespace="inference",
                container="vllm",
            )
            == 1
        )
        # The SGLang pod has a log-shipper sidecar: the container is the one declaring the port.
        assert (
            series_value(
                text,
                "llm_engine_up",
                engine=SGLANG_ENGINE,
                engine_type="sglang",
                namespace="inference",
                container="sglang",
            )
            == 1
        )
        assert series_value(text, "llm_engine_requests_running", engine=VLLM_ENGINE, namespace="inference") is not None
        assert series_value(text, "llm_exporter_source_up", source="kubernetes", target="pods") == 1
        engines = set(re.findall(r'llm_engine_up\{[^}]*engine="([^"]+)"', text))
        assert engines == {VLLM_ENGINE, SGLANG_ENGINE, PROXY_ENGINE}, engines
        first_watch = node["api"].watches()[0]
        assert first_watch["resourceVersion"] == ["1648213"] and first_watch["allowWatchBookmarks"] == ["true"]
        assert node["api"].unauthorized == 0


def test_annotations_cannot_point_the_exporter_at_another_host(node, tmp_path):
    with start_exporter(tmp_path, node["api"].url) as exporter:
        text = exporter.wait_for(
            lambda t: (
                series_value(t, "llm_exporter_source_errors_total", target=PROXY_ENGINE, reason="http_status")
                is not None
            )
        )
        # The proxy pod was scraped at its own IP only, and its redirect to the trap not followed.
        assert engine_up(text, PROXY_ENGINE) == 0
        seen = len(node["proxy_hits"])  # three more rounds: still nothing may reach the trap
        wait_until(lambda: len(node["proxy_hits"]) >= seen + 3, "three more fetches of the redirecting pod")
        text = exporter.metrics()
        log = exporter.log()
    assert node["trap_hits"] == []
    assert "batch-eval-0" not in text and "notebook" not in text and "qwen-32b" not in text
    assert "not scraping pod research/notebook-5f6d8c7b9-z8x7c: llm-bottleneck-exporter/path" in log
    assert "not scraping pod research/batch-eval-0: llm-bottleneck-exporter/port" in log
    assert "not scraping pod inference/qwen-32b-vllm-5c8d7b9f4-m7p2n: scheduled on node 'gpu-node-2'" in log


def test_deleted_pod_stops_being_scraped_and_410_gone_relists(node, tmp_path):
    api = node["api"]
    with start_exporter(tmp_path, api.url) as exporter:
        exporter.wait_for(lambda t: engine_up(t, VLLM_ENGINE) == 1 and engine_up(t, SGLANG_ENGINE) == 1)
        api.gates["delete"].set()
        text = exporter.wait_for(lambda t: engine_up(t, VLLM_ENGINE) is None)
        # The other pod is still a target; whether this round's scrape of it made its 1 s timeout
        # is the machine's load, not discovery (it is waited for up below).
        assert engine_up(text, SGLANG_ENGINE) is not None
        assert VLLM_ENGINE not in text  # every series of the deleted pod, error counters included
        api.gates["expire"].set()
        wait_until(lambda: len(api.watches()) >= 2, "a second watch, after the relist")
        lists = [q for q in api.requests if "watch" not in q]
        assert len(lists) == 2, api.requests
        assert api.watches()[1]["resourceVersion"] == ["1651090"]  # resumed from the relist
        text = exporter.wait_for(lambda t: engine_up(t, SGLANG_ENGINE) == 1)
        assert engine_up(text, VLLM_ENGINE) is None
        assert series_value(text, "llm_exporter_source_up", source="kubernetes", target="pods") == 1
    assert node["trap_hits"] == []


def test_discovery_without_a_node_name_exits_2_naming_the_key(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text("kubernetes:\n  enabled: true\n  api_url: http://127.0.0.1:9\n  token_file: ''\n")
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--config", str(config), "--gpu", "none"],
        capture_output=True,
        text=True,
        timeout=START_BOUND_SECONDS,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2, result.stderr
    assert "kubernetes.node_name" in result.stderr and "Traceback" not in result.stderr
