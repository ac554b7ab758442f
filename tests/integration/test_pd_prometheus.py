"""Disaggregated serving in a real Prometheus: the normalized transfer figures against the engines'
own series, and the case review of `pd-transfer-bound`.

Two scenarios run offline with the exporter reading them (`ExporterView`, every INTERVAL): the
vLLM-NIXL `pd-transfer-bound` (its pair moves across nodes at 150 s) and the SGLang `pd-healthy`.
At every collection each engine's own /metrics is read at the same simulated instant, as a
Prometheus scraping the engines would store it; both are backfilled into one real Prometheus
(OpenMetrics with timestamps → promtool blocks). Then the exporter's `llm_kv_transfer_*` series
must equal the same PromQL evaluated on the engines' own series, family by family, and the
report over pd-transfer-bound must name `kv_transfer` for the incident and the part of the time to
first token that grew.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import IO

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from exporter.report.build import Report, build_report
from exporter.report.prometheus import PrometheusClient, PrometheusOptions
from exporter.report.render_json import document
from exporter.report.windows import Window
from exporter.simulate.dcgm_text import pod_name
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import load_scenario
from tests.integration.monitoring_stack import Prometheus
from tests.integration.report_backfill import SCRAPE_LABELS, backfilled_prometheus, write_openmetrics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

INTERVAL = 10.0
SELECTOR = 'job="llm-bottleneck-exporter"'
#: pd-transfer-bound: same-node 0-150 s, cross-node 150-330 s (the first minute of it settling)
BASELINE, INCIDENT, DURATION = (30, 150), (210, 330), 330
HEALTHY_DURATION = 120
#: pd-healthy's samples go after pd-transfer-bound's: the node's own series (RDMA, GPUs) are the same
HEALTHY_OFFSET = DURATION + 60
#: the engines' own families the normalized ones are read from
ENGINE_PREFIXES = ("vllm:nixl_", "vllm:num_requests_kv_fetch_by_stage", "sglang:kv_transfer", "sglang:per_stage")
ENGINE_NAMES = ("sglang:num_prefill_inflight_queue_reqs", "sglang:num_decode_transfer_queue_reqs")
Point = tuple[float, str, dict[str, str], float]


def _engine_points(view: ExporterView, node: SimulatedNode, t: float) -> list[Point]:
    """Each engine's own hand-over samples at `t`, labelled as Prometheus would scrape them."""
    points = []
    for replica in node.replicas:
        text = requests.get(f"{view.server.url}/engine/{replica.index}/metrics", timeout=30).text
        instance = pod_name(node, replica.index)
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith(ENGINE_PREFIXES) or sample.name in ENGINE_NAMES:
                    labels = {**sample.labels, "job": "engines", "instance": instance}
                    points.append((t, sample.name, labels, sample.value))
    return points


def _run(name: str, duration: float) -> tuple[list, list[Point]]:
    node = SimulatedNode(load_scenario(name))
    view = ExporterView(node, interval=INTERVAL)
    snapshots, points = [], []
    try:
        for t, snapshot in view.run(duration, INTERVAL):
            snapshots.append((t, snapshot.metrics))
            points += _engine_points(view, node, t)
    finally:
        view.close()
    return snapshots, points


def _write_engine_series(out: IO[str], points: list[Point], t0: float) -> None:
    """The engines' samples as OpenMetrics `unknown` families (their types do not matter to PromQL)."""
    by_name: dict[str, dict[tuple, list[tuple[float, float]]]] = {}
    for t, name, labels, value in points:
        by_name.setdefault(name, {}).setdefault(tuple(sorted(labels.items())), []).append((t0 + t, value))
    for name, series in by_name.items():
        out.write(f"# TYPE {name} unknown\n")
        for key, values in series.items():
            body = ",".join(f'{k}="{v}"' for k, v in key)
            out.writelines(f"{name}{{{body}}} {value!r} {t:.3f}\n" for t, value in values)


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, float]]:
    bound, bound_points = _run("pd-transfer-bound", DURATION)
    healthy, healthy_points = _run("pd-healthy", HEALTHY_DURATION)
    healthy = [(t + HEALTHY_OFFSET, m) for t, m in healthy]
    healthy_points = [(t + HEALTHY_OFFSET, name, labels, v) for t, name, labels, v in healthy_points]
    t0 = math.floor((time.time() - 3 * 3600) / 60) * 60
    workdir = tmp_path_factory.mktemp("pd-prometheus")
    openmetrics = workdir / "pd.om"
    with openmetrics.open("w", encoding="utf-8") as out:
        write_openmetrics(out, [(t0 + t, m) for t, m in bound + healthy], {**SCRAPE_LABELS, "instance": "sim-node-0"})
        # write_openmetrics ends the file; the engines' families go before its EOF marker
    text = openmetrics.read_text(encoding="utf-8").removesuffix("# EOF\n")
    with openmetrics.open("w", encoding="utf-8") as out:
        out.write(text)
        _write_engine_series(out, bound_points + healthy_points, t0)
        out.write("# EOF\n")
    prometheus = backfilled_prometheus(openmetrics, workdir)
    try:
        yield prometheus, t0
    finally:
        prometheus.close()


def query(prometheus: Prometheus, expr: str, at: float) -> dict[str, float]:
    """{engine or instance: value} of an instant query at `at`."""
    response = requests.get(f"{prometheus.url}/api/v1/query", params={"query": expr, "time": str(at)}, timeout=30)
    response.raise_for_status()
    out = {}
    for item in response.json()["data"]["result"]:
        metric = item["metric"]
        out[metric.get("engine") or metric.get("instance") or ""] = float(item["value"][1])
    return out


def same(left: dict[str, float], right: dict[str, float], rel: float = 1e-9) -> None:
    assert left and set(left) == set(right), (left, right)
    for key, value in left.items():
        assert value == pytest.approx(right[key], rel=rel, abs=1e-9), (key, value, right[key])


@pytest.mark.parametrize("at", [BASELINE[1], INCIDENT[1]])
def test_vllm_nixl_figures_equal_the_engines_own_promql(backfilled: tuple[Prometheus, float], at: int) -> None:
    prometheus, t0 = backfilled
    when = t0 + at
    decode = 'role="decode"'
    pairs = [
        (
            f"sum by (engine) (increase(llm_kv_transfer_bytes_total{{{decode}}}[2m]))",
            'sum by (instance) (increase(vllm:nixl_bytes_transferred_sum{instance=~".*decode.*"}[2m]))',
        ),
        (
            f"sum by (engine) (llm_kv_transfer_transfers_total{{{decode}}})",
            'sum by (instance) (vllm:nixl_xfer_time_seconds_count{instance=~".*decode.*"})',
        ),
        (
            f"sum by (engine) (rate(llm_kv_transfer_seconds_sum{{{decode}}}[2m]))"
            f" / sum by (engine) (rate(llm_kv_transfer_seconds_count{{{decode}}}[2m]))",
            'sum by (instance) (rate(vllm:nixl_xfer_time_seconds_sum{instance=~".*decode.*"}[2m]))'
            ' / sum by (instance) (rate(vllm:nixl_xfer_time_seconds_count{instance=~".*decode.*"}[2m]))',
        ),
        (
            f'sum by (engine) (llm_kv_transfer_failures_total{{{decode}, kind="transfer"}})',
            'sum by (instance) (vllm:nixl_num_failed_transfers_total{instance=~".*decode.*"})',
        ),
        (
            'sum by (engine) (llm_kv_transfer_expired_total{role="prefill"})',
            'sum by (instance) (vllm:nixl_num_kv_expired_reqs_total{instance=~".*prefill.*"})',
        ),
        (
            f'sum by (engine) (llm_kv_transfer_pending_requests{{{decode}, side="receiver"}})',
            'sum by (instance) (vllm:num_requests_kv_fetch_by_stage{instance=~".*decode.*",'
            ' stage=~"waiting_to_start|in_progress"})',
        ),
        (
            # The exporter's byte rate is its window's increase over the window (60 s).
            f"sum by (engine) (llm_kv_transfer_bytes_per_second{{{decode}}})",
            'sum by (instance) (vllm:nixl_bytes_transferred_sum{instance=~".*decode.*"}'
            ' - vllm:nixl_bytes_transferred_sum{instance=~".*decode.*"} offset 1m) / 60',
        ),
    ]
    for ours, theirs in pairs:
        same(query(prometheus, ours, when), query(prometheus, theirs, when), rel=1e-6)
    # The incident's transfers cross RDMA and queue: several times the baseline's mean.
    if at == INCIDENT[1]:
        mean = pairs[2][0]
        before = query(prometheus, mean, t0 + BASELINE[1])
        after = query(prometheus, mean, when)
        assert all(after[e] > 5 * before[e] for e in after)


def test_sglang_figures_equal_the_engines_own_promql_and_its_speed_is_recomputed(
    backfilled: tuple[Prometheus, float],
) -> None:
    prometheus, t0 = backfilled
    when = t0 + HEALTHY_OFFSET + HEALTHY_DURATION
    prefill = 'instance=~"sglang.*prefill.*"'
    pairs = [
        (
            'sum by (engine) (llm_kv_transfer_bytes_total{engine=~"sglang.*", role="prefill"})',
            f"sum by (instance) (sglang:kv_transfer_total_mb_sum{{{prefill}}}) * 1e6",
        ),
        (
            'sum by (engine) (llm_kv_transfer_seconds_sum{engine=~"sglang.*", role="prefill"})',
            "sum by (instance) (sglang:per_stage_req_latency_seconds_sum"
            f'{{{prefill}, stage="prefill_transfer_kv_cache"}})',
        ),
        (
            'sum by (engine) (llm_kv_transfer_pending_requests{engine=~"sglang.*", role="prefill", side="sender"})',
            f"sum by (instance) (sglang:num_prefill_inflight_queue_reqs{{{prefill}}})",
        ),
    ]
    for ours, theirs in pairs:
        same(query(prometheus, ours, when), query(prometheus, theirs, when), rel=1e-6)
    # SGLang's own speed divides every chunk's bytes by the last chunk's time: the exporter's
    # bytes over transfer time stays below it, and below NVLink's 360 GB/s per direction.
    speed = query(prometheus, 'max by (engine) (llm_kv_transfer_speed_bytes_per_second{engine=~"sglang.*"})', when)
    sglang_speed = query(
        prometheus,
        f"sum by (instance) (rate(sglang:kv_transfer_speed_gb_s_sum{{{prefill}}}[1m]))"
        f" / sum by (instance) (rate(sglang:kv_transfer_speed_gb_s_count{{{prefill}}}[1m])) * 1e9",
        when,
    )
    assert speed and all(value < 3.6e11 for value in speed.values())
    assert all(sglang_speed[e] > 2 * speed[e] for e in speed)


@pytest.fixture(scope="module")
def report(backfilled: tuple[Prometheus, float]) -> Report:
    prometheus, t0 = backfilled
    windows = [Window(name, t0 + a, t0 + b) for name, (a, b) in (("baseline", BASELINE), ("incident", INCIDENT))]
    client = PrometheusClient(PrometheusOptions(prometheus.url))
    try:
        return build_report(client, f'{SELECTOR}, engine=~"vllm-.*"', windows, plots=False)
    finally:
        client.close()


def test_the_case_review_names_kv_transfer_and_the_part_of_ttft_that_grew(report: Report) -> None:
    doc = document(report)
    assert doc["primary"]["cluster"]["baseline"] == "none"
    assert doc["primary"]["cluster"]["incident"] == "kv_transfer"
    decode = [e for e in doc["primary"]["engines"] if "decode" in e["engine"]]
    assert decode and all(e["windows"]["incident"]["primary"] == "kv_transfer" for e in decode)
    walk = {s["stage"]: s for s in doc["walk"]}
    assert walk["kv_transfer"]["verdict"] == "became the bottleneck"
    grown = " | ".join(walk["kv_transfer"]["not"])
    print("case review, kv_transfer:", walk["kv_transfer"]["verdict"], "|", grown)
    assert "the time to first token's transfer" in grown and "part grew most" in grown, grown
    rows = {row["figure"]: row["windows"] for row in doc["matrix"] if row["level"] == "cluster"}
    transfer = rows["ttft_part_transfer"]
    print("ttft_part_transfer:", transfer["baseline"]["value"], "->", transfer["incident"]["value"])
    assert transfer["incident"]["value"] > 5 * transfer["baseline"]["value"], transfer
