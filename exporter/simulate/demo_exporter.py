"""The real exporter beside a simulated node, as both demos run it (demo.py, cluster_demo.py).

`serve` in a subprocess of its own session with a generated configuration file, the check that
its --listen address is free before anything starts, and the wait for its first complete
collection.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

import yaml

from exporter.simulate import local_http
from exporter.simulate.exporter_view import exporter_settings
from exporter.simulate.node import SimulatedNode
from exporter.simulate.server import SimulationServer
from exporter.validation import ConfigError

EXPORTER_INTERVAL_SECONDS = 2.0
READY_TIMEOUT_SECONDS = 30.0


class Companion(Protocol):
    """A process beside the exporter (Prometheus, Alertmanager), stopped before it."""

    name: str
    url: str

    def stop(self) -> None: ...


def check_free(host: str, port: int, text: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError("--listen", f"cannot listen on {text}: {exc.strerror or exc}") from exc


def start_exporter(
    node: SimulatedNode,
    server: SimulationServer,
    workdir: Path,
    listen: str,
    interval: float = EXPORTER_INTERVAL_SECONDS,
    overrides: dict[str, object] | None = None,
) -> tuple[subprocess.Popen[bytes], Path]:
    config_path = workdir / "exporter.yaml"
    urls = [server.engine_url(i) for i in range(len(node.replicas))]
    settings = {**exporter_settings(node, server.url, server.sysfs_out, interval, urls), **(overrides or {})}
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


def wait_ready(process: subprocess.Popen[bytes], url: str, stop: threading.Event) -> bool:
    """Until the exporter's first complete collection (/healthz 200): the first round publishes
    partial snapshots while slow sources run, and a frame drawn from one would miss engines."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not stop.is_set():
        if process.poll() is not None:
            return False
        if local_http.answers(url + "/healthz", 2):
            return True
        stop.wait(0.2)
    return False
