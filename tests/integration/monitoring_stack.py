"""Real Prometheus, Alertmanager and a webhook receiver for the alerting tests, all on loopback.

Each process gets a free 127.0.0.1 port and its own storage under the test's temp dir, logs to a
file whose tail is shown when it fails, and is stopped (its whole process group) in teardown.
A missing binary fails the test with the install command: these tools are part of the test tier.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.support import (
    REPO,
    REQUEST_BOUND_SECONDS,
    START_BOUND_SECONDS,
    answers,
    free_port,
    log_tail,
    stop_group,
    wait_until_serving,
)

LOCAL = REPO / "deploy" / "local"
INSTALL_HINT = (
    "install the Debian packages (scripts/test does): "
    "apt-get install -y --no-install-recommends prometheus prometheus-alertmanager"
)


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: {INSTALL_HINT}", pytrace=False)
    return path


def run_tool(*args: str, cwd: Path = REPO, timeout: float = START_BOUND_SECONDS) -> subprocess.CompletedProcess[str]:
    require_binary(args[0])
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


class WebhookReceiver:
    """Collects Alertmanager webhook notifications (JSON bodies) by path."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    owner.notifications.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def alerts(self, path: str | None = None) -> list[dict[str, Any]]:
        """Every alert of every notification (optionally to one path), with `receiver_path` added."""
        with self._lock:
            received = list(self.notifications)
        return [
            {**alert, "receiver_path": where, "group_labels": body.get("groupLabels", {})}
            for where, body in received
            if path is None or where == path
            for alert in body.get("alerts", [])
        ]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            for alert in self.alerts():
                if predicate(alert):
                    return alert
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.5)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ManagedProcess:
    """A subprocess in its own process group with its output in a log file."""

    def __init__(self, name: str, command: list[str], workdir: Path, ready_url: str) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True, env={**os.environ}
        )
        try:
            wait_until_serving(self.process, lambda: answers(ready_url), f"{name} at {ready_url}", self.log, poll=0.2)
        except BaseException:
            self.close()
            raise

    def log(self) -> str:
        self._log.flush()
        return log_tail(self.log_path, 4000)

    def close(self) -> None:
        stop_group(self.process)
        self._log.close()


class Alertmanager(ManagedProcess):
    def __init__(self, config: dict[str, Any], workdir: Path) -> None:
        binary = require_binary("prometheus-alertmanager")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = workdir / "alertmanager.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        (workdir / "alertmanager-data").mkdir(exist_ok=True)
        super().__init__(
            "alertmanager",
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.path={workdir / 'alertmanager-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            workdir,
            f"{self.url}/-/ready",
        )

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        response = requests.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=REQUEST_BOUND_SECONDS)
        response.raise_for_status()

    def alerts(self) -> list[dict[str, Any]]:
        return requests.get(f"{self.url}/api/v2/alerts", timeout=REQUEST_BOUND_SECONDS).json()


class Prometheus(ManagedProcess):
    def __init__(self, config: dict[str, Any], workdir: Path) -> None:
        binary = require_binary("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        (workdir / "prometheus-data").mkdir(exist_ok=True)
        super().__init__(
            "prometheus",
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            workdir,
            f"{self.url}/-/ready",
        )

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=REQUEST_BOUND_SECONDS)
        response.raise_for_status()
        return response.json()["data"]["result"]

    def rules(self) -> list[dict[str, Any]]:
        response = requests.get(f"{self.url}/api/v1/rules", timeout=REQUEST_BOUND_SECONDS)
        response.raise_for_status()
        return [rule for group in response.json()["data"]["groups"] for rule in group["rules"]]


def alertmanager_config(webhook_url: str, fast: bool = True) -> dict[str, Any]:
    """deploy/local/alertmanager.yml with its webhooks pointed at `webhook_url` and, when `fast`,
    notification delays of a second so a test sees a notification within seconds."""
    config = yaml.safe_load((LOCAL / "alertmanager.yml").read_text(encoding="utf-8"))
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            path = webhook["url"].split("/", 3)[3]
            webhook["url"] = f"{webhook_url}/{path}"
    if fast:
        for route in [config["route"], *config["route"].get("routes", [])]:
            route["group_wait"] = "1s"
            route["group_interval"] = "2s"
    return config
