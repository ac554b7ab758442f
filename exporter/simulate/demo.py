"""`demo`: a simulated node, the exporter reading it through its ordinary sources, and a live view.

The node runs in this process on a free loopback port (with its sysfs tree in a temporary
directory); the exporter is the real `serve`, started as a subprocess with a generated
configuration file, listening on --listen (127.0.0.1:9477 by default). The view polls the
exporter's /metrics and /diagnosis every few seconds and redraws one screen (frame.py), or prints
one line per frame when stdout is not a terminal. Ctrl-C (or --duration) stops all of it and
removes the temporary files.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live

from exporter.config import parse_listen
from exporter.simulate import local_http
from exporter.simulate.case_review import check_case_review, close_case_review, with_full_baseline
from exporter.simulate.companions import start_monitoring, terminate_group
from exporter.simulate.demo_exporter import (
    EXPORTER_INTERVAL_SECONDS,
    Companion,
    check_free,
    start_exporter,
    wait_ready,
)
from exporter.simulate.exporter_view import window_seconds
from exporter.simulate.frame import DemoStatus, Page, plain_line, render_frame, try_commands
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import Phase, Scenario, load_scenario
from exporter.simulate.server import SimulationServer
from exporter.simulate.view import ExporterReading, parse_exporter_metrics


@dataclass(frozen=True)
class DemoContext:
    """What a companion process needs to join the demo."""

    exporter_url: str  # http://HOST:PORT of the exporter (its /metrics)
    workdir: Path  # a temporary directory removed when the demo ends
    engine_urls: tuple[str, ...] = ()  # the simulated engines' own /metrics
    prometheus_data: Path | None = None  # where Prometheus keeps its data after the demo (--prometheus-data)


# Companion processes started after the exporter and stopped before it: Prometheus with the
# generated rules and Alertmanager, each only where its binary is installed (companions.py).
COMPANIONS: list[Callable[[DemoContext], list[Companion]]] = [
    lambda context: list(
        start_monitoring(
            context.exporter_url, context.workdir, engines=context.engine_urls, storage=context.prometheus_data
        )
    ),
]


def run_demo(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    host, port = parse_listen(args.listen, "--listen")
    if scenario.cluster is not None:
        from exporter.simulate.cluster_demo import run_cluster_demo

        return run_cluster_demo(args, scenario, host, port)
    check_free(host, port, args.listen)
    check_case_review(args, scenario)
    if args.report or args.prometheus_data:
        scenario = with_full_baseline(scenario)
        first = scenario.phases[0]
        print(f"case review: the {first.name} phase runs its whole length in real time, for a baseline", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="llm-bottleneck-demo-"))
    node = SimulatedNode(scenario, args.seed)
    server = SimulationServer(node, "127.0.0.1", 0, str(workdir / "sys")).start()
    exporter: subprocess.Popen[bytes] | None = None
    companions: list[Companion] = []
    stop = threading.Event()
    # SIGHUP too: closing the terminal must stop the exporter, Prometheus and Alertmanager, which
    # run in their own sessions and would otherwise outlive the demo.
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in handled}
    try:
        exporter, log_path = start_exporter(node, server, workdir, args.listen)
        poll_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        exporter_url = f"http://[{poll_host}]:{port}" if ":" in poll_host else f"http://{poll_host}:{port}"
        if not wait_ready(exporter, exporter_url, stop):
            if stop.is_set():
                return 130
            sys.stderr.write(f"exporter did not start; its log:\n{log_path.read_text(errors='replace')[-4000:]}")
            return 1
        engine_urls = tuple(f"{server.url}/engine/{i}/metrics" for i in range(len(node.replicas)))
        data = Path(args.prometheus_data) if args.prometheus_data else None
        for factory in COMPANIONS:
            companions.extend(factory(DemoContext(exporter_url, workdir, engine_urls, data)))
        if not companions:
            print(
                "Prometheus/Alertmanager not installed: the demo runs without rules and pages "
                "(Debian: apt-get install prometheus prometheus-alertmanager)",
                file=sys.stderr,
            )
        _show(node, server, exporter_url, companions, args, stop, workdir / "stderr.log")
        with server.lock:
            now = node.now
        prometheus = next((c.url for c in companions if c.name == "prometheus"), None)
        close_case_review(args, scenario, server.started_wall, now, prometheus)
        return 0
    finally:
        for companion in reversed(companions):
            companion.stop()
        if exporter is not None:
            terminate_group(exporter)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _show(
    node: SimulatedNode,
    server: SimulationServer,
    exporter_url: str,
    companions: list[Companion],
    args: argparse.Namespace,
    stop: threading.Event,
    stderr_log: Path,
) -> None:
    """Redraw one screen in place on a terminal; print one line per frame otherwise (or with --plain)."""
    deadline = None if args.duration is None else time.monotonic() + args.duration
    urls = {c.name: c.url for c in companions}
    plain = getattr(args, "plain", False) or not sys.stdout.isatty()
    with server.lock:
        watched_since = node.now  # the exporter has collected since just before: its window starts here

    def frames() -> Iterator[tuple[DemoStatus, ExporterReading, dict | None]]:
        while not stop.is_set():
            reading, diagnosis = _read_exporter(exporter_url)
            with server.lock:
                phase, now = node.phase, node.now
            yield _status(node.scenario, phase, now, exporter_url, server.url, urls, watched_since), reading, diagnosis
            wait = args.refresh
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return
            stop.wait(wait)

    scenario = node.scenario
    print(f"llm-bottleneck-exporter demo: scenario {scenario.name} ({scenario.stages_text})", flush=True)
    if plain:
        first = True
        for status, reading, diagnosis in frames():
            if first:
                print(_introduction(status, urls), flush=True)
                first = False
            print(plain_line(status, reading, diagnosis), flush=True)
        return
    with server.lock:
        print(_introduction(_status(scenario, node.phase, node.now, exporter_url, server.url, {}), urls), flush=True)
    console = Console()
    # A line written below a full-height screen would scroll it: while it is drawn, warnings and
    # tracebacks from the threads go to a file and are shown when the screen is gone.
    with (
        _stderr_to(stderr_log),
        Live(console=console, auto_refresh=False, vertical_overflow="crop", redirect_stderr=False) as live,
    ):
        for status, reading, diagnosis in frames():
            width, height = console.size
            live.update(Group(*render_frame(status, reading, diagnosis, width, height)), refresh=True)
    if stderr_log.exists():
        sys.stderr.write(summarize_stderr(stderr_log.read_text(errors="replace")))


#: how Python's socketserver frames the traceback of a request that failed
_REQUEST_FAILURE_RULE = "-" * 40


def summarize_stderr(text: str) -> str:
    """What went to stderr while the screen was drawn, for after it: a count of the requests a
    client dropped mid-way (the exporter's scrape timing out on a loaded machine reads as a
    connection reset in the simulator), and the last lines of anything else."""
    dropped, other = 0, []
    for index, block in enumerate(text.split(_REQUEST_FAILURE_RULE)):
        lines = [line for line in block.splitlines() if line.strip()]
        if index % 2 and lines and lines[-1].startswith(("ConnectionResetError", "BrokenPipeError")):
            dropped += 1
        else:
            other += lines
    out = f"while the screen was drawn, {dropped} requests to the simulator were dropped by their client\n"
    out = out if dropped else ""
    if other:
        out += f"while the screen was drawn, {len(other)} lines went to stderr; the last ones:\n"
        out += "\n".join(other[-20:]) + "\n"
    return out


def _introduction(status: DemoStatus, urls: dict[str, str]) -> str:
    links = f"exporter {status.exporter_url}/metrics  simulator {status.simulator_url}/"
    links += "".join(f"  {name} {url}" for name, url in urls.items())
    return links + "\nwhile it runs, try: " + "\n                    ".join(try_commands(status))


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """sys.stderr and the logging handlers that write to it, into `path` for the duration."""
    original = sys.stderr
    handlers = [
        h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler) and h.stream is original
    ]
    with open(path, "w", encoding="utf-8") as log_file:
        sys.stderr = log_file
        for handler in handlers:
            handler.setStream(log_file)
        try:
            yield
        finally:
            sys.stderr = original
            for handler in handlers:
                handler.setStream(original)


def _read_exporter(exporter_url: str) -> tuple[ExporterReading, dict | None]:
    """The exporter's /metrics (parsed) and /diagnosis; empty or None where it does not answer."""
    text = local_http.text(exporter_url + "/metrics", 5)
    reading = parse_exporter_metrics(text) if text is not None else ExporterReading()
    diagnosis = local_http.document(exporter_url + "/diagnosis", 5)
    return reading, diagnosis if isinstance(diagnosis, dict) else None


def _status(
    scenario: Scenario,
    phase: Phase,
    now: float,
    exporter_url: str,
    simulator_url: str,
    urls: dict[str, str],
    watched_since: float | None = None,
) -> DemoStatus:
    """`watched_since`: the simulated second the exporter began collecting (None: not yet)."""
    alertmanager, prometheus = urls.get("alertmanager"), urls.get("prometheus")
    return DemoStatus(
        scenario=scenario.name,
        simulated_seconds=now,
        phase=phase.name,
        phase_number=scenario.phases.index(phase) + 1,
        phase_count=len(scenario.phases),
        expected_stage=phase.expected_stage,
        secondary_stages=phase.secondary_stages,
        note=phase.note,
        exporter_url=exporter_url,
        simulator_url=simulator_url,
        prometheus_url=prometheus,
        alertmanager_url=alertmanager,
        pages=_firing_pages(alertmanager) if alertmanager else None,
        pending_alerts=_pending_alerts(prometheus) if prometheus else (),
        rdma_idle_reason=rdma_idle_reason(scenario, phase),
        phase_seen_seconds=now - max(phase.start_seconds, watched_since) if watched_since is not None else 0.0,
        window_seconds=window_seconds(EXPORTER_INTERVAL_SECONDS),
        expected_by_role=phase.expected_by_role,
        engine_type=scenario.disaggregation.engine_type if scenario.disaggregation else "vllm",
    )


def rdma_idle_reason(scenario: Scenario, phase: Phase) -> str:
    """Why the RDMA ports read zero: traffic comes only from TP groups spanning nodes or others' load."""
    spans_nodes = any(group.nodes > 1 for group in scenario.replicas)
    if not spans_nodes and not any(p.network.background_utilization > 0 for p in scenario.phases):
        return "no cross-node traffic in this scenario"
    return "no cross-node traffic in this phase"


def _firing_pages(alertmanager_url: str) -> tuple[Page, ...] | None:
    alerts = local_http.document(alertmanager_url + "/api/v2/alerts", 2, {"active": "true"})
    if not isinstance(alerts, list):
        return None
    return tuple(
        Page(a["labels"].get("alertname", "?"), a["labels"].get("severity", "?"), a["labels"].get("engine", ""))
        for a in alerts
        if isinstance(a, dict) and a.get("status", {}).get("state") == "active" and isinstance(a.get("labels"), dict)
    )


def _pending_alerts(prometheus_url: str) -> tuple[str, ...]:
    """Alerts Prometheus holds in their `for:` (they page when it has passed)."""
    try:
        alerts = local_http.document(prometheus_url + "/api/v1/alerts", 2)["data"]["alerts"]
    except (KeyError, TypeError):
        return ()
    pending = [a for a in alerts if isinstance(a, dict) and a.get("state") == "pending"]
    return tuple(str(a.get("labels", {}).get("alertname", "?")) for a in pending)
