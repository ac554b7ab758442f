"""The case review of a demo run: the scenario's phases as `report`'s windows, and the command.

The baseline is the scenario's first phase, the incident the first phase that expects a stage,
the after window the next phase that expects none again; each runs until the next phase begins.
The demo turns the phases' simulated seconds into wall-clock times (its simulator keeps pace with
the clock) and, when it stops, writes the report over its own Prometheus or prints the command
that would (docs/report.md, "The demo's case review").
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from exporter.simulate.scenario import Scenario

NONE = "none"


def phase_windows(scenario: Scenario, end: float) -> dict[str, tuple[float, float]]:
    """Window name -> (start, end) in simulated seconds, for the phases begun before `end`."""
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
        if start < end:
            out[name] = (start, min(stop, end))
    return out


def report_command(prometheus_url: str, windows: dict[str, tuple[float, float]], out: str) -> Sequence[str]:
    """`report` over these windows (Unix seconds), writing `out`: the argv after the program."""
    argv = ["report", "--prometheus", prometheus_url]
    for name, (start, stop) in windows.items():
        argv += [f"--{name}", f"{start:.0f}/{stop:.0f}"]
    return [*argv, "--out", out]


def shell_line(argv: Sequence[str]) -> str:
    return "llm-bottleneck-exporter " + " ".join(shlex.quote(a) for a in argv)
