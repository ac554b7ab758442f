"""The parts the soak drives (tests/perf/soak.py): a work folder that
only a failed run keeps, the simulator, `serve` as a black box (a process and its HTTP), and a
scraper that reads /metrics the way Prometheus does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import requests
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.image_env import IMAGE_ENV  # noqa: E402
from tests.support import (  # noqa: E402
    REQUEST_BOUND_SECONDS,
    answers,
    free_port,
    log_tail,
    stop_group,
    wait_until_serving,
)

SCENARIOS = (
    "healthy",
    "queue-overload",
    "kv-cache-saturation",
    "decode-bandwidth",
    "host-overhead",
    "prefill-long-prompts",
    "prompt-growth",
    "admission-limit",
)
ENGINES = 8  # the simulator's node: 8 vLLM engines on 8 GPUs


@contextmanager
def work_folder(name: str) -> Iterator[tuple[Path, list[int]]]:
    """A folder under the clone's .cache/soak/ for a run's logs, configuration and sysfs tree,
    and a one-item status list the run sets: removed when the status is 0, kept (and named) for
    a failed or interrupted run. Nothing goes to the shared temporary directory."""
    path = REPO / ".cache" / "soak" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path.mkdir(parents=True)
    status = [1]
    try:
        yield path, status
    finally:
        if status[0] == 0:
            shutil.rmtree(path, ignore_errors=True)
        else:
            print(f"soak: logs kept in {path}", flush=True)


def start_logged(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )


class Simulator:
    """`exporter simulate` on one port; `restart` with another scenario stops it (its engines
    refuse connections for a moment) and starts it again (every counter starts from zero)."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.sysfs = work / "sysfs"
        self.log_path = work / "simulator.log"
        self.process: subprocess.Popen | None = None
        self.restarts = 0

    def engine_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.port}/engine/{index}/metrics"

    @property
    def gpu_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/gpu/metrics"

    def start(self, scenario: str) -> None:
        command = [sys.executable, "-m", "exporter", "simulate", "--scenario", scenario]
        command += ["--listen", f"127.0.0.1:{self.port}", "--sysfs-out", str(self.sysfs)]
        self.process = start_logged(command, self.log_path)
        wait_until_serving(self.process, lambda: answers(self.engine_url(0)), "simulator", self.log, poll=0.05)

    def restart(self, scenario: str) -> None:
        self.stop()
        self.start(scenario)
        self.restarts += 1

    def log(self) -> str:
        return log_tail(self.log_path)

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process)


class Exporter:
    """`exporter serve` with a configuration file, watched from outside: its process figures and
    its /metrics; nothing of its internals."""

    def __init__(self, name: str, work: Path, config: str, *args: str) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.log_path = work / f"exporter-{name}.log"
        (work / f"exporter-{name}.yaml").write_text(config, encoding="utf-8")
        command = [sys.executable, "-m", "exporter", "serve", "--config", str(work / f"exporter-{name}.yaml")]
        command += ["--listen", f"127.0.0.1:{self.port}", "--log-level", "warning", *args]
        self.process = start_logged(command, self.log_path, {**os.environ, **IMAGE_ENV})
        self._ps = psutil.Process(self.process.pid)

    def wait_ready(self) -> None:
        def ready() -> bool:
            healthz = self.url.replace("/metrics", "/healthz")
            return answers(healthz) and "llm_engine_up" in requests.get(self.url, timeout=REQUEST_BOUND_SECONDS).text

        wait_until_serving(self.process, ready, f"exporter {self.name}", lambda: log_tail(self.log_path))

    def alive(self) -> bool:
        return self.process.poll() is None

    def figures(self) -> tuple[float, int, int]:
        """RSS in MB, open descriptors, threads."""
        with self._ps.oneshot():
            return self._ps.memory_info().rss / 2**20, self._ps.num_fds(), self._ps.num_threads()

    def stop(self) -> None:
        stop_group(self.process)


def collect_seconds(text: str, dictated: tuple[str, ...] = ()) -> float:
    """The sum of llm_exporter_collect_duration_seconds over the sources that answered, leaving out
    targets whose time the soak dictates (a target named with one of `dictated` in its label) and
    sources down in that collection: a source that timed out took its deadline, which the target
    set (a starved simulator), not the exporter's own work, and each would move the median by a
    whole deadline."""
    durations: dict[tuple[tuple[str, str], ...], float] = {}
    down: set[tuple[tuple[str, str], ...]] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            if sample.name == "llm_exporter_collect_duration_seconds":
                if not any(word in sample.labels.get("target", "") for word in dictated):
                    durations[key] = sample.value
            elif sample.name == "llm_exporter_source_up" and sample.value != 1.0:
                down.add(key)
    return sum(value for key, value in durations.items() if key not in down)


class Scraper(threading.Thread):
    """GETs each registered exporter's /metrics at `per_second` a second, in turn, each over its
    own kept-alive connection (gzip accepted, as Prometheus asks). Each latency goes to the bucket
    its exporter's `bucket` names at that moment (a window of the run); failures are counted."""

    def __init__(self, per_second: float) -> None:
        super().__init__(name="scraper", daemon=True)
        self.per_second = per_second
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.targets: dict[str, tuple[str, requests.Session]] = {}
        self.bucket: dict[str, object] = {}
        self.latencies: dict[tuple[str, object], list[float]] = {}
        self.last_text: dict[str, str] = {}
        self.failures: dict[str, int] = {}

    def add(self, name: str, url: str, bucket: object) -> None:
        with self.lock:
            self.targets[name] = (url, requests.Session())
            self.bucket[name] = bucket
            self.failures.setdefault(name, 0)

    def remove(self, name: str) -> None:
        with self.lock:
            self.targets.pop(name, None)

    def taken(self, name: str, bucket: object) -> list[float]:
        with self.lock:
            return list(self.latencies.get((name, bucket), []))

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            with self.lock:
                targets = list(self.targets.items())
            for name, (url, session) in targets:
                started = time.perf_counter()
                try:
                    response = session.get(url, timeout=REQUEST_BOUND_SECONDS)
                    ok = response.status_code == 200 and bool(response.text)
                except requests.RequestException:
                    ok = False
                elapsed = time.perf_counter() - started
                with self.lock:
                    if ok:
                        self.latencies.setdefault((name, self.bucket[name]), []).append(elapsed)
                        self.last_text[name] = response.text
                    elif name in self.targets:  # not one stopped while its scrape was on the way
                        self.failures[name] += 1
            next_at += 1.0 / self.per_second
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
            else:
                self.stop_event.wait(delay)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)
