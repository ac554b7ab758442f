"""False alarms in a scenario's healthy first phase, across seeds (offline, the exporter's view).

The live verdict test (tests/integration/test_live_verdicts.py) needs every engine of a healthy
phase to read `none` in >= 95 % of its reads. A live run is one trajectory among many: the
simulator follows the wall clock, so its random draws fall differently each run, as another seed's
would. This script runs the scenario's first phase offline (to the second phase's start) on many
seeds, read by the exporter's own sources as `serve` reads them, and prints per seed the share of
engine reads that said `none` and what the others said; a scenario whose healthy phase sits near a
stage's threshold shows it here in a minute, not as a flaky CI run.

    python tests/perf/healthy_phase_sweep.py                          # prompt-growth, seeds 1-14
    python tests/perf/healthy_phase_sweep.py --seeds 1-30 --scenario FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.simulate import load_scenario, run_offline  # noqa: E402

#: reads before this simulated second are the exporter's first window, not a verdict on the phase
SETTLE_SECONDS = 60.0


def primaries_of_healthy_phase(scenario_name: str, seed: int) -> Counter[str]:
    """Every engine's primary stage at each snapshot of the first phase after SETTLE_SECONDS."""
    scenario = dataclasses.replace(load_scenario(scenario_name), seed=seed)
    end = scenario.phases[1].start_seconds if len(scenario.phases) > 1 else scenario.duration_seconds
    result = run_offline(scenario, duration_seconds=end, exporter_view=True)
    counts: Counter[str] = Counter()
    for at, snapshot in result.snapshots:
        if SETTLE_SECONDS <= at < end:
            counts.update(
                m.labels["stage"] for m in snapshot.metrics if m.name == "llm_bottleneck_primary" and m.value == 1.0
            )
    return counts


def seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="prompt-growth", help="built-in name or YAML file")
    parser.add_argument("--seeds", default="1-14", help="a seed or a range, e.g. 1-30")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    if scenario.phases[0].expected_stage != "none":
        parser.error(f"{scenario.name}: its first phase expects {scenario.phases[0].expected_stage}, not none")
    seeds = seed_range(args.seeds)
    print(f"{scenario.name}: phase {scenario.phases[0].name}, reads after {SETTLE_SECONDS:g} s, seeds {args.seeds}")
    print(f"{'seed':>4} {'reads':>6} {'none':>6}  instead")
    total: Counter[str] = Counter()
    flawed = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for seed, counts in zip(seeds, pool.map(primaries_of_healthy_phase, [args.scenario] * len(seeds), seeds)):
            total.update(counts)
            reads = sum(counts.values())
            others = ", ".join(f"{stage} {n}" for stage, n in counts.most_common() if stage != "none")
            flawed += bool(others)
            print(f"{seed:>4} {reads:>6} {counts['none'] / reads if reads else 0:>6.1%}  {others or '-'}")
    reads = sum(total.values())
    print(
        f"all  {reads:>6} {total['none'] / reads if reads else 0:>6.1%}  "
        f"{flawed} of {len(seeds)} seeds with an engine off `none`"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
