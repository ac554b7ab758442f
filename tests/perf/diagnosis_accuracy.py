"""Diagnosis accuracy on simulated scenarios: per-scenario accuracy, a confusion matrix, and the
false-active rate on `healthy`.

Every built-in scenario plus randomized variants (seed, load, GPU generation) is simulated offline
and read by the exporter's own sources (`run_offline(..., exporter_view=True)`); the normalized
snapshots are cached under .cache/diagnosis-accuracy/ so that re-scoring after a threshold change
takes seconds. Each snapshot after the first `--settle` seconds of a run and of each phase (and, in a phase
that follows an overload, after the requests of the previous phase have left) is an
evaluation window: it counts as correct when the engine's primary stage equals the phase's
expected stage.

    python tests/perf/diagnosis_accuracy.py                # 8 built-in + 48 variants (56 runs)
    python tests/perf/diagnosis_accuracy.py --variants 0   # built-in scenarios only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import random
import sys
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporter.diagnosis import Diagnoser, Thresholds  # noqa: E402
from exporter.stages import ENGINE, of  # noqa: E402

CACHE = REPO / ".cache" / "diagnosis-accuracy"
LABELS = ("none", *(stage.id for stage in of(ENGINE)))
# HBM bandwidth of each GPU, to keep a variant's load equally hard on another generation.
GPU_BANDWIDTH = {"h100-sxm": 3.35, "h200": 4.8}


@dataclass(frozen=True)
class Run:
    scenario: str
    variant: int
    text: str  # the scenario YAML actually simulated

    @property
    def key(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]


def builtin_text(name: str) -> str:
    return resources.files("exporter.simulate").joinpath("scenarios", f"{name}.yaml").read_text()


def variant_text(name: str, index: int) -> str:
    """A randomized but equivalent scenario: another seed, ±10 % load, sometimes the other Hopper."""
    rng = random.Random(f"{name}-{index}")
    data = yaml.safe_load(builtin_text(name))
    data["seed"] = rng.randrange(1, 10_000)
    factor = rng.uniform(0.9, 1.1)
    gpu = data.get("node", {}).get("gpu")
    if gpu in GPU_BANDWIDTH and rng.random() < 0.5:
        other = next(g for g in GPU_BANDWIDTH if g != gpu)
        data["node"]["gpu"] = other
        factor *= GPU_BANDWIDTH[other] / GPU_BANDWIDTH[gpu]
    _scale_rates(data, factor)
    return yaml.safe_dump(data, sort_keys=False)


def _scale_rates(node: Any, factor: float) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "rate_per_second" and isinstance(value, (int, float)):
                node[key] = round(value * factor, 3)
            else:
                _scale_rates(value, factor)
    elif isinstance(node, list):
        for item in node:
            _scale_rates(item, factor)


def simulate(run: Run) -> Path:
    """Simulate one run (cached) and store its normalized snapshots without diagnosis gauges."""
    from exporter.simulate import run_offline
    from exporter.simulate.scenario import parse_scenario

    path = CACHE / f"{run.scenario}-{run.variant}-{run.key}.pkl"
    if path.exists():
        return path
    scenario = parse_scenario(run.text, f"{run.scenario} variant {run.variant}")
    result = run_offline(scenario, exporter_view=True, sample_seconds=5.0)
    snapshots = [
        (t, [m for m in snapshot.metrics if not m.name.startswith("llm_bottleneck_")])
        for t, snapshot in result.snapshots
    ]
    # When every request that arrived before a phase began has left: until then the previous
    # phase's backlog (still queued, still decoding long contexts) is what the signals show.
    requests = result.requests
    drained = {
        phase.start_seconds: max(
            (
                r.finished if r.finished >= 0 else scenario.duration_seconds
                for r in requests
                if r.arrival < phase.start_seconds
            ),
            default=phase.start_seconds,
        )
        for phase in scenario.phases[1:]
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps({"snapshots": snapshots, "drained": drained}))
    tmp.replace(path)
    return path


@cache
def parsed(text: str, name: str):  # noqa: ANN201 - a Scenario
    from exporter.simulate.scenario import parse_scenario

    return parse_scenario(text, name)


def evaluated_stage(run: Run, t: float, settle: float, drained: dict[float, float]) -> str | None:
    """The stage expected at `t`, or None while the run or its phase is still settling: the first
    `settle` seconds of the run and of a phase, and a phase's time until the previous phase's
    requests have all left, plus `settle` for the diagnosis' level window to follow."""
    phase = parsed(run.text, run.scenario).phase_at(t)
    if t < settle:
        return None
    if phase.start_seconds > 0:
        ready = max(phase.start_seconds, drained.get(phase.start_seconds, phase.start_seconds)) + settle
        if t < ready:
            return None
    return phase.expected_stage


def score(run: Run, path: Path, thresholds: Thresholds, settle: float) -> tuple[list[tuple[str, str]], int, int]:
    """(expected, primary) per evaluation window and engine; plus windows with any active stage."""
    data = pickle.loads(path.read_bytes())
    diagnoser = Diagnoser(thresholds)
    pairs: list[tuple[str, str]] = []
    active_windows = windows = 0
    for t, metrics in data["snapshots"]:
        diagnoser.update(metrics, t)
        expected = evaluated_stage(run, t, settle, data.get("drained", {}))
        if expected is None:
            continue
        for diagnosis in diagnoser.latest.values():
            pairs.append((expected, diagnosis.primary))
            windows += 1
            active_windows += any(diagnosis.active.values())
    return pairs, active_windows, windows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=6, help="randomized variants per scenario (default 6)")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="seconds skipped at the start and after each phase change"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()

    from exporter.simulate.scenario import builtin_names

    runs = [Run(name, 0, builtin_text(name)) for name in builtin_names()]
    runs += [Run(name, i, variant_text(name, i)) for name in builtin_names() for i in range(1, args.variants + 1)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        paths = list(pool.map(simulate, runs))

    thresholds = Thresholds()
    per_scenario: dict[str, Counter] = defaultdict(Counter)
    confusion: Counter = Counter()
    healthy_active = healthy_windows = 0
    for run, path in zip(runs, paths):
        pairs, active, windows = score(run, path, thresholds, args.settle)
        for expected, primary in pairs:
            per_scenario[run.scenario]["total"] += 1
            per_scenario[run.scenario]["correct"] += expected == primary
            confusion[(expected, primary)] += 1
        if run.scenario == "healthy":
            healthy_active += active
            healthy_windows += windows

    print(f"runs: {len(runs)} ({len(runs) - len(builtin_names())} randomized variants), settle {args.settle:g}s")
    print(f"\n{'scenario':<24}{'windows':>9}{'accuracy':>10}")
    for name in builtin_names():
        c = per_scenario[name]
        print(f"{name:<24}{c['total']:>9}{c['correct'] / max(1, c['total']):>10.1%}")
    total = sum(c["total"] for c in per_scenario.values())
    correct = sum(c["correct"] for c in per_scenario.values())
    print(f"{'overall':<24}{total:>9}{correct / max(1, total):>10.1%}")
    short = {s: s[:8] for s in LABELS}
    print("\nconfusion (rows expected, columns primary):")
    print(f"{'':<26}" + "".join(f"{short[s]:>9}" for s in LABELS))
    for expected in LABELS:
        row = [confusion[(expected, p)] for p in LABELS]
        if any(row):
            print(f"{expected:<26}" + "".join(f"{n:>9}" for n in row))
    rate = healthy_active / max(1, healthy_windows)
    print(f"\nhealthy: {healthy_active} of {healthy_windows} windows with any active stage ({rate:.1%})")
    ok = (
        correct / max(1, total) >= 0.95
        and all(c["correct"] / c["total"] >= 0.90 for c in per_scenario.values())
        and healthy_active == 0
    )
    print("budget (overall >= 95 %, every scenario >= 90 %, no active stage on healthy):", "MET" if ok else "NOT MET")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "per_scenario": {k: dict(v) for k, v in per_scenario.items()},
                    "confusion": {f"{e}->{p}": n for (e, p), n in confusion.items()},
                    "healthy_active_windows": healthy_active,
                    "healthy_windows": healthy_windows,
                },
                indent=2,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
