"""Live stage shares: every built-in scenario served in real time and read on /diagnosis, per seed.

The same runs as tests/integration/test_live_verdicts.py (its `live_run`: the simulator on the wall
clock, the real `serve` with the demo's configuration and a second one with plain CLI flags), for
the seeds given; prints, per scenario and phase, the share of engine reads whose primary stage is
the phase's expected one, once the exporter's window has filled. All scenarios of one seed run at
once, as in CI, so the machine is as busy as there.

    python tests/perf/live_shares.py               # seeds 7, 3, 11
    python tests/perf/live_shares.py --seeds 5
    python tests/perf/live_shares.py --scenarios prompt-growth   # one scenario alone (a short run)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporter.simulate.scenario import builtin_names  # noqa: E402
from tests.integration.test_live_verdicts import LiveRun, live_run, share  # noqa: E402


def others(run: LiveRun, phase: str, role: str | None = None) -> str:
    """What the evaluated reads of `phase` said instead of the expected stage, most common first."""
    counts = Counter(
        primary
        for name, evaluated, engines in run.reads
        if name == phase and evaluated
        for engine_role, primary in engines
        if (role is None or engine_role == role) and primary != run.expected_for(phase, engine_role)
    )
    return ", ".join(f"{stage} {n}" for stage, n in counts.most_common(3))


def roles(run: LiveRun) -> list[str | None]:
    """The pools to print apart: both of a disaggregated scenario, else all engines together."""
    seen = {role for _, _, engines in run.reads for role, _ in engines}
    return sorted(seen) if seen - {"unified"} else [None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[7, 3, 11])
    parser.add_argument(
        "--scenarios", nargs="+", choices=builtin_names(), default=None, help="only these (default: all, at once)"
    )
    parser.add_argument("--misses", action="store_true", help="print the first reads off the expected stage")
    args = parser.parse_args()
    names = args.scenarios or builtin_names()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average before: {load} on {os.cpu_count()} CPUs")
    print(f"{'seed':>4} {'scenario/phase':<42}{'expected':<26}{'share':>6}{'reads':>6}{'plain':>7}  instead")
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="live-shares-") as tmp, ThreadPoolExecutor(len(names)) as pool:
            runs = list(pool.map(live_run, names, [Path(tmp)] * len(names), [seed] * len(names)))
        for run in runs:
            if run.error:
                print(f"{seed:>4} {run.name:<42}error: {run.error}")
                continue
            for phase in run.expected:
                for role in roles(run):
                    fraction, count = share(run, phase, role=role)
                    plain, _ = share(run, phase, plain=True, role=role)
                    where = run.name + "/" + phase + (f" ({role})" if role else "")
                    expected = run.expected_for(phase, role or "unified")
                    print(
                        f"{seed:>4} {where:<42}{expected:<26}{fraction:>6.0%}{count:>6}{plain:>7.0%}"
                        f"  {others(run, phase, role)}"
                    )
            for miss in run.misses[:3] if args.misses else ():
                print(f"       miss: {json.dumps(miss)}")
        print(f"     load average after seed {seed}: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
