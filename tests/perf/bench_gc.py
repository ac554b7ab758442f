"""Benchmark: what CPython's garbage collector costs `serve` with the settings it makes
(exporter/collector_gc.py), beside CPython's defaults and a candidate young generation, in one run.

The node (tests/perf/node_under_test.py): vLLM targets whose values change every scrape, the NVML
stand-in's 8 GPUs and 8 RDMA ports, the default 5 s interval. One `serve` per setting, all three on
the node at once (so a machine that gets busier loads them alike), each reporting from inside
(gc.callbacks) its collections by generation and their pauses, its CPU (after start-up and a few
warm-up intervals) and its RSS:

- `serve`: as serve sets it;
- `defaults` (the reference column): CPython's thresholds, nothing frozen;
- `candidate`: start-up frozen, a young generation of `--candidate` containers (one larger than a
  round of many targets keeps alive at once; weigh it with the soak's /metrics tail, which its
  rarer, longer young collections move).

    python tests/perf/bench_gc.py [--targets 32] [--interval 5] [--rounds 60] [--warm-up 6] [--candidate 50000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.collector_gc import YOUNG_THRESHOLD  # noqa: E402
from tests.perf.node_under_test import DEFAULT_INTERVAL, Exporter, Node, start_exporter  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402

#: a young generation above what a round of 32 targets keeps alive at once
CANDIDATE_YOUNG = 50_000

# `serve` in the child's main thread with the collector set as argv[1] says. From argv[3] seconds
# after serve has settled (for the defaults: where it would have), once the first rounds' cold
# parses and new windows are behind it, its collections and CPU are counted (the file argv[4]
# says when) until it stops on SIGTERM, when the figures are written to argv[2].
_CHILD = textwrap.dedent(
    """
    import atexit, gc, json, os, sys, threading, time
    import exporter.collector_gc as collector_gc

    setting, out, warm_up, counting = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    counts = {0: 0, 1: 0, 2: 0}
    pauses = {0: 0.0, 1: 0.0, 2: 0.0}
    longest = {0: 0.0, 1: 0.0, 2: 0.0}
    started = [0.0]
    since = {}

    def count(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
            return
        generation, pause = info["generation"], time.perf_counter() - started[0]
        counts[generation] += 1
        pauses[generation] += pause
        longest[generation] = max(longest[generation], pause)

    def count_from_now():
        since["cpu"], since["wall"] = time.process_time(), time.monotonic()
        gc.callbacks.append(count)
        open(counting, "w").close()

    def begin():
        threading.Timer(warm_up, count_from_now).start()

    settle = collector_gc.settle_after_start_up
    if setting == "defaults":
        collector_gc.settle_after_start_up = begin
    else:
        if setting != "serve":
            collector_gc.YOUNG_THRESHOLD = int(setting)
        def settled():
            settle()
            begin()
        collector_gc.settle_after_start_up = settled

    def report():
        with open(out, "w") as file:
            json.dump({"counts": counts, "pauses": pauses, "longest": longest,
                       "cpu": time.process_time() - since["cpu"],
                       "seconds": time.monotonic() - since["wall"],
                       "rss_mib": int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20,
                       "threshold": gc.get_threshold()}, file)

    atexit.register(report)
    from exporter.cli import main  # after the patch: cli takes settle_after_start_up by name

    sys.exit(main(sys.argv[5:]))
    """
)


def run(targets: int, interval: float, rounds: int, candidate: int, warm_up: int) -> dict[str, dict]:
    settings = {"defaults": "defaults", "candidate": str(candidate), "serve": "serve"}
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        node = Node(targets, interval, scratch).start()
        serves: dict[str, Exporter] = {}
        try:
            for name, setting in settings.items():
                child = ["-c", _CHILD, setting, str(scratch / f"{name}.json")]
                child += [str(warm_up * interval), str(scratch / f"{name}.counting")]
                serves[name] = start_exporter(REPO, node, targets, launcher=child)
            deadline = time.monotonic() + 120 + warm_up * interval
            while not all((scratch / f"{name}.counting").exists() for name in settings):
                if time.monotonic() > deadline or any(serve.process.poll() is not None for serve in serves.values()):
                    raise SystemExit("a serve did not start counting (it ended, or start-up took over 2 minutes)")
                time.sleep(0.2)
            time.sleep(interval * rounds)
            for serve in serves.values():
                serve.close()
            figures = {}
            for name in settings:
                path = scratch / f"{name}.json"
                if not path.exists():
                    raise SystemExit(f"{name}: serve wrote no figures (it ended before SIGTERM?)")
                figures[name] = json.loads(path.read_text())
            return figures
        finally:
            for serve in serves.values():
                serve.close()
            node.close()


def rows(figures: dict[str, dict], interval: float, rounds: int, candidate: int) -> list[Row]:
    """serve's setting against CPython's defaults (the reference column), the candidate beside."""
    serve, defaults, other = figures["serve"], figures["defaults"], figures["candidate"]

    def share(f: dict) -> float:
        return 100 * sum(f["pauses"].values()) / f["cpu"] if f["cpu"] else float("nan")

    def cpu_ms(f: dict) -> float:
        return 1000 * f["cpu"] / (f["seconds"] / interval)

    def young_pause_ms(f: dict) -> float:
        return 1000 * f["pauses"]["0"] / f["counts"]["0"] if f["counts"]["0"] else 0.0

    candidate_too = f"the same with a young generation of {candidate:,}"
    return [
        Row("serve's CPU per interval", cpu_ms(serve), "ms", cpu_ms(defaults)),
        Row(candidate_too, cpu_ms(other), "ms", cpu_ms(defaults)),
        Row("the collector's share of serve's CPU", share(serve), "%", share(defaults)),
        Row(candidate_too, share(other), "%", share(defaults)),
        Row(f"young collections in {rounds} intervals", serve["counts"]["0"], "", defaults["counts"]["0"]),
        Row(candidate_too, other["counts"]["0"], "", defaults["counts"]["0"]),
        Row("a young collection's mean pause", young_pause_ms(serve), "ms", young_pause_ms(defaults)),
        Row(candidate_too, young_pause_ms(other), "ms", young_pause_ms(defaults)),
        Row(f"full collections in {rounds} intervals", serve["counts"]["2"], "", defaults["counts"]["2"]),
        Row("the longest full collection", 1000 * serve["longest"]["2"], "ms", 1000 * defaults["longest"]["2"]),
        Row("RSS at the end", serve["rss_mib"], "MiB", defaults["rss_mib"]),
        Row(candidate_too, other["rss_mib"], "MiB", defaults["rss_mib"]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=32)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL)
    parser.add_argument("--rounds", type=int, default=60, help="intervals counted")
    parser.add_argument("--warm-up", type=int, default=6, help="intervals after start-up not counted")
    parser.add_argument("--candidate", type=int, default=CANDIDATE_YOUNG, help="a young generation to weigh")
    args = parser.parse_args()
    figures = run(args.targets, args.interval, args.rounds, args.candidate, args.warm_up)
    for name, f in figures.items():
        print(f"{name}: threshold {f['threshold']}, collections {f['counts']}, CPU {f['cpu']:.3f} s", file=sys.stderr)
    reference = f"CPython's defaults; serve's young generation {YOUNG_THRESHOLD:,}"
    print_rows("bench_gc", rows(figures, args.interval, args.rounds, args.candidate), reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
