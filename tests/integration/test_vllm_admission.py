"""A real vLLM with an admission limit under overload: refusals counted, goodput down by the refused
share, the verdict still queueing.

vLLM 0.32.0 on CPU (the tier's VllmServer) with `--max-num-seqs 2` (two batch slots) and
`--max-num-queued-reqs 6` (at most six unfinished requests: two running, four waiting); the real
`serve` scrapes it every second with a lenient SLO (every served request within it), so any miss
is a refusal. Twelve clients (short prompts, 48-96 tokens out, 0.2 s back-off after a 503) keep it
past its limit for 45 s. Checked (figures printed with -s):
- during the overload, /diagnosis names `queueing` and says how many requests were refused;
- after the load drained, over a window holding the whole run: the exporter's attainment equals
  the served share of arrivals by vLLM's own counters (`e2e_request_latency_seconds_count` served,
  `admission_rejections_total` refused) within 2 points, and so does the clients' own count of
  503s; goodput is the completed-request rate (vLLM's count over the window's span, timed here to
  within a scrape) less that share, within 5 % (the span's uncertainty).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.loadgen import LoadResult, LoadSpec, run_load
from tests.integration.vllm_server import VllmServer, metric_sum
from tests.support import ExporterProcess, free_port, series_value

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

ENGINE_ARGS = {"max-num-seqs": 2, "max-num-queued-reqs": 6}
OVERLOAD = LoadSpec(
    concurrency=12,
    prompt_tokens=(16, 48),
    output_tokens=(48, 96),
    duration_s=45.0,
    request_timeout_s=120.0,
    error_backoff_s=0.2,
    seed=51,
)
#: long enough to hold the whole run, so its increase is the run's
WINDOW_SECONDS = 600
LENIENT = {"name": "lenient", "objective": 0.9, "e2e_seconds": 960.0}


def values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def one(text: str, name: str, **labels: str) -> float:
    matches = [v for key, v in values(text, name).items() if all((k, w) in key for k, w in labels.items())]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


def failed_scrapes(text: str) -> float:
    errors = values(text, "llm_exporter_source_errors_total")
    return sum(count for key, count in errors.items() if ("target", "vllm-0") in key)


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ExporterProcess, VllmServer, float]]:
    """The engine, the exporter scraping it, and when the exporter first saw it up (its window's
    first point, within a scrape interval)."""
    port = free_port()
    config = {
        "window_seconds": WINDOW_SECONDS,
        "engines": [{"name": "vllm-0", "type": "vllm", "url": f"http://127.0.0.1:{port}/metrics"}],
        "slos": [LENIENT],
        # not a warm-up test: the engine starts after the exporter, and is judged as soon as it
        # serves (test_vllm_restart.py has the cold regime)
        "health": {"warmup_seconds": 0},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(config, handle)
    server = VllmServer(port=port, engine_args=ENGINE_ARGS, startup_timeout_s=600)
    exporter = ExporterProcess("--config", handle.name, interval=1.0)
    try:
        server.start()
        # The load starts once the exporter has scraped the engine: its windows start at that
        # scrape (what it never saw is not counted), so a load begun before it loses its first
        # second of refusals and completions (any "} 1.0" in the text once let it begin early).
        exporter.wait_for(lambda text: series_value(text, "llm_engine_up", engine="vllm-0") == 1.0, timeout=60)
        yield exporter, server, time.monotonic()
    finally:
        server.stop()
        exporter.close()


def test_refusals_are_slo_misses_and_the_verdict_stays_queueing(
    stack: tuple[ExporterProcess, VllmServer, float],
) -> None:
    exporter, server, first_seen = stack
    failed_before = failed_scrapes(exporter.metrics())  # those of the engine's start-up
    result: list[LoadResult] = []
    load = threading.Thread(target=lambda: result.append(run_load(server.base_url, OVERLOAD)), daemon=True)
    started = time.monotonic()
    load.start()
    # The diagnosis judges over its 30 s level window: ask once the overload has filled it.
    time.sleep(35.0)
    during = requests.get(exporter.base_url + "/diagnosis", timeout=10).json()
    load.join(OVERLOAD.duration_s + OVERLOAD.request_timeout_s + 60)
    run_seconds = time.monotonic() - started
    assert result, "the load generator did not finish"
    clients = result[0]
    deadline = time.monotonic() + 60
    while metric_sum(requests.get(server.metrics_url, timeout=10).text, "vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, "the engine did not drain"
        time.sleep(0.5)
    time.sleep(3.0)  # two more scrapes of the drained engine
    engine_text = requests.get(server.metrics_url, timeout=10).text
    text = exporter.metrics()
    window_seconds = time.monotonic() - first_seen  # the run's window, to within a scrape or two

    served = metric_sum(engine_text, "vllm:e2e_request_latency_seconds_count")
    refused = metric_sum(engine_text, "vllm:admission_rejections_total")
    assert served and refused, (served, refused)
    engine_share = refused / (served + refused)
    # A refused request reaches the client as a 503, or, when the server answers before it has read
    # the whole request and closes, as a dropped connection: every failure here is a refusal (the
    # engine's count below says so: served + refused = the client's requests).
    failures = [r.error for r in clients.records if r.error]
    kinds = Counter("HTTP 503" if e.startswith("HTTP 503") else e.split(":")[0] for e in failures)
    client_refused = len(failures)
    client_share = client_refused / len(clients.records)
    attainment = one(text, "llm_slo_attainment_ratio", dimension="e2e", slo="lenient")
    goodput = one(text, "llm_slo_goodput_requests_per_second", dimension="e2e", slo="lenient")
    completed_rate = served / window_seconds  # the engine served nothing before the load
    # An overloaded engine's /metrics misses the scrape deadline now and then: the window spans
    # those gaps (exporter/slo/refusals.py), so the figures below hold with them.
    failed = failed_scrapes(text) - failed_before
    (entry,) = during["engines"]
    figures = (
        f"engine: {served:.0f} served, {refused:.0f} refused ({engine_share:.1%}); clients: "
        f"{len(clients.ok_records)} served, {client_refused} refused ({client_share:.1%}: {dict(kinds)}) of "
        f"{len(clients.records)}; exporter: attainment {attainment:.3f}, goodput {goodput:.2f} req/s of "
        f"{completed_rate:.2f} completed (run {run_seconds:.0f} s, {failed:.0f} failed scrapes)"
    )
    print(f"\n{figures}; verdict during the overload: {entry['primary']} {entry['scores']}")
    print(f"  evidence: {entry['evidence']}")
    assert one(text, "llm_engine_admission_rejections_total", reason="max_num_queued_reqs") == refused, figures
    # Every served request is within the lenient SLO: the misses are the refusals, no more, no less.
    assert attainment == pytest.approx(1.0 - engine_share, abs=0.02), figures
    assert client_share == pytest.approx(engine_share, abs=0.02), figures
    assert len(clients.ok_records) == pytest.approx(served, abs=0.02 * served), figures
    assert goodput == pytest.approx(completed_rate * (1.0 - engine_share), rel=0.05), figures
    assert goodput < completed_rate
    assert entry["primary"] == "queueing"
    assert any("refused at admission (max_num_queued_reqs)" in line for line in entry["evidence"])
