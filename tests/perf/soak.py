"""The soak: 72 hours of 5-second collection rounds (51,840 of them), accelerated, run back to
back by the real `serve`, watched from outside as a process and its HTTP.

Time is compressed by one factor for everything the exporter measures in seconds: rounds every
0.1 s instead of 5 s (the exporter's floor), and with them its window (60 s -> 1.2 s), the
diagnosis level and baseline (30 s and 600 s -> 0.6 s and 12 s) and the targets' deadline (the
interval). So each round keeps as much history as a production round does and 51,840 real rounds
take about 90 minutes (`--interval 5` runs the same soak at the production pace, in real hours).
Not compressed: the spans fixed in the code, not in the configuration (the health checks' windows
of minutes to an hour, the time a gone rank is remembered). Those run in real seconds, so their
histories fill over the first real hour (some 40 simulated hours) and hold more rounds than in
production; what they keep is bounded by count as well (exporter/health/history.py).
scripts/test runs `--hours 3` (about 4 minutes) last, alone on the machine. What the rounds read
changes every round:

* the simulator's node (8 vLLM engines on 8 GPUs, dcgm-exporter text, an RDMA sysfs tree),
  restarted with the next of eight scenarios every 90 rounds, so that every hour serves each of
  them once (an hour of queues beside one of idle engines would compare unlike working sets): its
  engines refuse connections a moment and their counters start from zero;
* tests/perf/soak_targets.py's churning engine (values and counters moving, counter resets, models
  replaced), a flapping one, a slow one and a hostile one (see there).

A scraper reads /metrics 20 times a second. Each simulated hour prints the exporter's RSS, open
descriptors, threads, /metrics p99 and collection time. The verdict (tests/perf/drift.py, the same
budgets and rules as the 3-minute soak) compares hour 72 with hour 2 (hour 1 is warm-up: every
behaviour has played in it; hour 2 and the last hour are 720 rounds each, so a p99 there stands on
some 1,400 scrapes). RSS, descriptors and threads are the soaked exporter's own. Latency
and collection time depend on the machine's load at the moment, so their early figures come from a
fresh exporter started for the last two hours (same configuration, targets of its own that tell it
the same story): its hour 2 and the old exporter's last hour run over the same minutes, under the
same load, and the old one's own hour 2 is printed beside them for reference.

Exit status 1 when a figure misses its budget, 2 when a process died or collection stalled. Logs go
to a folder under .cache/soak/, removed after a passing run.

    python tests/perf/soak.py [--hours 72] [--interval 0.1] [--scrapes-per-second 20]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.perf.drift import Window, judge, p99, print_verdicts  # noqa: E402
from tests.perf.soak_harness import (  # noqa: E402
    ENGINES,
    REPO,
    SCENARIOS,
    Exporter,
    Scraper,
    Simulator,
    collect_seconds,
    start_logged,
    work_folder,
)
from tests.perf.soak_targets import CAP_BYTES  # noqa: E402
from tests.support import REQUEST_BOUND_SECONDS, log_tail, stop_group, wait_until_serving  # noqa: E402

ROUND_SECONDS = 5.0  # the production round each real round stands for
HOUR = int(3600 / ROUND_SECONDS)  # rounds in a simulated hour
SAMPLE_ROUNDS = 12  # a simulated minute
RESTART_ROUNDS = HOUR // len(SCENARIOS)  # each hour serves every scenario once
STALL_SECONDS = 60.0
DICTATED = ("slow", "hostile")  # targets whose time the soak sets: left out of collection time
BESIDE = "beside"  # the old exporter's bucket while the fresh one runs its hour 2


def config(targets: dict[str, str], simulator: Simulator, interval: float) -> str:
    """The exporter's configuration, every duration scaled from the production round to `interval`."""
    scale = interval / ROUND_SECONDS
    engines = [(f"engine-{i}", simulator.engine_url(i), "") for i in range(ENGINES)]
    engines += [(f"soak-{kind}", url, "") for kind, url in targets.items() if kind != "hostile"]
    engines.append(("soak-hostile", targets["hostile"], f", max_response_bytes: {CAP_BYTES}"))
    return (
        f"interval_seconds: {interval:g}\n"
        f"window_seconds: {60 * scale:g}\n"
        f"diagnosis: {{level_seconds: {30 * scale:g}, baseline_seconds: {600 * scale:g}}}\n"
        f"engine_defaults: {{timeout_seconds: {interval:g}}}\n"
        "engines:\n"
        + "".join(f"  - {{url: '{url}', name: {name}, type: vllm{extra}}}\n" for name, url, extra in engines)
    )


class Watched:
    """One exporter under the soak: its windows by simulated hour, the last round it was sampled at."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        self.hours: dict[object, Window] = {}
        self.sampled_at = 0
        self.rounds = 0

    def window(self, key: object) -> Window:
        return self.hours.setdefault(key, Window(f"{self.exporter.name}, hour {key}"))

    def sample(self, key: object, scraper: Scraper, also: object = None) -> None:
        rss, fds, threads = self.exporter.figures()
        collect = collect_seconds(scraper.last_text.get(self.exporter.name, ""), DICTATED)
        for window in [self.window(key)] + ([self.window(also)] if also is not None else []):
            window.rss_mb.append(rss)
            window.fds.append(fds)
            window.threads.append(threads)
            window.collect_seconds.append(collect)
        self.sampled_at = self.rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=int, default=72, help="simulated hours of 5 s rounds (at least 3)")
    parser.add_argument(
        "--interval", type=float, default=0.1, help="real seconds a round takes (0.1: the floor; 5: production)"
    )
    parser.add_argument("--scrapes-per-second", type=float, default=20.0, help="per exporter")
    args = parser.parse_args()
    if args.hours < 3:
        parser.error("--hours: at least 3 (a warm-up hour, hour 2, and a last hour)")
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C: the processes are stopped, the logs kept.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with work_folder("soak") as (work, status):
        status[0] = Soak(work, args.hours, args.interval, args.scrapes_per_second).run()
        return status[0]


class Soak:
    """One run: the targets' process, the simulator, the scraper and the watched exporters."""

    def __init__(self, work: Path, hours: int, interval: float, per_second: float) -> None:
        self.work, self.hours, self.interval, self.per_second = work, hours, interval, per_second
        self.total = hours * HOUR
        self.simulator = Simulator(work)
        self.scraper = Scraper(per_second)
        self.watched: dict[str, Watched] = {}
        self.targets: dict[str, dict[str, str]] = {}
        self.rounds_url = ""

    def start_exporter(self, name: str) -> Watched:
        simulator = self.simulator
        args = ("--gpu", f"dcgm-exporter={simulator.gpu_url}", "--sysfs", str(simulator.sysfs))
        exporter = Exporter(name, self.work, config(self.targets[name], simulator, self.interval), *args)
        self.watched[name] = watched = Watched(exporter)
        exporter.wait_ready()
        self.scraper.add(name, exporter.url, 1)
        return watched

    def run(self) -> int:
        ports_file = self.work / "targets.json"
        command = [sys.executable, str(REPO / "tests/perf/soak_targets.py"), "--ports-file", str(ports_file)]
        targets = start_logged([*command, "--deadline", str(self.interval)], self.work / "targets.log")
        try:
            wait_until_serving(targets, ports_file.exists, "soak targets", lambda: log_tail(self.work / "targets.log"))
            described = json.loads(ports_file.read_text())
            self.targets, self.rounds_url = described["sets"], described["rounds_url"]
            self.simulator.start(SCENARIOS[0])
            self.start_exporter("soaked")
            print(
                f"soak: {self.hours} h of {ROUND_SECONDS:g} s rounds = {self.total} rounds, run every "
                f"{self.interval:g} s (~{self.total * self.interval / 60:.0f} min); {ENGINES} simulated engines "
                f"restarted every {RESTART_ROUNDS} rounds + churning, flapping, slow and hostile targets; "
                f"{self.per_second:g} scrapes/s; logs in {self.work}",
                flush=True,
            )
            print(
                f"{'hour':>4} {'rounds':>6} {'rss_mb':>7} {'fds':>4} {'thr':>4} {'p99_ms':>7} {'collect_ms':>10} "
                f"{'rounds/s':>8} {'load1':>5} {'restarts':>8}",
                flush=True,
            )
            self.scraper.start()
            return self.rounds() or self.verdict()
        finally:
            self.scraper.stop_event.set()
            for each in self.watched.values():
                each.exporter.stop()
            self.simulator.stop()
            stop_group(targets)

    def rounds(self) -> int:
        """Round after round until the soaked exporter's last hour and the fresh one's hour 2 are
        done: 0, or 2 when a process died or collection stalled."""
        soaked, watched, scraper = self.watched["soaked"], self.watched, self.scraper
        next_restart, last_progress, hour_started = RESTART_ROUNDS, time.monotonic(), (time.monotonic(), 0)
        while soaked.rounds < self.total or ("control" in watched and watched["control"].rounds < 2 * HOUR):
            time.sleep(0.1)
            counts = requests.get(self.rounds_url, timeout=REQUEST_BOUND_SECONDS).json()
            if counts["soaked"] > soaked.rounds:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_SECONDS:
                print(f"soak: no collection round for {STALL_SECONDS:g} s; see {soaked.exporter.log_path}")
                return 2
            for name, each in watched.items():
                if not each.exporter.alive():
                    code, log = each.exporter.process.returncode, each.exporter.log_path
                    print(f"soak: exporter {name} died (exit {code}); see {log}")
                    return 2
                each.rounds = counts[name]
            control = watched.get("control")
            beside = control is not None and control.rounds // HOUR + 1 == 2
            scraper.bucket["soaked"] = BESIDE if beside else soaked.rounds // HOUR + 1
            if control is not None:
                scraper.bucket["control"] = control.rounds // HOUR + 1
            for name, each in watched.items():
                if each.rounds - each.sampled_at >= SAMPLE_ROUNDS:
                    each.sample(each.rounds // HOUR + 1, scraper, BESIDE if beside and name == "soaked" else None)
            if soaked.rounds >= next_restart:
                try:
                    self.simulator.restart(SCENARIOS[(self.simulator.restarts + 1) % len(SCENARIOS)])
                except RuntimeError as exc:
                    print(f"soak: the simulator did not start again: {exc}")
                    return 2
                next_restart += RESTART_ROUNDS
            hour = soaked.rounds // HOUR
            if hour_started[1] < hour <= self.hours:
                rate = (soaked.rounds - hour_started[1] * HOUR) / (time.monotonic() - hour_started[0])
                self.progress(hour, rate)
                hour_started = (time.monotonic(), hour)
            if control is None and soaked.rounds >= self.total - 2 * HOUR - 60:
                self.start_exporter("control")
        scraper.stop()
        return 0

    def progress(self, hour: int, rate: float) -> None:
        """One line per simulated hour of the soaked exporter."""
        window = self.watched["soaked"].window(hour)
        latencies = self.scraper.taken("soaked", hour) or self.scraper.taken("soaked", BESIDE)
        collect = statistics.median(window.collect_seconds) * 1000 if window.collect_seconds else float("nan")
        print(
            f"{hour:4d} {self.watched['soaked'].rounds:6d} {statistics.fmean(window.rss_mb or [0]):7.1f} "
            f"{statistics.median(window.fds or [0]):4g} {statistics.median(window.threads or [0]):4g} "
            f"{p99(latencies) * 1000:7.2f} {collect:10.2f} {rate:8.2f} {os.getloadavg()[0]:5.2f} "
            f"{self.simulator.restarts:8d}",
            flush=True,
        )

    def verdict(self) -> int:
        soaked, control = self.watched["soaked"], self.watched["control"]
        for name, each in self.watched.items():
            for key, window in each.hours.items():
                window.latencies = self.scraper.taken(name, key)
        leak = (soaked.window(2), soaked.window(self.hours))
        fresh, old = control.window(2), soaked.window(BESIDE)
        fresh.label, old.label = "a fresh exporter's hour 2", f"hour {self.hours}, over the same minutes"
        speed = (fresh, old)
        print(
            f"\nfor reference, the soaked exporter's own hour 2 (other minutes, other load; not judged): "
            f"/metrics p99 {p99(leak[0].latencies) * 1000:.2f} ms over {len(leak[0].latencies)} scrapes, "
            f"collection {statistics.median(leak[0].collect_seconds or [float('nan')]) * 1000:.2f} ms"
        )
        failures = sum(self.scraper.failures.values())
        return print_verdicts(judge(leak, speed, failures), leak, speed)


if __name__ == "__main__":
    sys.exit(main())
