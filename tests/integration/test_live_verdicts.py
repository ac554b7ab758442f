"""Verdicts that hold in real time: every built-in scenario served live, read by a real `serve`.

The fast-forwarded tests run the exporter on the simulator's clock; here the simulator follows the
wall clock (`simulate --scenario FILE`) and the exporter is the real `serve` subprocess with the
configuration the demo uses (`exporter_settings`), polled on `/diagnosis` as a user would. Each
scenario is compressed to its first two phases: 100 s of the first (after `warmup_seconds` is
fast-forwarded) and 120 s of the second. A read counts once the exporter's 60 s window has filled
in its phase; then every engine must read the phase's expected stage in >= 85 % of the reads of an
incident phase and `none` in >= 95 % of a healthy one. A second `serve` reads the same simulator
with plain CLI flags (its file holds only the scrape deadline) and no GPU attribution: there no
engine of a multi-engine node may take the node's unattributed GPUs for its own, the evidence must
say they are read node-wide, and the verdicts must hold as well (docs/diagnosis.md, "GPUs no engine
is tied to"). Scenarios run AT_ONCE at a time (about 4 minutes each batch).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path

import pytest
import requests
import yaml

from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import exporter_settings
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import builtin_names
from tests.support import REPO, REQUEST_BOUND_SECONDS, answers, free_port, log_tail, stop_group, wait_until_serving

pytestmark = pytest.mark.integration

LIVE_BASELINE_SECONDS = 100.0
LIVE_INCIDENT_SECONDS = 120.0
WINDOW_SECONDS = 60.0  # the exporter's quantile window (exporter_settings: max(60, 4 x interval))
INTERVAL_SECONDS = 5.0
POLL_SECONDS = 5.0
MAX_MISSES = 12
#: scenarios run at once: each is a simulator serving its node in real time and two exporters, and
#: two cores beside the vLLM tier starve every one of them when all run together
AT_ONCE = int(os.environ.get("LIVE_VERDICT_AT_ONCE", "6"))
# One simulator process serves a node's eight engines; on a machine shared with a whole test tier it
# can be starved past the 2 s default deadline for a minute, and every engine reads as down. What is
# tested is the verdicts, not the deadline: scrapes get room.
ROOMY = {"engine_defaults": {"timeout_seconds": REQUEST_BOUND_SECONDS}}
NO_VERDICT_STATES = ("asleep", "loading", "warming_up")


def compressed(name: str) -> tuple[str, float]:
    """The scenario's first two phases, the warmup ending LIVE_BASELINE_SECONDS before the second;
    and the simulated time the live run ends. A one-phase scenario runs LIVE_INCIDENT_SECONDS live."""
    text = resources.files("exporter.simulate").joinpath("scenarios", f"{name}.yaml").read_text()
    data = yaml.safe_load(text)
    data["phases"] = data["phases"][:2]
    if len(data["phases"]) == 1:
        return text, float(data.get("warmup_seconds", 60)) + LIVE_INCIDENT_SECONDS
    # A second phase that starts early is moved later, so that the first still gets its live minutes.
    onset = max(float(data["phases"][1]["start_seconds"]), LIVE_BASELINE_SECONDS)
    data["phases"][1]["start_seconds"] = onset
    data["warmup_seconds"] = onset - LIVE_BASELINE_SECONDS
    return yaml.safe_dump(data, sort_keys=False), onset + LIVE_INCIDENT_SECONDS


#: one engine read: (its role, "unified" for a monolithic engine; its primary stage)
EngineRead = tuple[str, str]


@dataclass
class LiveRun:
    name: str
    end: float  # simulated seconds
    reads: list[tuple[str, bool, list[EngineRead]]] = field(default_factory=list)  # phase, evaluated, engines
    #: the same reads from a second `serve` started with plain CLI flags and no GPU attribution
    plain_reads: list[tuple[str, bool, list[EngineRead]]] = field(default_factory=list)
    plain_evidence: list[list[str]] = field(default_factory=list)  # per engine, at the last read
    #: why reads went wrong: the first MAX_MISSES evaluated engine reads off the phase's expected
    #: stage, per exporter ("config" or "plain"), with the engine's evidence at that read
    misses: list[dict[str, object]] = field(default_factory=list)
    expected: dict[str, str] = field(default_factory=dict)
    #: per phase, the stage a pool of a disaggregated scenario reads instead (`expected_by_role`)
    expected_by_role: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the evidence of the evaluated reads of `kv_transfer` (config exporter), one joined line each
    transfer_evidence: list[str] = field(default_factory=list)
    error: str = ""

    def expected_for(self, phase: str, role: str) -> str:
        return self.expected_by_role.get(phase, {}).get(role, self.expected[phase])


def _wait_for(url: str, process: subprocess.Popen, log: Path) -> None:
    """Until `url` answers 200; follows the process (see wait_until_serving)."""
    wait_until_serving(process, lambda: answers(url), url, lambda: log_tail(log, 1500), poll=0.3)


def _behind(report: dict) -> float:
    """Seconds the exporter's diagnosis is behind the clock: as old as its last collection, which
    on a loaded machine is seconds behind the simulator. A read counts once the phase has filled
    the exporter's window in what it has collected, not on the simulator's clock alone."""
    return max(0.0, time.time() - datetime.fromisoformat(report["generated_at"]).timestamp())


def read_all(urls: tuple[str, ...]) -> list[dict]:
    """Each URL's JSON, fetched concurrently."""
    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(lambda url: requests.get(url, timeout=REQUEST_BOUND_SECONDS).json(), urls))


def live_run(name: str, workdir: Path, seed: int | None = None) -> LiveRun:
    """One scenario live (`seed`: the simulator's, default the scenario's own; tests/perf/live_shares.py
    runs others)."""
    text, end = compressed(name)
    scenario_file = workdir / f"{name}.yaml"
    scenario_file.write_text(text)
    sysfs = workdir / f"{name}-sys"
    # The RDMA class as a node with RDMA devices has it from boot: the exporters, started before
    # the simulator writes its NICs there, build their RDMA and link sources and find the NICs.
    (sysfs / "class" / "infiniband").mkdir(parents=True)
    sim_port, exporter_port = free_port(), free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    command = [sys.executable, "-m", "exporter"]
    popen = {"cwd": REPO, "stdout": subprocess.DEVNULL, "start_new_session": True}
    logs = {role: workdir / f"{name}-{role}.log" for role in ("simulate", "serve", "serve-plain")}
    run = LiveRun(name, end)
    node = SimulatedNode(load_scenario(str(scenario_file)))
    settings = exporter_settings(node, sim_url, str(sysfs), INTERVAL_SECONDS)
    config = workdir / f"{name}-exporter.yaml"
    config.write_text(yaml.safe_dump({**settings, **ROOMY}))
    # The plain flags' exporter reads this file for the scrape deadline alone.
    roomy = workdir / f"{name}-deadline.yaml"
    roomy.write_text(yaml.safe_dump(ROOMY))
    engines = [a for e in settings["engines"] for a in ("--engine", f"{e['type']}={e['url']}")]
    sim = exporter = plain = None
    try:
        # The exporters first, the simulator once they serve: its live phases start with it, and
        # an exporter starting on a loaded machine must not eat into the first phase's minutes.
        exporter = subprocess.Popen(
            [*command, "serve", "--config", str(config), "--listen", f"127.0.0.1:{exporter_port}"],
            stderr=logs["serve"].open("w"),
            **popen,
        )
        plain_port = free_port()
        plain = subprocess.Popen(
            [*command, "serve", "--config", str(roomy), *engines, "--gpu", f"dcgm-exporter={sim_url}/gpu/metrics"]
            + ["--sysfs", str(sysfs), "--listen", f"127.0.0.1:{plain_port}"],
            stderr=logs["serve-plain"].open("w"),
            **popen,
        )
        _wait_for(f"http://127.0.0.1:{exporter_port}/healthz", exporter, logs["serve"])
        _wait_for(f"http://127.0.0.1:{plain_port}/healthz", plain, logs["serve-plain"])
        sim = subprocess.Popen(
            [*command, "simulate", "--scenario", str(scenario_file), "--listen", f"127.0.0.1:{sim_port}"]
            + ["--sysfs-out", str(sysfs)]
            + ([] if seed is None else ["--seed", str(seed)]),
            stderr=logs["simulate"].open("w"),
            **popen,
        )
        _wait_for(sim_url + "/", sim, logs["simulate"])
        started: float | None = None
        wall_started = 0.0
        run.expected = {p.name: p.expected_stage for p in node.scenario.phases}
        run.expected_by_role = {p.name: dict(p.expected_by_role) for p in node.scenario.phases}
        deadline = time.monotonic() + end + 60.0  # the live part is shorter than `end`: warmup is fast-forwarded
        urls = (
            sim_url + "/",
            f"http://127.0.0.1:{exporter_port}/diagnosis",
            f"http://127.0.0.1:{plain_port}/diagnosis",
        )
        next_read = time.monotonic()
        while time.monotonic() < deadline:
            # Reads on a fixed schedule, the three at once: on a loaded host each answer takes
            # seconds, and reads spaced by their own latency leave a phase's evaluated part few.
            next_read += POLL_SECONDS
            time.sleep(max(0.0, next_read - time.monotonic()))
            next_read = max(next_read, time.monotonic())
            try:
                index, report, plain_report = read_all(urls)
            except requests.RequestException:
                continue  # a read lost to a busy host is not a verdict
            now = float(index["simulated_seconds"])
            if started is None:
                started, wall_started = now, time.monotonic()
            phase = index["phase"]
            phase_started = max(float(phase["start_seconds"]), started)
            evaluated = now - _behind(report) - phase_started >= WINDOW_SECONDS
            # An engine asleep (sleeping-replica) or starting (replica-restart) is listed with no
            # verdict by design.
            report["engines"] = [e for e in report["engines"] if e.get("state") not in NO_VERDICT_STATES]
            plain_report["engines"] = [e for e in plain_report["engines"] if e.get("state") not in NO_VERDICT_STATES]
            run.reads.append((phase["name"], evaluated, [(e["role"], e["primary"]) for e in report["engines"]]))
            run.transfer_evidence += [
                " | ".join(e["evidence"]) for e in report["engines"] if evaluated and e["primary"] == "kv_transfer"
            ]
            for role, document in (("config", report), ("plain", plain_report)):
                for engine in document["engines"] if evaluated else ():
                    expected = run.expected_for(phase["name"], engine["role"])
                    if engine["primary"] != expected and len(run.misses) < MAX_MISSES:
                        run.misses.append(
                            {
                                "at": round(now),
                                # simulated seconds behind the wall clock since the first read
                                "sim_lag_s": round(time.monotonic() - wall_started - (now - started), 1),
                                "exporter": role,
                                "engine": engine["engine"],
                                "role": engine["role"],
                                "primary": engine["primary"],
                                "state": engine.get("state"),
                                "no_verdict": engine.get("no_verdict"),
                                "scores": {k: round(v, 2) for k, v in engine.get("scores", {}).items() if v >= 0.1},
                                "evidence": engine["evidence"],
                            }
                        )
            plain_primaries = [(e["role"], e["primary"]) for e in plain_report["engines"]]
            plain_evaluated = now - _behind(plain_report) - phase_started >= WINDOW_SECONDS
            run.plain_reads.append((phase["name"], plain_evaluated, plain_primaries))
            run.plain_evidence = [e["evidence"] for e in plain_report["engines"]]
            if now >= end:
                break
    except Exception as exc:  # reported by the scenario's own test, not by the fixture
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        for role, process in (("simulate", sim), ("serve", exporter), ("serve-plain", plain)):
            if process is not None and process.poll() is not None:
                tail = logs[role].read_text(errors="replace")[-1500:]
                run.error += f"\n{role} exited with {process.returncode}: {tail}"
        for process in (exporter, plain, sim):
            if process is not None:
                stop_group(process)
    return run


@pytest.fixture(scope="module")
def live_runs() -> Iterator[dict[str, LiveRun]]:
    # LIVE_VERDICT_SCENARIOS=pd-healthy,pd-transfer-bound runs only those (a busy host, one family)
    only = {n for n in os.environ.get("LIVE_VERDICT_SCENARIOS", "").split(",") if n}
    names = [n for n in builtin_names() if not only or n in only]
    with tempfile.TemporaryDirectory(prefix="live-verdicts-") as tmp, ThreadPoolExecutor(AT_ONCE) as pool:
        yield dict(zip(names, pool.map(lambda n: live_run(n, Path(tmp)), names)))


def share(run: LiveRun, phase: str, plain: bool = False, role: str | None = None) -> tuple[float, int]:
    """Share of engine readings of the stage `phase` expects of each engine's role over its
    evaluated reads, and their count (`role`: only that pool's engines)."""
    reads = run.plain_reads if plain else run.reads
    readings = [
        (engine_role, primary)
        for name, evaluated, engines in reads
        if name == phase and evaluated
        for engine_role, primary in engines
        if role is None or engine_role == role
    ]
    hits = sum(primary == run.expected_for(phase, engine_role) for engine_role, primary in readings)
    return (hits / len(readings) if readings else 0.0), len(readings)


def floor(run: LiveRun, phase: str) -> float:
    """95 % where every engine of the phase should read `none`, else 85 %."""
    expected = {run.expected[phase], *run.expected_by_role.get(phase, {}).values()}
    return 0.95 if expected == {"none"} else 0.85


@pytest.mark.parametrize("name", builtin_names())
def test_each_phase_reads_its_expected_stage_live(live_runs: dict[str, LiveRun], name: str) -> None:
    run = live_runs.get(name) or pytest.skip(f"{name}: not among LIVE_VERDICT_SCENARIOS")
    assert not run.error, run.error
    for phase, expected in run.expected.items():
        fraction, count = share(run, phase)
        plain_fraction, _ = share(run, phase, plain=True)
        print(f"{name}/{phase}: {fraction:.0%} of {count} engine reads {expected}; plain flags {plain_fraction:.0%}")
        line = floor(run, phase)
        detail = json.dumps([r for r in run.reads if r[0] == phase]) + "; misses: " + json.dumps(run.misses, indent=1)
        assert count > 0, f"{name}/{phase}: no evaluated reads: {detail}"
        assert fraction >= line, f"{name}/{phase}: {fraction:.0%} read {expected} (need {line:.0%}): {detail}"


@pytest.mark.parametrize("name", [n for n in builtin_names() if n.startswith("pd-")])
def test_a_transfer_bound_pair_is_named_with_its_link(live_runs: dict[str, LiveRun], name: str) -> None:
    """Where a pair reads kv_transfer, its evidence names the pair and the link the KV crosses."""
    run = live_runs.get(name) or pytest.skip(f"{name}: not among LIVE_VERDICT_SCENARIOS")
    assert not run.error, run.error
    if "kv_transfer" not in run.expected.values():
        return  # a stray read is the share's business (test_each_phase_reads_its_expected_stage_live)
    assert run.transfer_evidence, "no evaluated kv_transfer read"
    for line in run.transfer_evidence:
        assert "pair: prefill " in line and " -> decode " in line, line
        assert "the KV crosses RDMA port mlx5_" in line, line


@pytest.mark.parametrize("name", builtin_names())
def test_plain_flags_never_let_unattributed_gpus_decide(live_runs: dict[str, LiveRun], name: str) -> None:
    """With `--engine ... --gpu dcgm-exporter=...` and no attribution, a node of several engines
    gives no engine the node's GPU ratios as its own: each says they are read node-wide, and the
    verdicts reached from what the whole node agrees on hold like the attributed ones."""
    run = live_runs.get(name) or pytest.skip(f"{name}: not among LIVE_VERDICT_SCENARIOS")
    assert not run.error, run.error
    assert run.plain_evidence, "the plain-flags exporter diagnosed no engine"
    if len(run.plain_evidence) > 1:
        for evidence in run.plain_evidence:
            text = " | ".join(evidence)
            assert "GPU signals unattributed: node-wide" in text, text
            # "DRAM active 0.95 on GPU 3" would be some GPUs taken for this engine's own.
            assert not re.search(r"(DRAM|tensor) active [0-9.]+ on GPU", text), text
    for phase, expected in run.expected.items():
        fraction, count = share(run, phase, plain=True)
        detail = (
            json.dumps([r for r in run.plain_reads if r[0] == phase]) + "; misses: " + json.dumps(run.misses, indent=1)
        )
        assert count > 0, f"{name}/{phase}: no evaluated plain-flags reads: {detail}"
        assert fraction >= floor(run, phase), f"{name}/{phase}: plain flags {fraction:.0%} read {expected}: {detail}"
