"""Test helpers shared by the tiers: loopback HTTP servers that misbehave on purpose, and the
real `serve` process.

Everything binds to 127.0.0.1 on a free port and stops itself; nothing reaches past loopback.
"""

from __future__ import annotations

import itertools
import os
import selectors
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from exporter.model import Metric, Sample
from exporter.process_group import terminate_group

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
ENGINE_FIXTURES = FIXTURES / "engines"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fixture_text(name: str) -> str:
    return (ENGINE_FIXTURES / name).read_text(encoding="utf-8")


Responder = Callable[[BaseHTTPRequestHandler], None]


def respond_with(body: bytes | str, status: int = 200, content_type: str = "text/plain; version=0.0.4") -> Responder:
    data = body.encode() if isinstance(body, str) else body

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


def sglang_sliced_page(requests: int) -> str:
    """An SGLang 0.5.23 page (labels as tests/fixtures/engines/sglang-0.5.23-hybrid-priority.prom)
    whose requests came from 15 tenants and 15 adapters (custom labels) at 3 priority classes, 60
    combinations in all, `requests` per combination; TTFT and e2e histograms with SGLang's buckets."""
    base = 'engine_type="unified",model_name="m"'
    lines = ["# TYPE sglang:num_running_reqs gauge", "# TYPE sglang:num_queue_reqs gauge"]
    for priority in ("", "0", "1", "2"):
        for name in ("num_running_reqs", "num_queue_reqs"):
            lines.append(
                f'sglang:{name}{{{base},priority="{priority}",tp_rank="0",pp_rank="0"}} {3 if priority else 9}'
            )
    for family, edges in (
        ("time_to_first_token_seconds", (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0)),
        ("e2e_request_latency_seconds", (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)),
    ):
        lines.append(f"# TYPE sglang:{family} histogram")
        for i in range(60):
            labels = f'{base},adapter="lora-{(i * 7) % 15}",priority="{i % 3}",tenant="team-{i % 15}"'
            for k, edge in enumerate((*edges, "+Inf")):
                count = requests * min(1.0, (k + 1) / 4)
                lines.append(f'sglang:{family}_bucket{{{labels},le="{edge}"}} {count}')
            lines.append(f"sglang:{family}_count{{{labels}}} {requests}")
            lines.append(f"sglang:{family}_sum{{{labels}}} {requests * 0.5}")
    return "\n".join(lines) + "\n"


def growing(page: Callable[[int], str]) -> Responder:
    """A responder whose page is `page(n)` on its n-th call: counters that grow between scrapes."""
    calls = itertools.count(1)
    lock = threading.Lock()

    def respond(handler: BaseHTTPRequestHandler) -> None:
        with lock:
            n = next(calls)
        respond_with(page(n))(handler)

    return respond


class _Listening(ThreadingHTTPServer):
    """A backlog for many connections at once (socketserver's is 5), as a real engine's server has:
    a collection round (every fetch on one event loop) connects to every target in one instant."""

    request_queue_size = 128


@dataclass
class RouteServer:
    """A loopback HTTP server whose paths answer with swappable responders."""

    routes: dict[str, Responder] = field(default_factory=dict)
    port: int = 0
    host: str = "127.0.0.1"  # another loopback address (127.0.0.2) stands in for another machine
    requests_seen: int = 0

    def __post_init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                owner.requests_seen += 1
                responder = owner.routes.get(self.path.split("?")[0])
                if responder is None:
                    respond_with(b"not found\n", 404)(self)
                else:
                    try:
                        responder(self)
                    except (BrokenPipeError, ConnectionResetError):
                        pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the body is not routed on
                self.do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self._server = _Listening((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ExporterProcess:
    """The real `llm-bottleneck-exporter serve` as a subprocess on a free loopback port."""

    def __init__(
        self,
        *args: str,
        interval: float = 0.5,
        env: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        nofile: int | None = None,
        python: str | Path = sys.executable,
        cwd: Path = REPO,
    ) -> None:
        """`auth`: basic auth credentials for the readiness checks and `metrics()`; `nofile`: the
        server's descriptor limit (RLIMIT_NOFILE), to see what it does when it runs short;
        `python` and `cwd`: another interpreter (an install under test) and where it starts."""
        self.auth = auth
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"exporter-{self.port}.log"
        command = [
            str(python),
            "-m",
            "exporter",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--interval",
            str(interval),
            "--gpu",
            "none",
            *args,
        ]
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=None if nofile is None else lambda: _limit_descriptors(nofile),
        )
        try:
            self.wait_ready()
        except BaseException:  # never ready: no `with` will close it, so stop it here
            self.close()
            raise

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"exporter exited with {self.process.returncode}:\n{self.log()}")
            try:
                if (
                    requests.get(self.base_url + "/healthz", auth=self.auth, timeout=1).status_code == 200
                    and "llm_exporter_build_info" in self.metrics()
                ):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"exporter not ready after {timeout}s:\n{self.log()}")

    def metrics(self) -> str:
        return requests.get(self.base_url + "/metrics", auth=self.auth, timeout=5).text

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 15.0) -> str:
        """Poll /metrics until `predicate(text)` holds; return that text."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.metrics()
            if predicate(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"condition not met within {timeout}s; last /metrics:\n{text[:4000]}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-6000:]

    def close(self) -> None:
        terminate_group(self.process)
        self._log.close()

    def __enter__(self) -> ExporterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _limit_descriptors(count: int) -> None:
    """In the child before exec: a soft descriptor limit of `count` (the hard one stays)."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))


def open_idle(port: int, count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    """`count` connections to loopback `port` that send `first_bytes`, then nothing."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if first_bytes:
            sock.sendall(first_bytes)
        sockets.append(sock)
    return sockets


def closed_by_server(sockets: list[socket.socket], within: float, enough: int | None = None) -> int:
    """How many of `sockets` the server closed (EOF or reset) within `within` seconds; stops
    looking once `enough` are (all, by default)."""
    closed = 0
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            sock.setblocking(False)  # readable may mean TLS records that carry no data (session tickets)
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + within
        while closed < (enough or len(sockets)) and time.monotonic() < deadline:
            for key, _events in selector.select(timeout=0.2):
                try:
                    ended = not key.fileobj.recv(4096)  # type: ignore[union-attr]
                except (BlockingIOError, ssl.SSLWantReadError):
                    ended = False
                except OSError:  # reset
                    ended = True
                if ended:
                    selector.unregister(key.fileobj)
                    closed += 1
    return closed


def series_value(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample `name{labels...}` in exposition text (labels may be a subset)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def sample_value(metrics: Iterable[Metric], name: str, **labels: str) -> float | None:
    """The value of the sample `name{labels}` among collected metrics (labels must match exactly)."""
    for metric in metrics:
        if isinstance(metric, Sample) and metric.name == name and metric.labels == labels:
            return metric.value
    return None


def iter_chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
