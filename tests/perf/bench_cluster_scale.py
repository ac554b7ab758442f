"""Benchmark: one real Prometheus over 1 -> 8 -> 32 simulated nodes with the generated rules.

Each node is the documented size (8 H100s, 8 vLLM engines, 8 RDMA ports), simulated in this
process and read by its own in-process exporter (`ClusterView`: the exporter's ordinary sources
over loopback); its /metrics is served on its own port. A background thread advances the nodes
to the wall clock and re-collects them one after another, so counters move as they would. A real
Prometheus scrapes every node every `--scrape` seconds and evaluates the committed rule file
(alerts/generated/llm-bottleneck.rules.yaml) at the same interval. After `--settle` seconds it
prints, per cluster size:

- series per node (`scrape_samples_scraped`, budget 1,500) and in the head block;
- samples/s ingested (rate of `prometheus_tsdb_head_samples_appended_total`);
- rule evaluation time per group (`prometheus_rule_group_last_duration_seconds`), summed;
- dashboard query time: every panel query of every generated dashboard, run instantly with the
  template variables set to `.*`, p50 / p95 / max and the total;
- Prometheus RSS;

then the growth from 1 -> 8 -> 32 and a linear extrapolation to 1,000 nodes (the per-node slope
between 8 and 32 nodes, plus the fixed part). Keep it feasible on two cores: the exporters are in
this process, and Prometheus is the only subprocess.

    python tests/perf/bench_cluster_scale.py [--nodes 1 8 32] [--scrape 5] [--settle 60]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: make `tests` importable
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
import requests  # noqa: E402

from exporter.monitoring.config import MonitoringConfig  # noqa: E402
from exporter.monitoring.dashboards import boards  # noqa: E402
from exporter.monitoring.rule_files import RULES_PATH  # noqa: E402
from exporter.simulate.cluster import SimulatedCluster  # noqa: E402
from exporter.simulate.cluster_view import LiveClusterView  # noqa: E402
from exporter.simulate.scenario import parse_scenario  # noqa: E402
from tests.integration.monitoring_stack import Prometheus  # noqa: E402

SCENARIO = """
name: scale-{nodes}
seed: 3
warmup_seconds: 30
node: {{gpu: h100-sxm, gpus: 8, nics: 8}}
replicas:
  - model: llama-3.1-8b
    count: 8
nodes: {{count: {nodes}}}
workload:
  rate_per_second: 16
  prompt_tokens: {{mean: 600, cv: 0.5}}
  output_tokens: {{mean: 200, cv: 0.5}}
"""
BUDGET_PER_NODE = 1500
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclass
class Figures:
    nodes: int
    series_per_node: float
    head_series: float
    samples_per_second: float
    rule_seconds: float
    query_p50: float
    query_p95: float
    query_max: float
    query_total: float
    queries: int
    rss_mib: float


def panel_queries() -> list[str]:
    queries = []
    for board in boards(MonitoringConfig()).values():
        for panel in board.panels():
            for query in panel.definition.queries:
                expr = query.expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
                queries.append(_VARIABLE.sub(".*", expr))
    return queries


def own_metrics(prometheus: Prometheus) -> dict[str, float]:
    """Sums by family name of Prometheus' own /metrics (every label set added up)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    text = requests.get(f"{prometheus.url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


def scalar(prometheus: Prometheus, expr: str) -> float:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else float("nan")


def measure(nodes: int, scrape: float, settle: float) -> Figures:
    cluster = SimulatedCluster(parse_scenario(SCENARIO.format(nodes=nodes), f"scale-{nodes}"))
    cluster.advance(cluster.scenario.warmup_seconds)
    served = LiveClusterView(cluster, interval=scrape)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            config = {
                "global": {"scrape_interval": f"{scrape:g}s", "evaluation_interval": f"{scrape:g}s"},
                "rule_files": [str(REPO / RULES_PATH)],
                "scrape_configs": [
                    {
                        "job_name": "llm-bottleneck-exporter",
                        "static_configs": [
                            {"targets": [t], "labels": {"instance": f"{h}:9477"}} for h, t in served.targets().items()
                        ],
                    }
                ],
            }
            prometheus = Prometheus(config, Path(tmp))
            try:
                time.sleep(settle)
                job = 'job="llm-bottleneck-exporter"'
                series = scalar(prometheus, f"avg(scrape_samples_scraped{{{job}}})")
                # Prometheus' own figures from its /metrics, read twice for the ingest rate.
                # The rule groups' last duration read after each of five evaluations, the median
                # kept: one evaluation on a loaded machine can take several times another.
                first, first_at = own_metrics(prometheus), time.monotonic()
                durations = []
                for _ in range(5):
                    time.sleep(scrape)
                    second, second_at = own_metrics(prometheus), time.monotonic()
                    durations.append(second["prometheus_rule_group_last_duration_seconds"])
                head = second["prometheus_tsdb_head_series"]
                appended = "prometheus_tsdb_head_samples_appended_total"
                rate = (second[appended] - first[appended]) / (second_at - first_at)
                rules = statistics.median(durations)
                times = []
                for expr in panel_queries():
                    start = time.perf_counter()
                    requests.get(f"{prometheus.url}/api/v1/query", params={"query": expr}, timeout=60)
                    times.append(time.perf_counter() - start)
                rss = psutil.Process(prometheus.process.pid).memory_info().rss / 2**20
            finally:
                prometheus.close()
    finally:
        served.close()
    times.sort()
    return Figures(
        nodes,
        series,
        head,
        rate,
        rules,
        statistics.median(times),
        times[int(0.95 * (len(times) - 1))],
        times[-1],
        sum(times),
        len(times),
        rss,
    )


def extrapolate(small: Figures, large: Figures, attribute: str, target: int) -> float:
    """Linear from the two largest sizes; a slope below zero (noise on a loaded machine) counts as flat."""
    slope = max(0.0, (getattr(large, attribute) - getattr(small, attribute)) / (large.nodes - small.nodes))
    return getattr(large, attribute) + slope * (target - large.nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--scrape", type=float, default=5.0, help="scrape and rule interval, seconds")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds of scraping before measuring")
    args = parser.parse_args()
    results = []
    for n in args.nodes:
        started = time.monotonic()
        figures = measure(n, args.scrape, args.settle)
        results.append(figures)
        verdict = "within" if figures.series_per_node <= BUDGET_PER_NODE else "OVER"
        print(
            f"{n:4} nodes: {figures.series_per_node:6.0f} series/node ({verdict} the {BUDGET_PER_NODE} budget), "
            f"head {figures.head_series:7.0f} series, {figures.samples_per_second:8.0f} samples/s ingested, "
            f"rules {figures.rule_seconds * 1000:7.1f} ms per evaluation, "
            f"{figures.queries} dashboard queries p50 {figures.query_p50 * 1000:.1f} ms p95 "
            f"{figures.query_p95 * 1000:.1f} ms max {figures.query_max * 1000:.1f} ms (total "
            f"{figures.query_total:.2f} s), Prometheus RSS {figures.rss_mib:.0f} MiB "
            f"[{time.monotonic() - started:.0f} s]",
            flush=True,
        )
    if len(results) >= 2:
        first, small, large = results[0], results[-2], results[-1]
        for attribute, label in (
            ("samples_per_second", "samples/s"),
            ("rule_seconds", "rule evaluation s"),
            ("query_total", "dashboard queries s"),
            ("rss_mib", "Prometheus RSS MiB"),
        ):
            growth = " -> ".join(f"{getattr(r, attribute):.3g}" for r in results)
            per_node = getattr(large, attribute) / getattr(first, attribute) / (large.nodes / first.nodes)
            at_1000 = extrapolate(small, large, attribute, 1000)
            print(
                f"{label:22} {growth} over {' -> '.join(str(r.nodes) for r in results)} nodes "
                f"({per_node:.2f}x linear); at 1,000 nodes about {at_1000:.3g}"
            )
        print(
            f"at 1,000 nodes: {large.series_per_node * 1000:,.0f} series from the exporters; at a 15 s scrape "
            f"{large.series_per_node * 1000 / 15:,.0f} samples/s"
        )


if __name__ == "__main__":
    main()
