"""Benchmark: what idle connections and unauthenticated floods do to real scrapes of `serve`.

The findings of the security review ("Hardening"), measured on the real `serve` (no engines,
`--gpu none`) on loopback, each beside a baseline taken in the same run:

1. scrape latency p50/p99 and success rate, a fresh connection per scrape (what Prometheus does
   once its keep-alive connection is gone), with no idle connections and then with 2,000 held
   open by another process, which reopens each one the server closes (at most --reopen-rate a
   second, as an attacker would); once with the server's usual descriptor limit and once with
   `ulimit -n 128` (RLIMIT_NOFILE set in the child), the review's setting. The server's CPU,
   threads and descriptors during the window show that nothing spins and nothing grows;
2. the success rate and latency of authenticated scrapes (basic auth, bcrypt cost 10, a
   rate_limit) while 8 threads from another source address (127.0.0.2) send wrong passwords or
   none, beside the same scrapes without the flood, and the server's CPU meanwhile;
3. the same without basic auth, only a rate_limit (100 a second, burst 100): scrapes from
   127.0.0.1 while 8 threads from 127.0.0.2 flood it, beside the same scrapes without the flood.
   Without credentials the limit is per client address, so the flood spends its own budget.

The exporter serves the node users run (tests/perf/node_under_test.py): 8 vLLM targets whose
values change every scrape, the NVML stand-in's 8 GPUs and 8 RDMA ports, the default 5 s
interval, so each scrape carries a real node's body and some land while a round runs.

Bounded: each window is --seconds long (default 3), the whole run takes about a minute. Numbers on
a shared machine move with its load; the load average is printed.

    python tests/perf/bench_server_hardening.py [--idle 2000] [--seconds 5] [--reopen-rate 1000]
        [--only idle|auth|rate-limit]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import multiprocessing
import os
import resource
import selectors
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(REPO))

import bcrypt  # noqa: E402
import psutil  # noqa: E402

from tests.perf import node_under_test as perf_node  # noqa: E402
from tests.perf.node_under_test import percentile  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402
from tests.support import ExporterProcess  # noqa: E402

USER, PASSWORD = "prometheus", "correct horse battery staple"
SCRAPE_PAUSE_SECONDS = 0.02  # between scrapes: 50 a second, far more often than Prometheus


def raise_descriptor_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


class Window:
    """Scrapes on fresh connections for `seconds`: latencies of the successes, and the failures."""

    def __init__(self, port: int, seconds: float, source: str = "127.0.0.1", authorization: str | None = None):
        self.latencies: list[float] = []
        self.failures: dict[str, int] = {}
        headers = {"Authorization": authorization} if authorization else {}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            outcome = _scrape(port, source, headers)
            if outcome == "200":
                self.latencies.append((time.perf_counter() - started) * 1000)
            else:
                self.failures[outcome] = self.failures.get(outcome, 0) + 1
            time.sleep(SCRAPE_PAUSE_SECONDS)
        self.latencies.sort()

    def answered(self) -> float:
        """% of scrapes answered 200."""
        total = len(self.latencies) + sum(self.failures.values())
        return 100.0 * len(self.latencies) / total if total else 0.0

    def p99(self) -> float | None:
        return percentile(self.latencies, 0.99) if self.latencies else None

    def row(self, label: str) -> str:
        total = len(self.latencies) + sum(self.failures.values())
        ok = self.answered()
        p50 = f"{percentile(self.latencies, 0.5):8.2f}" if self.latencies else "       -"
        p99 = f"{percentile(self.latencies, 0.99):8.2f}" if self.latencies else "       -"
        failed = ", ".join(f"{k}: {v}" for k, v in sorted(self.failures.items())) or "-"
        return f"  {label:<44} {total:6d} {ok:7.1f}% {p50} {p99}   {failed}"


def _scrape(port: int, source: str, headers: dict[str, str]) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        response.read()
        return str(response.status)
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return type(exc).__name__
    finally:
        connection.close()


def hold_idle_connections(port: int, count: int, seconds: float, reopen_rate: float, ready, report) -> None:  # noqa: ANN001
    """In its own process (its own GIL): keep `count` idle connections open for `seconds`."""
    raise_descriptor_limit(count + 256)
    selector = selectors.DefaultSelector()
    opened = failed = 0

    def open_one() -> None:
        nonlocal opened, failed
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
            selector.register(sock, selectors.EVENT_READ)
            opened += 1
        except OSError:
            failed += 1

    for _ in range(count):
        open_one()
    ready.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        closed = 0
        for key, _events in selector.select(timeout=0.05):
            selector.unregister(key.fileobj)
            key.fileobj.close()
            closed += 1
        started = time.monotonic()
        for index in range(closed):  # reopen what the server closed, at most reopen_rate a second
            time.sleep(max(0.0, started + index / reopen_rate - time.monotonic()))
            open_one()
    report.put((opened, failed))
    for key in list(selector.get_map().values()):
        key.fileobj.close()


def server_usage(process: psutil.Process, during: Callable[[], object]) -> tuple[float, int, int, object]:
    """The server's CPU % over `during()`, and its peak threads and descriptors (sampled)."""
    peaks = [0, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            try:
                peaks[0] = max(peaks[0], process.num_threads())
                peaks[1] = max(peaks[1], process.num_fds())
            except psutil.Error:
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu_before, wall_before = sum(process.cpu_times()[:2]), time.monotonic()
    result = during()
    cpu = 100.0 * (sum(process.cpu_times()[:2]) - cpu_before) / (time.monotonic() - wall_before)
    stop.set()
    sampler.join()
    return cpu, peaks[0], peaks[1], result


class NodeServe:
    """`serve` arguments and environment for the node under test, and the table's rows."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    rows: list[Row] = []

    @classmethod
    def exporter(cls, *args: str, **options) -> ExporterProcess:  # type: ignore[no-untyped-def]
        return ExporterProcess(*cls.args, *args, interval=perf_node.DEFAULT_INTERVAL, env=cls.env, **options)

    @classmethod
    def compare(cls, figure: str, loaded: Window, quiet: Window) -> None:
        """Rows: the loaded window's p99 and success rate beside the quiet one's."""
        cls.rows.append(Row(f"{figure}: scrape p99, fresh connection each", loaded.p99(), "ms", quiet.p99()))
        cls.rows.append(
            Row(
                f"{figure}: scrapes answered",
                loaded.answered(),
                "%",
                quiet.answered(),
                "all",
                loaded.answered() == 100.0,
            )
        )


def idle_benchmark(nofile: int | None, idle: int, seconds: float, reopen_rate: float) -> None:
    limit = f"ulimit -n {nofile}" if nofile else f"ulimit -n {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}"
    with NodeServe.exporter(nofile=nofile) as exporter:
        server = psutil.Process(exporter.process.pid)
        cpu, threads, fds, baseline = server_usage(server, lambda: Window(exporter.port, seconds))
        print(baseline.row(f"no idle connections ({limit})"), f"  cpu {cpu:5.1f}%  threads {threads}  fds {fds}")
        ready, report = multiprocessing.Event(), multiprocessing.Queue()
        holder = multiprocessing.Process(
            target=hold_idle_connections, args=(exporter.port, idle, seconds + 1, reopen_rate, ready, report)
        )
        holder.start()
        try:
            if not ready.wait(30):
                raise RuntimeError("the idle connections were not opened within 30 s")
            cpu, threads, fds, loaded = server_usage(server, lambda: Window(exporter.port, seconds))
            opened, failed = report.get(timeout=30)
        finally:
            end_process(holder)
        print(
            loaded.row(f"{idle} idle held open ({limit})"),
            f"  cpu {cpu:5.1f}%  threads {threads}  fds {fds}  (connects {opened}, failed {failed})",
        )
        NodeServe.compare(f"{idle:,} idle connections held open ({limit})", loaded, baseline)


def flood_benchmark(seconds: float, flooders: int) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    good = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "web-config.yml"
        config.write_text(f"basic_auth_users:\n  {USER}: {hashed}\nrate_limit:\n  interval: 10ms\n  burst: 100\n")
        with NodeServe.exporter("--web.config.file", str(config), auth=(USER, PASSWORD)) as exporter:
            scrapes_beside_a_flood(exporter, seconds, flooders, "authenticated", good)


def rate_limit_benchmark(seconds: float, flooders: int) -> None:
    """No basic auth, a rate_limit of 100 a second: does a flood from one address get another's scrapes 429?"""
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "web-config.yml"
        config.write_text("rate_limit:\n  interval: 10ms\n  burst: 100\n")
        with NodeServe.exporter("--web.config.file", str(config)) as exporter:
            scrapes_beside_a_flood(exporter, seconds, flooders, "rate_limit, no auth")


def scrapes_beside_a_flood(
    exporter: ExporterProcess, seconds: float, flooders: int, label: str, authorization: str | None = None
) -> None:
    """A window of scrapes from 127.0.0.1, then another while `flooders` threads flood from 127.0.0.2."""
    server = psutil.Process(exporter.process.pid)
    cpu, _threads, _fds, baseline = server_usage(
        server, lambda: Window(exporter.port, seconds, authorization=authorization)
    )
    print(baseline.row(f"{label}, no flood"), f"  cpu {cpu:5.1f}%")
    ready, report = multiprocessing.Event(), multiprocessing.Queue()
    flood = multiprocessing.Process(
        target=flood_unauthenticated, args=(exporter.port, flooders, seconds + 1, ready, report)
    )
    flood.start()
    try:
        ready.wait(10)
        cpu, _threads, _fds, flooded = server_usage(
            server, lambda: Window(exporter.port, seconds, authorization=authorization)
        )
        answers = report.get(timeout=30)
    finally:
        end_process(flood)
    print(
        flooded.row(f"{label}, {flooders} threads flooding"),
        f"  cpu {cpu:5.1f}%  (flood from 127.0.0.2 got {_counts(answers)})",
    )
    NodeServe.compare(f"{label}, {flooders} threads flooding from another address", flooded, baseline)


def flood_unauthenticated(port: int, flooders: int, seconds: float, ready, report) -> None:  # noqa: ANN001
    """In its own process: `flooders` threads sending no password and wrong ones, for `seconds`."""
    answers: dict[str, int] = {}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def flood(index: int) -> None:
        wrong = {"Authorization": "Basic " + base64.b64encode(f"{USER}:guess{index}".encode()).decode()}
        count = 0
        while time.monotonic() < deadline:
            outcome = _scrape(port, "127.0.0.2", wrong if count % 2 else {})
            count += 1
            with lock:
                answers[outcome] = answers.get(outcome, 0) + 1

    threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(flooders)]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    report.put(answers)


def end_process(process: multiprocessing.Process) -> None:
    """Join a helper process that should be ending on its own; kill it if it has not in 10 s."""
    process.join(timeout=10)
    if process.is_alive():
        process.kill()


def _counts(answers: dict[str, int]) -> str:
    return ", ".join(f"{count} x {outcome}" for outcome, count in sorted(answers.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--reopen-rate", type=float, default=1000.0)
    parser.add_argument("--flooders", type=int, default=8)
    parser.add_argument("--only", choices=("idle", "auth", "rate-limit"), help="run one of the cases alone")
    args = parser.parse_args()
    raise_descriptor_limit(args.idle + 512)
    with perf_node.scratch() as directory:
        node = perf_node.Node(8, perf_node.DEFAULT_INTERVAL, Path(directory)).start()
        try:
            engines = [part for url in node.engine_urls(8) for part in ("--engine", url)]
            NodeServe.args = (*engines, *node.flags, "--gpu", node.gpus)
            NodeServe.env = node.env
            print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; fresh connection per scrape")
            print(f"serve: 8 vLLM targets, values changing every scrape; GPUs: {node.gpus} x 8; RDMA: 8 ports")
            print(f"  {'window':<44} {'scrapes':>6} {'ok':>8} {'p50 ms':>8} {'p99 ms':>8}   failures")
            if args.only in (None, "idle"):
                idle_benchmark(None, args.idle, args.seconds, args.reopen_rate)
                idle_benchmark(128, args.idle, args.seconds, args.reopen_rate)
            if args.only in (None, "auth"):
                flood_benchmark(args.seconds, args.flooders)
            if args.only in (None, "rate-limit"):
                rate_limit_benchmark(args.seconds, args.flooders)
        finally:
            node.close()
    print_rows("bench_server_hardening", NodeServe.rows, "the same serve, same window, without the load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
