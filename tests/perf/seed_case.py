"""The seed case of DESIGN.md beside the simulated `prompt-growth`: one offline run, one table.

Seed (13B code-completion model, 4 nodes x 8 A100 80GB, prompt template 200 -> 800 tokens of input):
P99 800 ms -> 2.5 s, throughput -40 %, running 32 -> 18 with the queue growing, SM active 45 %,
DRAM active 95 %; prefix caching, --max-model-len 4096 and shortest-job-first: P99 950 ms,
throughput 95 %. Each simulated figure is the last minute of its phase (`phase_window`), P99 is
end-to-end request latency by arrival, throughput is completed requests per second node-wide,
running and waiting are per replica (one engine per GPU): the seed's "running 32 -> 18" is read
per engine, the only reading under which a full KV pool can stop admission at 18 while the queue
grows (docs/simulator.md, "The seed case", gives the arithmetic for the other readings). Below the
table it prints the checks that bind the figures together: Little's law per replica (mean time in
the engine = running / completions per replica, a floor under P99) and, for a closed population,
the response-time law X = N / (R + Z).

    python tests/perf/seed_case.py                 # the built-in scenario, its own seed
    python tests/perf/seed_case.py --seed 3        # another seed
    python tests/perf/seed_case.py --scenario FILE # a variant of the scenario
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporter.simulate import WindowSummary, load_scenario, run_offline  # noqa: E402

TAIL_SECONDS = 60.0


@dataclass(frozen=True)
class Target:
    """One figure of the seed and how far the simulation may be from it."""

    seed: str
    low: float
    high: float


def figures(phases: dict[str, WindowSummary]) -> dict[str, float]:
    """The seed's figures as this run measured them."""
    base, long, fixed = phases["baseline"], phases["long-template"], phases["remedied"]
    return {
        "baseline P99 e2e (s)": base.e2e_p99,
        "long-template P99 e2e (s)": long.e2e_p99,
        "P99 long / baseline P99": long.e2e_p99 / base.e2e_p99,
        "throughput change (req/s)": long.requests_per_second / base.requests_per_second - 1.0,
        "running per replica, baseline": base.running,
        "running per replica, long-template": long.running,
        "waiting per replica, long-template": long.waiting,
        "SM active, long-template": long.sm_active,
        "DRAM active, long-template": long.dram_active,
        "remedied P99 e2e (s)": fixed.e2e_p99,
        "remedied P99 / baseline P99": fixed.e2e_p99 / base.e2e_p99,
        "remedied throughput / baseline": fixed.requests_per_second / base.requests_per_second,
    }


# The seed's figures with the tolerances the issue accepts.
TARGETS = {
    "baseline P99 e2e (s)": Target("0.8", 0.6, 1.0),
    "long-template P99 e2e (s)": Target("2.5", 1.75, 3.25),
    "P99 long / baseline P99": Target("3.1", 2.17, 4.03),
    "throughput change (req/s)": Target("-40 %", -0.50, -0.30),
    "running per replica, baseline": Target("32", 28, 36),
    "running per replica, long-template": Target("18", 14, 22),
    "waiting per replica, long-template": Target("growing", 1.0, float("inf")),
    "SM active, long-template": Target("0.45", 0.37, 0.53),
    "DRAM active, long-template": Target("0.95", 0.90, 1.0),
    "remedied P99 e2e (s)": Target("0.95", 0.71, 1.19),
    "remedied P99 / baseline P99": Target("1.19", 0.89, 1.48),
    "remedied throughput / baseline": Target("95 %", 0.88, 1.02),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="prompt-growth", help="built-in name or YAML file")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    result = run_offline(scenario, seed=args.seed)
    phases = {p.name: result.phase_window(p.name, tail_seconds=TAIL_SECONDS) for p in scenario.phases}
    measured = figures(phases)
    print(f"{scenario.name}, seed {args.seed if args.seed is not None else scenario.seed}, last {TAIL_SECONDS:g}s")
    print(f"{'figure':<38}{'seed':>9}{'simulated':>11}  accepted range")
    misses = 0
    for name, value in measured.items():
        target = TARGETS[name]
        ok = target.low <= value <= target.high
        misses += not ok
        shown = f"{value:+.0%}" if "change" in name else (f"{value:.0%}" if "throughput /" in name else f"{value:.2f}")
        print(f"{name:<38}{target.seed:>9}{shown:>11}  [{target.low:g}, {target.high:g}]{'' if ok else '  MISS'}")
    replicas = sum(group.count for group in scenario.replicas)
    base, long = phases["baseline"], phases["long-template"]
    print(
        f"interpretation: running and waiting per replica ({replicas} replicas on one node); read per node "
        f"instead, running is {base.running * replicas:.0f} -> {long.running * replicas:.0f}"
    )
    for name, window in phases.items():
        print(
            f"  {name:<14} arrivals {window.arrivals / (window.end - window.start):5.1f}/s, "
            f"{window.output_tokens_per_second:6.0f} output tok/s, KV {window.kv_usage:.2f}, "
            f"ITL(TPOT p50) {window.tpot_p50 * 1000:.1f} ms, TTFT p99 {window.ttft_p99:.2f}s, "
            f"tensor {window.tensor_active:.2f}, preempt {window.preemptions_per_second:.2f}/s"
        )
    for name, window in phases.items():
        per_replica = window.requests_per_second / replicas
        line = (
            f"  {name:<14} Little: {window.running:5.1f} running / {per_replica:.2f} completions/s per replica "
            f"= {window.running / per_replica:5.1f} s in the engine (mean e2e {window.e2e_mean:5.1f} s)"
        )
        workload = next(p.workload for p in scenario.phases if p.name == name)
        if workload.arrival == "closed":
            law = workload.clients / (window.e2e_mean + workload.think_seconds)
            line += (
                f"; N/(R+Z) = {workload.clients}/({window.e2e_mean:.1f}+{workload.think_seconds:g}) "
                f"= {law:.1f}/s, measured {window.requests_per_second:.1f}/s"
            )
        print(line)
    print("all figures within the seed's tolerances" if not misses else f"{misses} figure(s) outside the tolerances")
    return 0 if not misses else 1


if __name__ == "__main__":
    raise SystemExit(main())
