"""Test helpers shared by the tiers: loopback HTTP servers that misbehave on purpose, the real
`serve` process, and how the suite waits for and stops the processes it starts.

Everything binds to 127.0.0.1 on a free port and stops itself; nothing reaches past loopback.
"""

from __future__ import annotations

import itertools
import os
import random
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import requests

from exporter.model import Metric, Sample
from exporter.settings import ScrapeLimits

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
ENGINE_FIXTURES = FIXTURES / "engines"

# Bounds on the suite's waits. Each wait returns as soon as its condition holds, so a generous
# bound costs nothing on a quiet machine; on a 2-core machine at load average 25+ a Python process
# took over 20 s to import and serve, and a loopback request seconds. Only a hang exceeds these.
#: a process started by a test, until it serves; a process that exits first fails the wait at once
START_BOUND_SECONDS = 180.0
#: one request to a loopback server of the test's own (a socket timeout, not a measurement)
REQUEST_BOUND_SECONDS = 30.0
#: a scrape deadline a loaded host does not reach, for the tests whose point is not the deadline
#: (the default 2 s was reached by loopback servers at a load of 20 beside a second run)
UNHURRIED_SECONDS = 30.0
UNHURRIED = ScrapeLimits(timeout_seconds=UNHURRIED_SECONDS)
#: a condition the exporter's next collection rounds make true (polled, never slept for)
CONDITION_BOUND_SECONDS = 120.0
#: Set by tests/conftest.py to a value unique to the pytest run, and inherited by every process the
#: run starts (grandchildren included): the session-end sweep finds what a test left behind by it.
SUITE_MARK = "LLM_EXPORTER_TEST_RUN"


#: the ports `free_port` handed out lately: two servers a test starts (an engine and the
#: exporter's OTLP listener) must not get one
_HANDED_OUT: deque[int] = deque(maxlen=256)
_HANDED_OUT_LOCK = threading.Lock()
#: the lowest port `free_port` picks from; it picks below the kernel's ephemeral range
PICK_FROM = 20000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _candidate() -> int:
    """A port to try: at random below the ephemeral range, where a port is free until someone
    binds it by number. Within the range, any process's outgoing connection or port-0 bind may take
    a port between its release here and the server's bind (beside a second run, the simulator's
    was: "Address already in use"). Where that range leaves too little room below it, the kernel's."""
    low = _ephemeral_low()
    if low - PICK_FROM >= 4096:
        return random.randrange(PICK_FROM, low)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port() -> int:
    """A port nothing listens on now and that this process has not handed out lately."""
    with _HANDED_OUT_LOCK:
        while True:
            port = _candidate()
            if port in _HANDED_OUT:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:  # in use, or lingering after a connection closed
                    continue
            _HANDED_OUT.append(port)
            return port


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


def log_tail(path: Path, chars: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"<no log at {path}>"


def wait_until_serving(
    process: subprocess.Popen,
    ready: Callable[[], bool],
    what: str,
    log: Callable[[], str],
    bound: float = START_BOUND_SECONDS,
    poll: float = 0.1,
) -> None:
    """Poll `ready()` until it holds. Follows the process: one that exits first fails at once, with
    `log()`; one still running after `bound` seconds is reported as hung. `ready` raising a
    requests or socket error (nothing listening yet) counts as not ready."""
    deadline = time.monotonic() + bound
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready:\n{log()}")
        try:
            if ready():
                return
        except (requests.RequestException, OSError):
            pass
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{what} still not ready after {bound:g}s, though running (a hang?):\n{log()}")
        time.sleep(poll)


def wait_until(condition: Callable[[], object], what: str, bound: float = CONDITION_BOUND_SECONDS, poll: float = 0.05):
    """Poll until `condition()` returns something true, and return that. A condition that the
    test's own process or its next collection rounds make true; `bound` only catches a hang."""
    deadline = time.monotonic() + bound
    while not (result := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {bound:g}s")
        time.sleep(poll)
    return result


def answers(url: str, auth: tuple[str, str] | None = None, verify: bool | str = True) -> bool:
    """Whether `url` answers 200 (a readiness probe for wait_until_serving)."""
    return requests.get(url, auth=auth, timeout=REQUEST_BOUND_SECONDS, verify=verify).status_code == 200


def group_members(pgid: int) -> list[psutil.Process]:
    """The live (not zombie) processes of process group `pgid`. A zombie counts as alive to
    kill(0), and this machine's init may leave orphans' zombies unreaped for a while."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def stop_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a process started with `start_new_session=True` and everything it started: SIGTERM to
    its group, SIGKILL to whatever of the group is left after `grace` seconds (members that outlive
    their leader included), then reap the leader. Safe after the leader died, and twice."""
    pgid = process.pid
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)
    process.wait()


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
        log_dir: Path | None = None,
    ) -> None:
        """`auth`: basic auth credentials for the readiness checks and `metrics()`; `nofile`: the
        server's descriptor limit (RLIMIT_NOFILE), to see what it does when it runs short;
        `python` and `cwd`: another interpreter (an install under test) and where it starts;
        `log_dir`: where `exporter-<port>.log` goes. By default the temporary directory, which
        under pytest is the run's own (tests/conftest.py); outside pytest (the perf scripts) a
        directory of its own, removed at close."""
        self.auth = auth
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._scratch: Path | None = None
        if log_dir is None and SUITE_MARK in os.environ:
            log_dir = Path(tempfile.gettempdir())
        elif log_dir is None:
            log_dir = self._scratch = Path(tempfile.mkdtemp(prefix="exporter-"))
        self.log_path = log_dir / f"exporter-{self.port}.log"
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

    def wait_ready(self, timeout: float = START_BOUND_SECONDS) -> None:
        """Until /healthz says the first collection completed and /metrics serves; follows the
        process (exited: fail at once with its log), `timeout` only bounds a hang."""

        def ready() -> bool:
            return answers(self.base_url + "/healthz", self.auth) and "llm_exporter_build_info" in self.metrics()

        wait_until_serving(self.process, ready, "exporter", self.log, timeout)

    def metrics(self) -> str:
        return requests.get(self.base_url + "/metrics", auth=self.auth, timeout=REQUEST_BOUND_SECONDS).text

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = CONDITION_BOUND_SECONDS) -> str:
        """Poll /metrics until `predicate(text)` holds; return that text. `timeout` bounds a hang."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.metrics()
            if predicate(text):
                return text
            if time.monotonic() >= deadline:
                raise AssertionError(f"condition not met within {timeout:g}s; last /metrics:\n{text[:4000]}")
            time.sleep(0.1)

    def log(self) -> str:
        self._log.flush()
        return log_tail(self.log_path)

    def close(self) -> None:
        stop_group(self.process)
        self._log.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

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
