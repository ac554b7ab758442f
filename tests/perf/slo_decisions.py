"""Decisions from the capacity estimate against the truth, on the simulator (offline, faster than
real time): the desired replicas of a load sweep, and the recommended concurrency against the knee
of a `max_num_seqs` sweep.

Replicas: the healthy scenario's engine and mix (Llama-3.1-8B on H100, chat 900/220 tokens,
max_num_seqs 256 as configured in `capacity.max_num_seqs`), the SLO "TTFT ≤ 0.5 s for 95 % of
requests", the offered rate stepped up phase by phase. The same stepped load runs on 1, 2, ...
replicas; the truth of a step is the fewest replicas whose run met the SLO in it (every request
arriving in the step after its first minute, judged on the simulator's own records). The
exporter's desired replicas (`capacity.target_utilization` 1: the truth is where the SLO breaks,
not a margin before it) are read at each step's end from two runs: the replicas the step before
needed (what an autoscaler following the load runs when the rate steps up) and the replicas this
step needs (steady state). The budget: within one replica of the truth.

Concurrency: the SLO "e2e ≤ 10 s for 95 % of requests" (answers of 220 tokens on average, up to
2,048: the batch's decode pace is what it limits). The knee is the largest `max_num_seqs` at which
it holds with the batch full (a closed population of that many clients, no think time), by
bisection, judged on the simulator's request records. The exporter's recommended concurrency is
read at each step of a stepped open-loop load on one replica (the last steps overload it). The
budget: within 20 % of the knee, for the estimates that make an action (confidence 0.5 or more).

An ITL SLO per token gap was tried for the knee and not kept: at this mix a gap's tail is the
prefill chunk the step carries (2,048 tokens, ~55 ms), so "ITL ≤ 25 ms for 95 % of gaps" broke at
37 running requests whatever the decode pace, a knee set by how often prefills come.

    python tests/perf/slo_decisions.py [--quick]
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.model import Sample  # noqa: E402
from exporter.simulate.offline import SUCCESS, OfflineResult, run_offline  # noqa: E402
from exporter.simulate.scenario import scenario_from_data  # noqa: E402
from exporter.slo.concurrency import MIN_CONFIDENCE  # noqa: E402

TTFT_SLO = {"name": "chat-ttft", "ttft_seconds": 0.5, "objective": 0.95}
ANSWER_SLO = {"name": "answer-e2e", "e2e_seconds": 10.0, "objective": 0.95}
MAX_NUM_SEQS = 256
STEPS = (15.0, 30.0, 45.0, 60.0, 75.0, 90.0, 105.0, 120.0)  # req/s, the whole model's
STEP_SECONDS = 150.0
SETTLE_SECONDS = 60.0  # the estimator's window and the queue's settling after a step
MAX_REPLICAS = 5


def healthy() -> dict[str, Any]:
    text = (resources.files("exporter.simulate") / "scenarios" / "healthy.yaml").read_text("utf-8")
    data = copy.deepcopy(yaml.safe_load(text))
    data["warmup_seconds"] = 0
    return data


def stepped(replicas: int, steps: tuple[float, ...]) -> dict[str, Any]:
    data = healthy()
    data["node"]["gpus"] = replicas
    data["replicas"][0]["count"] = replicas
    data["workload"]["rate_per_second"] = steps[0]
    data["phases"] = [
        {"name": f"step-{i}", "start_seconds": i * STEP_SECONDS, "workload": {"rate_per_second": rate}}
        for i, rate in enumerate(steps)
    ]
    data["phases"][0].pop("start_seconds")
    data["duration_seconds"] = len(steps) * STEP_SECONDS
    return data


def run(data: dict[str, Any], settings: dict[str, Any]) -> OfflineResult:
    return run_offline(scenario_from_data(data, "healthy"), exporter_view=True, exporter_settings=settings)


def request_attainment(result: OfflineResult, slo: dict[str, Any], start: float, end: float) -> float:
    """Requests arriving in [start, end): the fraction that finished within every threshold of the
    SLO (TTFT, e2e); one still waiting, or given up on, did not."""
    arrived = [r for r in result.requests if start <= r.arrival < end and r.finish_reason != "rejected"]
    good = sum(
        1
        for r in arrived
        if r.finish_reason in SUCCESS
        and r.first_token - r.arrival <= slo.get("ttft_seconds", math.inf)
        and r.finished - r.arrival <= slo.get("e2e_seconds", math.inf)
    )
    return good / len(arrived) if arrived else math.nan


def exported(result: OfflineResult, at: float, family: str, slo: str) -> list[float]:
    """The exporter's `family` for `slo` at the last snapshot before `at`, one value per engine."""
    _, snapshot = [(t, s) for t, s in result.snapshots if t <= at + 1e-6][-1]
    return [
        m.value for m in snapshot.metrics if isinstance(m, Sample) and m.name == family and m.labels.get("slo") == slo
    ]


def replica_sweep(steps: tuple[float, ...]) -> bool:
    settings = {
        "slos": [TTFT_SLO],
        "capacity": {"target_utilization": 1.0, "max_num_seqs": {"default": MAX_NUM_SEQS}},
    }
    runs: dict[int, OfflineResult] = {}
    for replicas in range(1, MAX_REPLICAS + 1):
        started = time.monotonic()
        runs[replicas] = run(stepped(replicas, steps), settings)
        print(
            f"  ran {replicas} replica(s) through {len(steps)} steps in {time.monotonic() - started:.0f} s", flush=True
        )
    truth: list[int | None] = []
    for index in range(len(steps)):
        start, end = index * STEP_SECONDS + SETTLE_SECONDS, (index + 1) * STEP_SECONDS
        met = [n for n in runs if request_attainment(runs[n], TTFT_SLO, start, end) >= TTFT_SLO["objective"]]
        truth.append(min(met) if met else None)
    print(
        f"\n{'rate':>6} {'truth':>5} {'attained by replicas 1..' + str(MAX_REPLICAS):>34}  {'from':>4} {'desired':>7} "
        f"{'from':>4} {'desired':>7} {'conf':>5}"
    )
    ok = True
    for index, rate in enumerate(steps):
        start, end = index * STEP_SECONDS + SETTLE_SECONDS, (index + 1) * STEP_SECONDS
        attained = " ".join(f"{request_attainment(runs[n], TTFT_SLO, start, end):6.1%}" for n in runs)
        cells = []
        for source in (truth[index - 1] if index else 1, truth[index]):
            if source is None:
                cells.append(f"{'-':>4} {'-':>7}")
                continue
            shares = exported(runs[source], end, "llm_capacity_desired_replicas", TTFT_SLO["name"])
            desired = max(1, math.ceil(sum(shares) - 1e-9)) if shares else None
            cells.append(f"{source:>4} {desired if desired is not None else '-':>7}")
            if truth[index] is not None and (desired is None or abs(desired - truth[index]) > 1):
                ok = False
        confidence = exported(
            runs[truth[index] or MAX_REPLICAS], end, "llm_capacity_estimate_confidence_ratio", TTFT_SLO["name"]
        )
        print(
            f"{rate:6.0f} {truth[index] if truth[index] is not None else '>' + str(MAX_REPLICAS):>5} {attained:>34}  "
            f"{cells[0]} {cells[1]} {min(confidence) if confidence else math.nan:5.2f}"
        )
    return ok


def closed_loop(max_num_seqs: int, seconds: float = 240.0) -> dict[str, Any]:
    data = healthy()
    data["node"]["gpus"] = 1
    data["replicas"][0]["count"] = 1
    data["replicas"][0]["engine"]["max_num_seqs"] = max_num_seqs
    workload = data["workload"]
    workload.pop("rate_per_second")
    workload.update({"arrival": "closed", "clients": max_num_seqs, "think_seconds": 0.0})
    data["phases"] = [{"name": "full", "expected_stage": "none"}]
    data["duration_seconds"] = seconds
    return data


def knee(low: int, high: int) -> tuple[int, dict[int, float]]:
    """The largest max_num_seqs (a full batch) at which the SLO holds, by bisection."""
    seen: dict[int, float] = {}
    while high - low > max(1, low // 50):
        mid = (low + high) // 2
        seen[mid] = request_attainment(run(closed_loop(mid), {}), ANSWER_SLO, 90.0, 180.0)
        low, high = (mid, high) if seen[mid] >= ANSWER_SLO["objective"] else (low, mid)
    return low, seen


def concurrency_sweep(steps: tuple[float, ...]) -> bool:
    truth, seen = knee(16, 512)
    print(
        f"\nknee: max_num_seqs {truth} (attainment by max_num_seqs: "
        + ", ".join(f"{m} {a:.1%}" for m, a in sorted(seen.items()))
        + ")"
    )
    result = run(stepped(1, steps), {"slos": [ANSWER_SLO]})
    print(f"{'rate':>6} {'recommended':>11} {'error':>7} {'tok/s there':>11} {'conf':>5}")
    ok = True
    for index, rate in enumerate(steps):
        end = (index + 1) * STEP_SECONDS
        recommended = exported(result, end, "llm_capacity_recommended_concurrency", ANSWER_SLO["name"])
        tokens = exported(result, end, "llm_capacity_recommended_throughput_tokens_per_second", ANSWER_SLO["name"])
        confidence = exported(result, end, "llm_capacity_estimate_confidence_ratio", ANSWER_SLO["name"])
        if not recommended:
            print(f"{rate:6.0f} {'-':>11}")
            continue
        error = recommended[0] / truth - 1
        # an estimate on the prior alone makes no action (exporter/slo/concurrency.py): not judged
        judged = confidence[0] >= MIN_CONFIDENCE
        ok = ok and (abs(error) <= 0.2 or not judged)
        print(
            f"{rate:6.0f} {recommended[0]:11.0f} {error:+7.1%} {tokens[0] if tokens else math.nan:11.0f} "
            f"{confidence[0]:5.2f}" + ("" if judged else "  (prior only: no action, not judged)")
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four steps")
    args = parser.parse_args()
    steps = STEPS[::2] if args.quick else STEPS
    print(f"replicas: healthy mix, SLO {TTFT_SLO}, max_num_seqs {MAX_NUM_SEQS}, {STEP_SECONDS:g} s a step")
    replicas_ok = replica_sweep(steps)
    print(f"\nconcurrency: healthy mix, SLO {ANSWER_SLO}")
    concurrency_ok = concurrency_sweep(STEPS[:4])
    print(f"\nreplicas within one of the truth: {replicas_ok}; concurrency within 20 % of the knee: {concurrency_ok}")
    return 0 if replicas_ok and concurrency_ok else 1


if __name__ == "__main__":
    sys.exit(main())
