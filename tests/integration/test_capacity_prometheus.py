"""The exporter's cost figures equal the same PromQL evaluated by a real Prometheus
(docs/capacity.md, "The cost of a request").

A stand-in vLLM (its families, counters growing at fixed rates with the wall clock, so any window
reads the same rates) and a dcgm-exporter capture (two Tesla T4s, attributed to it) are scraped
both by the exporter and by Prometheus; Prometheus also scrapes the exporter. The figures the
exporter exports are then compared with the documented expressions evaluated by Prometheus on the
engine's and the GPUs' own series, independently of the exporter's arithmetic:

    cost per second  = count(GPUs of the model priced) × price / 3600
    per request      = cost per second / rate(requests)
    prompt share     = (rate(ttft_sum) − rate(queue_sum)) / (rate(e2e_sum) − rate(queue_sum))
    per M prompt     = cost per second × share / rate(prompt tokens) × 10⁶ (generated: 1 − share)
    at SLO capacity  = cost per second / llm_capacity_max_request_rate (the exporter's estimate)

The exporter's rates come from its own window between its collections, Prometheus' from its
scrapes: they agree to the skew between the two clocks (a few ms over a 20 s window, more on a
loaded machine; 0.03 % in the runs so far), so the comparison allows 2 %; the figures no rate
enters (the GPUs' price, the cost at the estimated capacity) agree exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from tests.integration.monitoring_stack import Prometheus
from tests.support import ExporterProcess, RouteServer, respond_with

pytestmark = pytest.mark.timeout(300)

FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter" / "dcgm-exporter-t4-pods-runai-1-workload.prom"
)
PRICE = 0.35  # per T4-hour
MODEL = "llama"
# per second: requests, and per request: prompt and generated tokens, seconds in e2e, TTFT, queue
RATE, PROMPT, GENERATED, E2E, TTFT, QUEUE = 2.0, 900.0, 200.0, 4.0, 0.3, 0.1
WINDOW = 20


class LinearVllm:
    """A vLLM /metrics whose counters grow at fixed rates with the wall clock."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def text(self) -> str:
        n = RATE * (time.monotonic() - self.started)
        model = f'model_name="{MODEL}"'
        lines = [
            f"vllm:num_requests_running{{{model}}} {RATE * E2E}",
            f"vllm:num_requests_waiting{{{model}}} 0",
            f"vllm:kv_cache_usage_perc{{{model}}} 0.2",
            f"vllm:prompt_tokens_total{{{model}}} {n * PROMPT}",
            f"vllm:generation_tokens_total{{{model}}} {n * GENERATED}",
        ]
        for family, per_request, count in (
            ("vllm:e2e_request_latency_seconds", E2E, n),
            ("vllm:time_to_first_token_seconds", TTFT, n),
            ("vllm:request_queue_time_seconds", QUEUE, n),
            ("vllm:inter_token_latency_seconds", (E2E - TTFT) / (GENERATED - 1), n * (GENERATED - 1)),
        ):
            lines += [f"# TYPE {family} histogram"]
            lines += [f'{family}_bucket{{{model},le="{le}"}} {count}' for le in ("10.0", "+Inf")]
            lines += [f"{family}_sum{{{model}}} {count * per_request}", f"{family}_count{{{model}}} {count}"]
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, ExporterProcess]]:
    engine = LinearVllm()

    def metrics(handler: BaseHTTPRequestHandler) -> None:
        respond_with(engine.text())(handler)

    servers = RouteServer({"/metrics": metrics, "/dcgm": respond_with(FIXTURE.read_text("utf-8"))})
    workdir = tmp_path_factory.mktemp("capacity")
    config = {
        "window_seconds": WINDOW,
        "engines": [{"name": "vllm-0", "type": "vllm", "url": servers.url("/metrics")}],
        "gpu_attribution": {"static": {"vllm-0": [0, 1]}, "processes": False, "pod_resources_socket": ""},
        "slos": [{"name": "chat", "e2e_seconds": 10.0, "objective": 0.95}],
        "capacity": {"gpu_hour_price": {"Tesla T4": PRICE, "default": 99.0}},
    }
    (workdir / "exporter.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    exporter = ExporterProcess(
        "--config", str(workdir / "exporter.yaml"), "--gpu", f"dcgm-exporter={servers.url('/dcgm')}", interval=0.5
    )
    target = {"scrape_interval": "1s", "scrape_timeout": "900ms"}
    prometheus = Prometheus(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "exporter", **target, "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]},
                {"job_name": "engine", **target, "static_configs": [{"targets": [f"127.0.0.1:{servers.port}"]}]},
                {
                    "job_name": "dcgm",
                    **target,
                    "metrics_path": "/dcgm",
                    "static_configs": [{"targets": [f"127.0.0.1:{servers.port}"]}],
                },
            ],
        },
        workdir,
    )
    try:
        yield prometheus, exporter
    finally:
        prometheus.close()
        exporter.close()
        servers.close()


def scalar(prometheus: Prometheus, expr: str) -> float:
    result = prometheus.query(expr)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def test_cost_figures_equal_the_documented_promql(stack: tuple[Prometheus, ExporterProcess]) -> None:
    prometheus, exporter = stack
    # Both sides need a full window: the exporter's own, and Prometheus' range of the same length
    # over a series older than it (a range that reaches back before a series' first sample is
    # extrapolated by half an interval only, and reads the rate low).
    exporter.wait_for(lambda text: "llm_cost_per_request{" in text and 'load="slo_capacity"' in text, timeout=120)
    deadline = time.monotonic() + 120
    ours = 'job="exporter", engine="vllm-0"'
    while time.monotonic() < deadline:
        if prometheus.query(f'llm_cost_per_request{{{ours}, load="current"}}') and prometheus.query(
            f'count_over_time(vllm:e2e_request_latency_seconds_count{{job="engine"}}[{2 * WINDOW}s]) >= {WINDOW + 5}'
        ):
            break
        time.sleep(1)
    w = f"[{WINDOW}s]"
    per_second = f'(count(DCGM_FI_DEV_GPU_UTIL{{job="dcgm", modelName="Tesla T4"}}) * {PRICE} / 3600)'
    requests = f'sum(rate(vllm:e2e_request_latency_seconds_count{{job="engine"}}{w}))'
    share = (
        f'((sum(rate(vllm:time_to_first_token_seconds_sum{{job="engine"}}{w})) - '
        f'sum(rate(vllm:request_queue_time_seconds_sum{{job="engine"}}{w})))'
        f' / (sum(rate(vllm:e2e_request_latency_seconds_sum{{job="engine"}}{w})) - '
        f'sum(rate(vllm:request_queue_time_seconds_sum{{job="engine"}}{w}))))'
    )
    prompt = f'sum(rate(vllm:prompt_tokens_total{{job="engine"}}{w}))'
    generated = f'sum(rate(vllm:generation_tokens_total{{job="engine"}}{w}))'
    capacity = f'max(llm_capacity_max_request_rate{{{ours}, slo="chat"}})'
    expected = {
        "per_hour": f"{per_second} * 3600",
        "request": f"{per_second} / {requests}",
        "prompt": f"{per_second} * {share} / {prompt} * 1e6",
        "generated": f"{per_second} * (1 - {share}) / {generated} * 1e6",
        "request_at_capacity": f"{per_second} / {capacity}",
    }
    exported = {
        "per_hour": f"max(llm_cost_per_hour{{{ours}}})",
        "request": f'max(llm_cost_per_request{{{ours}, load="current"}})',
        "prompt": f'max(llm_cost_per_million_tokens{{{ours}, load="current", tokens="prompt"}})',
        "generated": f'max(llm_cost_per_million_tokens{{{ours}, load="current", tokens="generated"}})',
        "request_at_capacity": f'max(llm_cost_per_request{{{ours}, load="slo_capacity", slo="chat"}})',
    }
    values = {key: (scalar(prometheus, exported[key]), scalar(prometheus, expected[key])) for key in expected}
    for key, (got, want) in values.items():
        print(f"{key:20} exporter {got:.9g}  PromQL {want:.9g}")
    assert values["per_hour"][0] == pytest.approx(2 * PRICE)  # two T4s, the default price never used
    for key, (got, want) in values.items():
        assert got == pytest.approx(want, rel=0.02), key
    # The stand-in's truth, independent of both: 2 T4s at 0.35 an hour over 2 requests a second.
    assert values["request"][1] == pytest.approx(2 * PRICE / 3600 / RATE, rel=0.01)
    # Where no rate enters, exact: the price of the GPUs, and the cost at the estimated capacity.
    for key in ("per_hour", "request_at_capacity"):
        got, want = values[key]
        assert got == pytest.approx(want, rel=1e-9) and math.isfinite(got), key
