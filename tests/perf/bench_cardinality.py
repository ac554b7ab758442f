"""Benchmark: what 5,000 distinct model names on one engine cost the real `serve`, next to one model.

The outside review ("Hardening") saw 5,000 model names, each under the input cap, become 115,061
exported series, an 11 MB /metrics and an RSS that kept climbing. This starts `serve` against a
loopback vLLM stub, one process per case, so RSS figures are comparable:

1. baseline: a stub serving 1 model;
2. 5,000 models with the default output budget (`max_models`, `max_exported_series`);
3. with `--lifted`, 5,000 models with the budget lifted (every cap 10,000,000, and a 10 s scrape timeout so a slow
   round on a loaded machine still completes), which is what the exporter did before there was one.

The stub's values change at every scrape (counters grown, gauges moved), at the default 5 s
interval. For each it collects for `--rounds` intervals and prints the exported series count, the
/metrics size, RSS after the first round and at the end (growth shows a leak), and the
`llm_exporter_source_errors_total{reason="cardinality"}` count. About a minute for the first two;
`--lifted` adds one to three minutes (its first snapshot alone is slow).

    python tests/perf/bench_cardinality.py [--models 5000] [--rounds 5] [--interval 5] [--lifted]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from exporter.settings import ScrapeLimits  # noqa: E402
from tests.many_models import model_names, vllm_text  # noqa: E402
from tests.perf.node_under_test import Cycling, changing_captures  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402
from tests.support import ExporterProcess, RouteServer, series_value  # noqa: E402

LIFTED = 10_000_000


class PatientExporter(ExporterProcess):
    """`serve` given longer to publish its first snapshot: 5,000 unbudgeted models take a while."""

    def wait_ready(self, timeout: float = 90.0) -> None:
        super().wait_ready(timeout)


def measure(label: str, url: str, rounds: int, interval: float, config: str | None) -> tuple[int, float, float]:
    """(series exported, RSS after the first round, RSS at the end) in MiB."""
    args = ["--engine", f"vllm={url}", *(["--config", config] if config else [])]
    with PatientExporter(*args, interval=interval) as exporter:
        process = psutil.Process(exporter.process.pid)
        exporter.wait_for(lambda t: "llm_engine_up{" in t, timeout=60)
        first_rss = process.memory_info().rss / 2**20
        deadline = time.monotonic() + rounds * interval
        while time.monotonic() < deadline:
            time.sleep(interval)
        body = exporter.metrics()
        rss = process.memory_info().rss / 2**20
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    trimmed = series_value(body, "llm_exporter_source_errors_total", source="engine", reason="cardinality") or 0
    up = series_value(body, "llm_exporter_source_up", source="engine")
    duration = series_value(body, "llm_exporter_collect_duration_seconds", source="engine") or 0.0
    print(
        f"{label:<34} series {series:>7}  /metrics {len(body.encode()) / 1024:>8.1f} KiB  "
        f"RSS {first_rss:6.1f} -> {rss:6.1f} MiB  cardinality count {trimmed:g}  "
        f"engine source up {up:g}, last collect {duration * 1000:.0f} ms"
    )
    return series, first_rss, rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--lifted", action="store_true", help="also run with every cap lifted (slow)")
    args = parser.parse_args()
    server = RouteServer()
    # Eight successive scrapes each: the values change every scrape, as a real engine's do.
    server.routes["/one/metrics"] = Cycling(changing_captures(vllm_text(model_names(1)).encode(), 8))
    server.routes["/many/metrics"] = Cycling(changing_captures(vllm_text(model_names(args.models)).encode(), 8))
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as lifted:
            lifted.write(
                f"engine_defaults: {{max_models: {LIFTED}, max_exported_series: {LIFTED}, timeout_seconds: 10}}\n"
                f"max_exported_series: {LIFTED}\n"
            )
            lifted.flush()
            print(f"serve, one vLLM stub, interval {args.interval:g}s, {args.rounds} rounds each")
            one = measure("baseline: 1 model", server.url("/one/metrics"), args.rounds, args.interval, None)
            many = measure(
                f"{args.models} models, default budget", server.url("/many/metrics"), args.rounds, args.interval, None
            )
            if args.lifted:
                measure(
                    f"{args.models} models, budget lifted",
                    server.url("/many/metrics"),
                    args.rounds,
                    args.interval,
                    lifted.name,
                )
    finally:
        server.close()
    budget = ScrapeLimits().max_exported_series
    print_rows(
        "bench_cardinality",
        [
            Row(
                f"series exported, one engine of {args.models:,} models",
                many[0],
                "",
                one[0],
                f"≤ one model's + {budget} (max_exported_series)",
                many[0] <= one[0] + budget,
            ),
            Row(
                f"RSS growth over {args.rounds} rounds, {args.models:,} models",
                many[2] - many[1],
                "MiB",
                one[2] - one[1],
            ),
        ],
        "the same serve against one model",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
