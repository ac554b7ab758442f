"""Prometheus and Alertmanager beside the demo, when Debian's binaries are installed.

Prometheus scrapes the demo's exporter (and the simulated engines, whose latency histograms the
recording rules prefer, as a Prometheus beside real engines would) and evaluates the rules
`generate` produces, with the paging alerts' `for:` shortened to one minute so a page shows up
while someone watches; its data can be kept for `report` (`demo --prometheus-data DIR`);
Alertmanager receives them and the demo's view lists what is firing. Neither is required: a
missing binary leaves the demo as it was, with a line saying how to add it.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from exporter.monitoring.config import from_mapping
from exporter.monitoring.rule_files import RULES_PATH, alert_files
from exporter.process_group import terminate_group
from exporter.simulate import local_http

log = logging.getLogger(__name__)

#: alerts whose `for:` the demo shortens so they fire within its first minutes
DEMO_FAST_ALERTS = ("LLMDecodeMemoryBandwidthSaturated", "LLMKVCacheSaturated")


@dataclass
class ManagedBinary:
    """A companion process on a loopback port, stopped with its process group."""

    name: str
    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        terminate_group(self.process)

    def status_lines(self) -> list[str]:
        """For Alertmanager: the alerts firing now, one line each."""
        if self.name != "alertmanager":
            return []
        alerts = local_http.document(self.url + "/api/v2/alerts", 2, {"active": "true"})
        if not isinstance(alerts, list):
            return ["alertmanager: not answering"]
        lines = [
            f"  {a['labels'].get('severity', '?'):<8} {a['labels'].get('alertname', '?'):<36} "
            f"{a['labels'].get('engine', a['labels'].get('instance', ''))}"
            for a in alerts
            if a.get("status", {}).get("state") == "active"
        ]
        return ["alerts firing (Alertmanager):", *(sorted(lines) or ["  none"])]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(name: str, command: list[str], url: str, ready_path: str, workdir: Path) -> ManagedBinary | None:
    log_file = open(workdir / f"{name}.log", "wb")
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if local_http.answers(url + ready_path, 1):
            return ManagedBinary(name, url, process)
        time.sleep(0.2)
    ManagedBinary(name, url, process).stop()
    log.warning("%s did not start; see %s", name, workdir / f"{name}.log")
    return None


def start_alertmanager(workdir: Path) -> ManagedBinary | None:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        return None
    port = _free_port()
    config = {
        "route": {
            "receiver": "demo",
            "group_by": ["alertname", "engine"],
            "group_wait": "5s",
            "group_interval": "10s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": "demo"}],
    }
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    storage = workdir / "alertmanager-data"
    storage.mkdir(exist_ok=True)
    command = [
        binary,
        f"--config.file={path}",
        f"--storage.path={storage}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    return _start("alertmanager", command, f"http://127.0.0.1:{port}", "/-/ready", workdir)


def start_prometheus(
    workdir: Path,
    exporter_url: str,
    alertmanager_url: str | None,
    nodes: dict[str, str] | None = None,
    engines: Sequence[str] = (),
    storage: Path | None = None,
) -> ManagedBinary | None:
    """Prometheus over the exporter at `exporter_url`, or over one exporter per node (`nodes`:
    exporter URL -> the node's name, its `instance` label) for a simulated cluster, and over the
    engines' own /metrics URLs; its TSDB in `storage` (kept by the caller) or in `workdir`."""
    binary = shutil.which("prometheus")
    if binary is None:
        return None
    port = _free_port()
    monitoring = from_mapping({"alerts": {name: {"for": "1m"} for name in DEMO_FAST_ALERTS}})
    rules = workdir / "llm-bottleneck.rules.yaml"
    rules.write_text(alert_files(monitoring)[RULES_PATH])
    config: dict = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "llm-bottleneck-exporter",
                "static_configs": [{"targets": [urlsplit(exporter_url).netloc]}]
                if nodes is None
                else [{"targets": [urlsplit(url).netloc], "labels": {"instance": name}} for url, name in nodes.items()],
            }
        ],
    }
    if engines:
        config["scrape_configs"].append(
            {
                "job_name": "llm-engines",
                # The simulated engines share one address: each its own `instance` (the engine's
                # identity in its series, vLLM's `vllm:cache_config_info` for one).
                "static_configs": [
                    {
                        "targets": [urlsplit(url).netloc],
                        "labels": {
                            "__metrics_path__": urlsplit(url).path,
                            "instance": urlsplit(url).netloc + urlsplit(url).path,
                        },
                    }
                    for url in engines
                ],
            }
        )
    if alertmanager_url:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [urlsplit(alertmanager_url).netloc]}]}]}
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    storage = storage or workdir / "prometheus-data"
    storage.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        f"--config.file={path}",
        f"--storage.tsdb.path={storage}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    return _start("prometheus", command, f"http://127.0.0.1:{port}", "/-/ready", workdir)


def start_monitoring(
    exporter_url: str,
    workdir: Path,
    nodes: dict[str, str] | None = None,
    engines: Sequence[str] = (),
    storage: Path | None = None,
) -> list[ManagedBinary]:
    """Alertmanager, then Prometheus pointed at it; whichever binaries this machine has."""
    started: list[ManagedBinary] = []
    alertmanager = start_alertmanager(workdir)
    if alertmanager is not None:
        started.append(alertmanager)
    alertmanager_url = alertmanager.url if alertmanager else None
    prometheus = start_prometheus(workdir, exporter_url, alertmanager_url, nodes, engines, storage)
    if prometheus is not None:
        started.append(prometheus)
    return started
