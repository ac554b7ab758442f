"""The report's GPU join and its errors against a real Prometheus holding data without staleness
markers (backfilled), where an engine's `llm_engine_up` changes its `model` label.

CI once failed here on a loaded machine: the simulated engine's first scrape timed out, the
exporter said `llm_engine_up{model=""} 0`, the next said the model, and both series were in the
lookback of every later step. Prometheus refused the report's GPU query with HTTP 422 and the
report said only "HTTP 422".
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from exporter.model import Sample
from exporter.monitoring.config import LabelNames
from exporter.report.prometheus import PrometheusClient, PrometheusError, PrometheusOptions
from exporter.report.queries import FIGURES_BY_KEY, QueryContext
from tests.integration.monitoring_stack import Prometheus
from tests.integration.report_backfill import SCRAPE_LABELS, backfilled_prometheus, write_openmetrics

SELECTOR = 'job="llm-bottleneck-exporter"'
ENGINE = {"engine": "vllm-0", "engine_type": "vllm"}
STEP = 10


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, float]]:
    t0 = math.floor((time.time() - 3 * 3600) / 60) * 60
    snapshots = []
    for i in range(60):  # ten minutes every 10 s
        up = Sample("llm_engine_up", {**ENGINE, "model": "" if i == 0 else "llama"}, 0.0 if i == 0 else 1.0)
        gpus = [Sample("llm_gpu_utilization_ratio", {"gpu": str(g), **ENGINE}, 0.25 * (g + 1)) for g in (0, 1)]
        snapshots.append((t0 + i * STEP, [up, *gpus]))
    workdir = tmp_path_factory.mktemp("report-joins")
    openmetrics = workdir / "joins.om"
    with openmetrics.open("w", encoding="utf-8") as out:
        write_openmetrics(out, snapshots, {**SCRAPE_LABELS, "instance": "node-0:9400"})
    server = backfilled_prometheus(openmetrics, workdir)
    try:
        yield server, t0
    finally:
        server.close()


@pytest.fixture
def client(prometheus: tuple[Prometheus, float]) -> Iterator[PrometheusClient]:
    c = PrometheusClient(PrometheusOptions(prometheus[0].url))
    yield c
    c.close()


def test_gpu_figures_join_the_engines_latest_model_while_an_older_series_is_in_the_lookback(
    prometheus: tuple[Prometheus, float], client: PrometheusClient
) -> None:
    _, t0 = prometheus
    ctx = QueryContext(SELECTOR, "1m", LabelNames())
    expr = FIGURES_BY_KEY["gpu_utilization"].build(ctx, "engine")
    assert expr is not None
    # Steps 10 s to 4 min: `model=""` (at t0) is in the 5-minute lookback of every one of them.
    series = client.query_range(expr, t0 + STEP, t0 + 240, STEP)
    assert [s.labels.get("model") for s in series] == ["llama"]
    assert all(math.isclose(v, 0.375) for _, v in series[0].points)
    assert len(series[0].points) == 24


def test_the_old_join_is_what_prometheus_refuses_and_its_message_reaches_the_user(
    prometheus: tuple[Prometheus, float], client: PrometheusClient
) -> None:
    """The plain `group by (instance, engine, model)` join is refused on this data, and the error
    carries Prometheus's own words, not only the status."""
    _, t0 = prometheus
    old = (
        f"avg by (cluster, engine, model) (llm_gpu_utilization_ratio{{{SELECTOR}}} * on (instance, engine) "
        f"group_left (model) group by (instance, engine, model) (llm_engine_up{{{SELECTOR}}}))"
    )
    with pytest.raises(PrometheusError) as refused:
        client.query_range(old, t0 + STEP, t0 + 240, STEP)
    message = str(refused.value)
    assert "HTTP 422 (execution)" in message
    assert "duplicate series" in message or "many-to-many" in message, message


def test_a_parse_error_says_where(client: PrometheusClient) -> None:
    with pytest.raises(PrometheusError) as refused:
        client.query("sum(llm_engine_up", time.time())
    assert "HTTP 400 (bad_data)" in str(refused.value)
    assert "parse error" in str(refused.value)


def test_the_message_is_bounded(client: PrometheusClient) -> None:
    """A query as long as a user can paste: Prometheus repeats it in its error; we show 500
    characters of it."""
    long_name = "x" * 5000
    with pytest.raises(PrometheusError) as refused:
        client.query(f"sum({long_name}", time.time())
    assert len(str(refused.value)) < 700
