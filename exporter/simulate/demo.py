"""`demo`: a simulated node, the exporter reading it through its ordinary sources, and a live view.

The node runs in this process on a free loopback port (with its sysfs tree in a temporary
directory); the exporter is the real `serve`, started as a subprocess with a generated
configuration file, listening on --listen (127.0.0.1:9477 by default). The view polls the
exporter's /metrics every few seconds. Ctrl-C (or --duration) stops all of it and removes the
temporary files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import requests
import yaml

from exporter.config import parse_listen
from exporter.simulate.companions import start_monitoring, terminate_group
from exporter.simulate.exporter_view import exporter_settings
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import load_scenario
from exporter.simulate.server import SimulationServer
from exporter.simulate.view import parse_exporter_metrics, render_view
from exporter.validation import ConfigError

EXPORTER_INTERVAL_SECONDS = 2.0
READY_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class DemoContext:
    """What a companion process needs to join the demo."""

    exporter_url: str  # http://HOST:PORT of the exporter (its /metrics)
    workdir: Path  # a temporary directory removed when the demo ends


class Companion(Protocol):
    name: str
    url: str

    def stop(self) -> None: ...


# Companion processes started after the exporter and stopped before it: Prometheus with the
# generated rules and Alertmanager, each only where its binary is installed (companions.py).
COMPANIONS: list[Callable[[DemoContext], list[Companion]]] = [
    lambda context: list(start_monitoring(context.exporter_url, context.workdir)),
]


def run_demo(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    host, port = parse_listen(args.listen, "--listen")
    _check_free(host, port, args.listen)
    workdir = Path(tempfile.mkdtemp(prefix="llm-bottleneck-demo-"))
    node = SimulatedNode(scenario, args.seed)
    server = SimulationServer(node, "127.0.0.1", 0, str(workdir / "sys")).start()
    exporter: subprocess.Popen[bytes] | None = None
    companions: list[Companion] = []
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        exporter, log_path = _start_exporter(node, server, workdir, args.listen)
        poll_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        exporter_url = f"http://[{poll_host}]:{port}" if ":" in poll_host else f"http://{poll_host}:{port}"
        if not _wait_ready(exporter, exporter_url, stop):
            if stop.is_set():
                return 130
            sys.stderr.write(f"exporter did not start; its log:\n{log_path.read_text(errors='replace')[-4000:]}")
            return 1
        for factory in COMPANIONS:
            companions.extend(factory(DemoContext(exporter_url, workdir)))
        if not companions:
            print(
                "Prometheus/Alertmanager not installed: the demo runs without rules and pages "
                "(Debian: apt-get install prometheus prometheus-alertmanager)",
                file=sys.stderr,
            )
        _show(node, server, exporter_url, companions, args, stop)
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


def _check_free(host: str, port: int, text: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError("--listen", f"cannot listen on {text}: {exc.strerror or exc}") from exc


def _start_exporter(
    node: SimulatedNode, server: SimulationServer, workdir: Path, listen: str
) -> tuple[subprocess.Popen[bytes], Path]:
    config_path = workdir / "exporter.yaml"
    settings = exporter_settings(node, server.url, server.sysfs_out, EXPORTER_INTERVAL_SECONDS)
    config_path.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    log_path = workdir / "exporter.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "serve", "--config", str(config_path), "--listen", listen],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return process, log_path


def _wait_ready(process: subprocess.Popen[bytes], url: str, stop: threading.Event) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not stop.is_set():
        if process.poll() is not None:
            return False
        try:
            if "llm_engine_up" in requests.get(url + "/metrics", timeout=2).text:
                return True
        except requests.RequestException:
            pass
        stop.wait(0.2)
    return False


def _show(
    node: SimulatedNode,
    server: SimulationServer,
    exporter_url: str,
    companions: list[Companion],
    args: argparse.Namespace,
    stop: threading.Event,
) -> None:
    deadline = None if args.duration is None else time.monotonic() + args.duration
    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
    extra = "".join(f"  {c.name}: {c.url}" for c in companions)
    while not stop.is_set():
        try:
            text = requests.get(exporter_url + "/metrics", timeout=5).text
        except requests.RequestException as exc:
            text = ""
            print(f"exporter not answering: {exc}", file=sys.stderr)
        with server.lock:
            phase, now = node.phase, node.now
        header = (
            f"llm-bottleneck-exporter demo - scenario {node.scenario.name}, simulated t={now:.0f}s, phase "
            f"{phase.name} (expected stage: {phase.expected_stage})\nexporter: {exporter_url}/metrics  "
            f"simulator: {server.url}/{extra}   Ctrl-C stops"
        )
        status = [line for c in companions for line in getattr(c, "status_lines", lambda: [])()]
        body = render_view(parse_exporter_metrics(text), header) + ("\n\n" + "\n".join(status) if status else "")
        sys.stdout.write(clear + body + ("" if clear else "\n"))
        sys.stdout.flush()
        wait = args.refresh
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                return
        stop.wait(wait)
