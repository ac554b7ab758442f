"""The case review of a demo run: the scenario's phases as `report`'s windows, and the command.

The baseline is the scenario's first phase, the incident the first phase that expects a stage,
the after window the next phase that expects none again; each runs until the next phase begins.
The demo turns the phases' simulated seconds into wall-clock times (its simulator keeps pace with
the clock) and, when it stops, writes the report over its own Prometheus or prints the command
that would (docs/report.md, "The demo's case review").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from exporter.report.extra import missing_report_extra
from exporter.simulate.scenario import Scenario
from exporter.validation import ConfigError

#: A case review of a demo run takes seconds; a loaded machine, tens of them.
REPORT_TIMEOUT_SECONDS = 300

NONE = "none"


def phase_windows(scenario: Scenario, end: float, begin: float = 0.0) -> dict[str, tuple[float, float]]:
    """Window name -> (start, end) in simulated seconds, for the phases begun before `end`; none
    starts before `begin` (the demo's: the end of the fast-forwarded warm-up, where real time starts)."""
    phases = scenario.phases
    bounds = [
        (p.start_seconds, phases[i + 1].start_seconds if i + 1 < len(phases) else end) for i, p in enumerate(phases)
    ]
    out: dict[str, tuple[float, float]] = {}
    incident = next((i for i, p in enumerate(phases) if p.expected_stage != NONE), None)
    if incident is None or incident == 0:
        return out
    after = next((i for i in range(incident + 1, len(phases)) if phases[i].expected_stage == NONE), None)
    for name, index in (("baseline", 0), ("incident", incident), ("after", after)):
        if index is None:
            continue
        start, stop = bounds[index]
        if max(start, begin) < min(stop, end):
            out[name] = (max(start, begin), min(stop, end))
    return out


def with_full_baseline(scenario: Scenario) -> Scenario:
    """The scenario with every phase after the first moved later by its warm-up.

    The simulator fast-forwards `warmup_seconds` of the first phase before it answers (queues and
    caches in their steady state), which leaves the demo's baseline a short stretch of real time
    (prompt-growth: 30 s of its 120, of which Prometheus, started after the exporter, holds about
    15 s: less than `report` can judge). For a case review the first phase runs its whole length
    in real time after the warm-up.
    """
    shift = scenario.warmup_seconds
    phases = tuple(
        p if i == 0 else dataclasses.replace(p, start_seconds=p.start_seconds + shift)
        for i, p in enumerate(scenario.phases)
    )
    return dataclasses.replace(scenario, phases=phases, duration_seconds=scenario.duration_seconds + shift)


def report_command(prometheus_url: str, windows: dict[str, tuple[float, float]], out: str) -> list[str]:
    """`report` over these windows (Unix seconds), writing `out`: the argv after the program."""
    argv = ["report", "--prometheus", prometheus_url]
    for name, (start, stop) in windows.items():
        # Whole seconds inside the span (an end rounded up would lie in the future at the stop).
        argv += [f"--{name}", f"{math.ceil(start)}/{math.floor(stop)}"]
    return [*argv, "--out", out]


def shell_line(argv: Sequence[str]) -> str:
    return "llm-bottleneck-exporter " + " ".join(shlex.quote(a) for a in argv)


def add_case_review_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="when the demo stops, write the case review of the run (`report` over its Prometheus, the phases as "
        "windows) to FILE (.html, .md or .json); needs Prometheus and the report extra",
    )
    parser.add_argument(
        "--prometheus-data",
        metavar="DIR",
        help="keep Prometheus's data in DIR after the demo, and print how to read the case review from it",
    )


def check_case_review(args: argparse.Namespace, scenario: Scenario) -> None:
    """Before the demo starts: what --report and --prometheus-data need (ConfigError otherwise)."""
    flag = "--report" if args.report else "--prometheus-data" if args.prometheus_data else None
    if flag is None:
        return
    if scenario.cluster is not None:
        raise ConfigError(flag, "the case review covers one node: not for a cluster scenario")
    if shutil.which("prometheus") is None:
        raise ConfigError(flag, "needs Prometheus on the PATH (Debian: apt-get install prometheus)")
    if args.report and (missing := missing_report_extra()):
        raise ConfigError("--report", missing)


def close_case_review(
    args: argparse.Namespace, scenario: Scenario, sim_origin: float, sim_now: float, prometheus_url: str | None
) -> None:
    """When the demo stops: write the case review (--report), say how to read it again from the
    kept data (--prometheus-data), or how to ask for one. `sim_origin` is the wall-clock time of
    simulated second 0 (the simulator keeps pace with the clock from there)."""
    if prometheus_url is None:
        return
    if not (args.report or args.prometheus_data):
        print("for the case review of a run: demo --report case-review.html [--prometheus-data DIR]", flush=True)
        return
    spans = phase_windows(scenario, sim_now, scenario.warmup_seconds)
    windows = {name: (sim_origin + a, sim_origin + b) for name, (a, b) in spans.items()}
    if "incident" not in windows:
        print("the demo stopped before its incident phase: no case review", flush=True)
        return
    if args.report:
        windows = _write(prometheus_url, windows, args.report)
    if args.prometheus_data:
        data = Path(args.prometheus_data).resolve()
        print(f"Prometheus's data is kept in {data}; to read the case review of this run again:", flush=True)
        print(
            f"  prometheus --config.file=/dev/null --storage.tsdb.path={shlex.quote(str(data))} "
            "--storage.tsdb.retention.time=10y --web.listen-address=127.0.0.1:9090 &\n"
            "  " + shell_line(report_command("http://127.0.0.1:9090", windows, args.report or "case-review.html")),
            flush=True,
        )


def _write(prometheus_url: str, windows: dict[str, tuple[float, float]], out: str) -> dict[str, tuple[float, float]]:
    """Run `report` as the printed command runs it (its own process: the demo does not import the
    report's libraries); an after window too short to judge (the demo stopped soon after the
    remedy) is dropped and the report written without it. Returns the windows used."""
    print(f"writing the case review of this run to {out} ...", flush=True)
    for attempt in (windows, {k: v for k, v in windows.items() if k != "after"}):
        argv = report_command(prometheus_url, attempt, out)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "exporter", *argv],
                capture_output=True,
                text=True,
                timeout=REPORT_TIMEOUT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            print(f"no case review: report took more than {REPORT_TIMEOUT_SECONDS} s", flush=True)
            return windows
        if done.returncode == 0:
            print(f"case review of this run written to {out}:\n  {shell_line(argv)}", flush=True)
            return attempt
        error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        error = error.split("error: ", 1)[-1]
        if attempt is windows and "after" in windows and error.startswith("--after:"):
            print(f"case review without the after window: {error}", flush=True)
            continue
        print(f"no case review: {error}", flush=True)
        return windows
    return windows
