"""Benchmark: `report` over 24 hours of 32 engines against a local, backfilled Prometheus.

The issue's budget: under 30 s. The data is synthetic but shaped like the exporter's: 4 nodes of
8 engines serving 2 models, every engine family (counters, gauges, the four latency summaries),
the diagnosis gauges and one GPU per engine, scraped every 30 s; the prompt length grows 4x at
hour 12 and decode memory bandwidth becomes the primary stage. It is written as OpenMetrics,
backfilled with promtool and served by a real Prometheus; the report (JSON and HTML, with plots)
is then timed, and the backfill separately. Exits 1 when the report is over budget or names the
wrong stage or cause.

    python tests/perf/bench_report.py [--hours 24] [--engines 32] [--interval 30]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from exporter.catalogue import LATENCY_FAMILIES, QUANTILES
from exporter.report.build import build_report
from exporter.report.prometheus import PrometheusClient, PrometheusOptions
from exporter.report.render_json import document
from exporter.report.render_pages import render_html
from exporter.report.windows import Window
from exporter.stages import ENGINE, of
from tests.integration.report_backfill import SCRAPE_LABELS, _labels, backfilled_prometheus
from tests.perf.table import Row, print_rows

BUDGET_SECONDS = 30.0
ENGINES_PER_NODE = 8


def _engine_labels(i: int) -> dict[str, str]:
    node = i // ENGINES_PER_NODE
    return {
        **SCRAPE_LABELS,
        "instance": f"node-{node}:9400",
        "engine": f"vllm-{i}",
        "engine_type": "vllm",
        "model": "model-a" if i % 2 == 0 else "model-b",
    }


def write_synthetic(out: IO[str], engines: int, start: float, hours: float, interval: float) -> int:
    """Series-major OpenMetrics (no snapshot kept in memory); returns sample lines."""
    times = [start + k * interval for k in range(int(hours * 3600 / interval))]
    incident_from = start + hours * 3600 / 2
    rng = random.Random(7)
    lines = 0

    def incident(t: float) -> bool:
        return t >= incident_from

    def family(name: str, kind: str, series_of) -> None:  # noqa: ANN001 - callable(engine) -> [(labels, fn)]
        nonlocal lines
        out.write(f"# TYPE {name[: -len('_total')] if kind == 'counter' else name} {kind}\n")
        for i in range(engines):
            for labels, value in series_of(i):
                sample = name if not labels.get("__suffix") else name + labels["__suffix"]
                text = _labels({k: v for k, v in labels.items() if k != "__suffix"})
                out.writelines(f"{sample}{text} {value(t, i):.6g} {t:.0f}\n" for t in times)
                lines += len(times)

    def gauge(fn):  # noqa: ANN001, ANN202
        return lambda i: [(_engine_labels(i), fn)]

    rate = lambda t, i: 10.0 if not incident(t) else 6.0  # noqa: E731 - completions/s per engine
    prompt = lambda t, i: 200.0 if not incident(t) else 800.0  # noqa: E731
    noise = {i: rng.uniform(0.95, 1.05) for i in range(engines)}
    family("llm_engine_up", "gauge", gauge(lambda t, i: 1.0))
    family("llm_engine_requests_running", "gauge", gauge(lambda t, i: (30 if not incident(t) else 20) * noise[i]))
    family("llm_engine_requests_waiting", "gauge", gauge(lambda t, i: 0 if not incident(t) else 120 * noise[i]))
    family("llm_engine_kv_cache_usage_ratio", "gauge", gauge(lambda t, i: 0.6 if not incident(t) else 0.98))
    family("llm_engine_prefix_cache_hit_ratio", "gauge", gauge(lambda t, i: 0.3))

    def counter(per_second):  # noqa: ANN001, ANN202
        return gauge(lambda t, i: per_second(t, i) * (t - start))

    family("llm_engine_prompt_tokens_total", "counter", counter(lambda t, i: rate(t, i) * prompt(t, i)))
    family("llm_engine_generation_tokens_total", "counter", counter(lambda t, i: rate(t, i) * 500))
    family("llm_engine_preemptions_total", "counter", counter(lambda t, i: 0 if not incident(t) else 1.5))
    family("llm_engine_process_cpu_seconds_total", "counter", counter(lambda t, i: 0.3))
    for name in LATENCY_FAMILIES.values():
        base = {"llm_engine_inter_token_latency_seconds": 0.02}.get(name, 0.5)

        def summary(i: int, base: float = base) -> list:  # noqa: ANN001
            labels = _engine_labels(i)
            slow = lambda t: 1.0 if not incident(t) else 3.0  # noqa: E731
            items = [
                ({**labels, "quantile": f"{q:g}"}, lambda t, i, q=q: base * (1 + 3 * q) * slow(t) * noise[i])
                for q in QUANTILES
            ]
            items.append(({**labels, "__suffix": "_count"}, lambda t, i: rate(t, i) * (t - start)))
            items.append(({**labels, "__suffix": "_sum"}, lambda t, i: rate(t, i) * (t - start) * base))
            return items

        family(name, "summary", summary)
    for gauge_name in ("llm_bottleneck_primary", "llm_bottleneck_score"):
        engine_stages = tuple(record.id for record in of(ENGINE))
        stages = (*engine_stages, "none") if gauge_name == "llm_bottleneck_primary" else engine_stages

        def per_stage(i: int, stages: tuple[str, ...] = stages, gauge_name: str = gauge_name) -> list:  # noqa: ANN001
            def value(stage: str):  # noqa: ANN202
                lead = "decode_memory_bandwidth"
                if gauge_name == "llm_bottleneck_primary":
                    return lambda t, i: float(stage == (lead if incident(t) else "none"))
                return lambda t, i: (0.9 if incident(t) else 0.2) if stage == lead else 0.1

            return [({**_engine_labels(i), "stage": s}, value(s)) for s in stages]

        family(gauge_name, "gauge", per_stage)
    gpu = lambda i: {**_engine_labels(i), "gpu": str(i % ENGINES_PER_NODE), "uuid": f"GPU-{i}"}  # noqa: E731
    for name, fn in (
        ("llm_gpu_utilization_ratio", lambda t, i: 0.99),
        ("llm_gpu_sm_active_ratio", lambda t, i: 0.5),
        ("llm_gpu_dram_active_ratio", lambda t, i: 0.7 if not incident(t) else 0.95),
        ("llm_gpu_tensor_active_ratio", lambda t, i: 0.15),
        ("llm_gpu_memory_used_bytes", lambda t, i: 70e9),
    ):
        family(
            name,
            "gauge",
            lambda i, fn=fn: [({k: v for k, v in gpu(i).items() if k not in ("model", "engine_type")}, fn)],
        )
    out.write("# EOF\n")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--engines", type=int, default=32)
    parser.add_argument("--interval", type=float, default=30)
    args = parser.parse_args()
    end = math.floor((time.time() - 3600) / 3600) * 3600
    start = end - args.hours * 3600
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        workdir = Path(tmp)
        openmetrics = workdir / "synthetic.om"
        began = time.monotonic()
        with openmetrics.open("w", encoding="utf-8") as out:
            lines = write_synthetic(out, args.engines, start, args.hours, args.interval)
        written = time.monotonic() - began
        began = time.monotonic()
        prometheus = backfilled_prometheus(openmetrics, workdir, timeout=1800)
        backfill = time.monotonic() - began
        try:
            half = start + args.hours * 1800
            windows = [Window("baseline", start, half), Window("incident", half, end)]
            client = PrometheusClient(PrometheusOptions(prometheus.url, timeout_seconds=120))
            prometheus_cpu, own_cpu = _cpu_seconds(prometheus.process.pid), time.process_time()
            began = time.monotonic()
            report = build_report(client, SCRAPE_LABELS_SELECTOR, windows)
            queried = time.monotonic() - began
            html = render_html(report)
            doc = json.dumps(document(report))
            total = time.monotonic() - began
            prometheus_cpu = _cpu_seconds(prometheus.process.pid) - prometheus_cpu
            own_cpu = time.process_time() - own_cpu
            client.close()
        finally:
            prometheus.close()
    cause = next((c for c in report.causes if c.explains), None)
    print(f"data: {args.engines} engines x {args.hours:g} h every {args.interval:g} s = {lines:,} samples")
    print(f"write OpenMetrics {written:.1f} s, promtool backfill + Prometheus start {backfill:.1f} s")
    print(
        f"report: step {report.step:g} s, rate window {report.rate_interval}, {len(report.rows)} matrix rows, "
        f"queries {queried:.1f} s, "
        f"with HTML ({len(html) / 1e6:.1f} MB) and JSON ({len(doc) / 1e6:.1f} MB) {total:.1f} s "
        f"(budget {BUDGET_SECONDS:g} s, {total / BUDGET_SECONDS:.0%} of it)"
    )
    # Wall time depends on what else the machine runs; the CPU both processes needed does not.
    load = os.getloadavg()[0]
    print(
        f"CPU: Prometheus {prometheus_cpu:.1f} s + report {own_cpu:.1f} s = {prometheus_cpu + own_cpu:.1f} s "
        f"on {os.cpu_count()} cores, load average {load:.1f} during the run"
    )
    print(f"primary: {report.primary}; cause: {cause.summary if cause else None}")
    ok = (
        report.primary.get("incident") == "decode_memory_bandwidth"
        and cause is not None
        and cause.figure == "mean_prompt_tokens"
    )
    print_rows(
        "bench_report",
        [
            Row(
                f"report over {args.hours:g} h of {args.engines} engines (queries, HTML and JSON), wall",
                total,
                "s",
                budget=f"< {BUDGET_SECONDS:g} s, right stage and cause",
                ok=ok and total < BUDGET_SECONDS,
            ),
            Row("the same, CPU of Prometheus and the report together", prometheus_cpu + own_cpu, "s"),
        ],
    )
    if not ok:
        print("FAIL: wrong stage or cause", file=sys.stderr)
        return 1
    return 0 if total < BUDGET_SECONDS else 1


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SCRAPE_LABELS_SELECTOR = f'job="{SCRAPE_LABELS["job"]}"'

if __name__ == "__main__":
    sys.exit(main())
