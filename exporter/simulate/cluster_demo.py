"""`demo` for a `nodes:` scenario: a simulated cluster, one real exporter per node, the cluster view.

The cluster runs in this process, each node on its own loopback port with its own sysfs tree;
each node gets its own `serve` subprocess configured as the single-node demo configures its one
(engines named after their pods, GPUs attributed through dcgm-exporter's pod labels), the first
on --listen, the others on free ports. Where Prometheus and Alertmanager are installed they
start too, Prometheus scraping every node's exporter with the node's hostname as `instance` and
evaluating the generated rules. The screen (cluster_frame.py) shows one row per node and what the
cluster rules see, from the exporters' /metrics, plus the alerts Prometheus holds.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from exporter.simulate import local_http
from exporter.simulate.cluster import ClusterServer, SimulatedCluster
from exporter.simulate.cluster_frame import NodeReading, node_rows, parse_node, plain_cluster_line, render_cluster
from exporter.simulate.companions import start_monitoring, terminate_group
from exporter.simulate.demo_exporter import Companion, check_free, start_exporter, wait_ready
from exporter.simulate.scenario import Scenario

CLUSTER_EXPORTER_INTERVAL_SECONDS = 5.0
ENGINE_TIMEOUT: dict[str, object] = {"engine_defaults": {"timeout_seconds": 4}}


def _free_listen() -> str:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def run_cluster_demo(args: argparse.Namespace, scenario: Scenario, host: str, port: int) -> int:
    check_free(host, port, args.listen)
    workdir = Path(tempfile.mkdtemp(prefix="llm-bottleneck-cluster-demo-"))
    cluster = SimulatedCluster(scenario, args.seed)
    server = ClusterServer(cluster, "127.0.0.1", 0, str(workdir / "sys")).start()
    exporters: list[tuple[str, str, subprocess.Popen[bytes]]] = []
    companions: list[Companion] = []
    stop = threading.Event()
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in handled}
    try:
        for index, node_server in enumerate(server.nodes):
            hostname = node_server.node.scenario.node.hostname
            listen = args.listen if index == 0 else _free_listen()
            node_dir = workdir / hostname
            node_dir.mkdir()
            # Several nodes share this process (and its GIL): the exporters are given more time per scrape.
            process, _ = start_exporter(
                node_server.node, node_server, node_dir, listen, CLUSTER_EXPORTER_INTERVAL_SECONDS, ENGINE_TIMEOUT
            )
            exporters.append((hostname, "http://" + listen.replace("0.0.0.0", "127.0.0.1"), process))
        for hostname, url, process in exporters:
            if not wait_ready(process, url, stop):
                if stop.is_set():
                    return 130
                log = (workdir / hostname / "exporter.log").read_text(errors="replace")[-4000:]
                sys.stderr.write(f"the exporter of {hostname} did not start; its log:\n{log}")
                return 1
        nodes = {url: hostname for hostname, url, _ in exporters}
        companions.extend(start_monitoring(exporters[0][1], workdir, nodes))
        _show(scenario, cluster, server, exporters, companions, args, stop)
        return 0
    finally:
        for companion in reversed(companions):
            companion.stop()
        for _, _, process in exporters:
            terminate_group(process)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _read(hostname: str, url: str) -> NodeReading:
    return parse_node(hostname, local_http.text(url + "/metrics", 5), time.monotonic())


def _alerts(prometheus_url: str | None) -> list[str]:
    if not prometheus_url:
        return []
    try:
        alerts = local_http.document(prometheus_url + "/api/v1/alerts", 2)["data"]["alerts"]
    except (KeyError, TypeError):
        return []
    names = []
    for alert in alerts:
        labels = alert.get("labels", {})
        where = labels.get("instance", "")
        where += f"/{labels['device']}" if "device" in labels else ""
        state = "" if alert.get("state") == "firing" else " (pending)"
        names.append(f"{labels.get('alertname', '?')} {where}".strip() + state)
    return sorted(set(names))


def _show(
    scenario: Scenario,
    cluster: SimulatedCluster,
    server: ClusterServer,
    exporters: list[tuple[str, str, subprocess.Popen[bytes]]],
    companions: list[Companion],
    args: argparse.Namespace,
    stop: threading.Event,
) -> None:
    urls = {c.name: c.url for c in companions}
    deadline = None if args.duration is None else time.monotonic() + args.duration
    plain = getattr(args, "plain", False) or not sys.stdout.isatty()
    spec = scenario.cluster
    print(
        f"llm-bottleneck-exporter demo: cluster scenario {scenario.name} ({len(exporters)} nodes, "
        f"finds {spec.expect if spec else 'none'})",
        flush=True,
    )
    print(f"simulator index {server.url}/  exporters: " + "  ".join(f"{h} {u}/metrics" for h, u, _ in exporters))
    if urls:
        print("  ".join(f"{name} {url}" for name, url in urls.items()), flush=True)
    else:
        print("Prometheus/Alertmanager not installed: the cluster view only (no rules, no pages)", file=sys.stderr)
    before: list[NodeReading] | None = None
    console = None if plain else Console()
    live = None if console is None else Live(console=console, auto_refresh=False, vertical_overflow="crop")
    if live is not None:
        live.start()
    try:
        while not stop.is_set():
            now = [_read(hostname, url) for hostname, url, _ in exporters]
            rows = node_rows(before, now)
            alerts = _alerts(urls.get("prometheus"))
            first = cluster.nodes[0]
            if live is not None and console is not None:
                width, height = console.size
                phase = first.phase
                title = [
                    f"{scenario.name} t={first.now:.0f}s phase {scenario.phases.index(phase) + 1}/"
                    f"{len(scenario.phases)} {phase.name}",
                    ("  " + phase.note)[:width] if phase.note else f"  {len(rows)} nodes, one exporter each",
                ]
                live.update(Text("\n".join(render_cluster(title, rows, alerts, width, height))), refresh=True)
            else:
                print(plain_cluster_line(first.now, rows, alerts), flush=True)
            before = now
            wait = args.refresh
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return
            stop.wait(wait)
    finally:
        if live is not None:
            live.stop()
