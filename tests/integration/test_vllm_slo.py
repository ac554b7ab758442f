"""SLOs against a real vLLM on CPU: the exporter's attainment vs the client's, its headroom from
light load vs a concurrency sweep's actual break, and vLLM's own request spans over OTLP/HTTP
into the real `serve`.

One engine for the module, started with `--otlp-traces-endpoint` pointing at the exporter's OTLP
receiver (its OpenTelemetry packages provisioned by vllm_otel.py). Several TTFT SLOs on vLLM's
bucket edges are configured at once, so whatever this machine's latencies are, some of them are
neither always met nor never. Figures are printed (pytest -s) and checked:
- per-dimension attainment from the exporter equal to the engine's own TTFT buckets over the same
  load, and never below the fraction of client requests within the threshold by more than 2
  points (the client's TTFT adds its HTTP path, tens of milliseconds on a loaded machine, so the
  client sees fewer within a threshold, never more; the gap is printed);
- vLLM's own request spans reach `serve` over OTLP/HTTP: every request recorded, the joint
  attainment and the request mix exported (the span figures cover the last window; printed);
- headroom estimated at light load beside the concurrency where the sweep breaks (printed; the
  issue's budget is ±30 %, not asserted on a two-core machine shared with other tests).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator

import pytest
import yaml

from tests.integration.loadgen import LoadResult, LoadSpec, run_load
from tests.integration.vllm_otel import ensure_vllm_otel
from tests.integration.vllm_server import VllmServer
from tests.support import ExporterProcess, free_port

# Engine start-up alone can take minutes on a loaded two-core machine.
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

# vLLM's TTFT bucket edges (vllm/v1/metrics/buckets.py) in the range a tiny CPU model spans: from
# 5 ms, since the engine's own TTFT of these short prompts is mostly under 20 ms (96.5 % of 1,181
# requests once, with two CPU-bound processes beside it), to 1 s, where a starved machine's tail is.
# vLLM's own TTFT bucket edges: a threshold on an edge is exact. From 1 ms: a quiet run of this
# engine once had 97 % of its TTFTs within 5 ms, and no threshold inside the distribution.
EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
OBJECTIVE = 0.9
# Short answers: enough requests in 20 s that one request is about a point of attainment.
LIGHT = LoadSpec(concurrency=3, prompt_tokens=(16, 48), output_tokens=(4, 8), duration_s=20.0, seed=21)
SWEEP = (2, 4, 8, 16)
SWEEP_SECONDS = 8.0


def slo_name(edge: float) -> str:
    return f"ttft-{int(edge * 1000)}ms"


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ExporterProcess, VllmServer]]:
    ensure_vllm_otel()
    engine_port, otlp_port = free_port(), free_port()
    config = {
        "window_seconds": 20,
        "engines": [{"name": "vllm-0", "type": "vllm", "url": f"http://127.0.0.1:{engine_port}/metrics"}],
        "slos": [{"name": slo_name(e), "ttft_seconds": e, "objective": OBJECTIVE} for e in EDGES],
        "otlp": {"listen": f"127.0.0.1:{otlp_port}"},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(config, handle)
    exporter = ExporterProcess("--config", handle.name, interval=1.0)
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "500"}
    server = VllmServer(
        port=engine_port,
        env=env,
        extra_args=["--otlp-traces-endpoint", f"http://127.0.0.1:{otlp_port}/v1/traces"],
        startup_timeout_s=600,
    )
    try:
        server.start()
        yield exporter, server
    finally:
        server.stop()
        exporter.close()


def values(text: str, family: str) -> dict[str, float]:
    """slo label -> value of one family (summed over the other labels)."""
    out: dict[str, float] = {}
    for match in re.finditer(rf"^{family}\{{([^}}]*)\}} (\S+)$", text, re.MULTILINE):
        slo = re.search(r'slo="([^"]+)"', match.group(1))
        if slo:
            out[slo.group(1)] = out.get(slo.group(1), 0.0) + float(match.group(2))
    return out


INF = float("inf")


def bucket(text: str, edge: float) -> float:
    """vLLM's cumulative TTFT bucket at `edge` (le="+Inf" for INF)."""
    le = "+Inf" if edge == INF else f"{edge}"
    pattern = rf'^vllm:time_to_first_token_seconds_bucket\{{[^}}]*le="{re.escape(le)}"[^}}]*\}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.MULTILINE))


def settled(exporter: ExporterProcess, server: VllmServer, quiet_s: float = 2.5) -> tuple[str, str]:
    """The exporter's and the engine's texts once neither count moves: no load is running, so the
    engine's TTFT count stops when its last request finishes, and the exporter's once it has
    collected that (interval 1 s). Reading both only then is what makes their deltas comparable:
    a snapshot taken while the exporter was a collection behind the engine counted a few
    requests on one side only."""
    deadline = time.monotonic() + 60
    last: tuple[float, float] | None = None
    since = time.monotonic()
    while True:
        engine_text, exporter_text = server.metrics_text(), exporter.metrics()
        counts = (bucket(engine_text, INF), values(exporter_text, "llm_slo_events_total").get(slo_name(EDGES[0]), 0.0))
        if counts != last:
            last, since = counts, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return exporter_text, engine_text
        assert time.monotonic() < deadline, f"counts never settled: engine, exporter = {counts}"
        time.sleep(0.5)


def client_within(result: LoadResult, threshold: float) -> float:
    ttfts = [r.ttft_s for r in result.ok_records if r.ttft_s is not None]
    return sum(1 for t in ttfts if t <= threshold) / len(ttfts)


def test_exporter_attainment_and_span_joint_attainment_agree_with_the_client(stack) -> None:
    exporter, server = stack
    run_load(server.base_url, LoadSpec(concurrency=1, duration_s=3.0, seed=20))  # warm the engine
    exporter.wait_for(lambda t: "llm_slo_events_total" in t, timeout=30)
    before, engine_before = settled(exporter, server)
    events0, good0 = values(before, "llm_slo_events_total"), values(before, "llm_slo_good_events_total")
    result = run_load(server.base_url, LIGHT)
    assert result.error_count == 0 and len(result.ok_records) >= 20
    total = len(result.ok_records)
    # 2 points, as the issue asks; with fewer than 50 requests one request is more than that.
    tolerance = max(0.02, 1.0 / total)
    exporter.wait_for(
        lambda t: (
            values(t, "llm_slo_events_total").get(slo_name(EDGES[0]), 0) - events0.get(slo_name(EDGES[0]), 0) >= total
        ),
        timeout=30,
    )
    # The exporter's counts are the engine's own: its TTFT buckets over the same load.
    after, engine_after = settled(exporter, server)
    events, good = values(after, "llm_slo_events_total"), values(after, "llm_slo_good_events_total")
    # The engine times TTFT from the request's arrival in vLLM; the client adds its HTTP path and
    # the first chunk's streaming — tens of milliseconds on a loaded two-core machine, and not a
    # constant. So the client can never see more requests within a threshold than the engine
    # does, and sees fewer where the offset moves requests across it: printed, bounded one way.
    print(f"\n{total} requests; {'SLO':12} {'client':>8} {'exporter':>9} {'engine':>8}")
    checked = 0
    for edge in EDGES:
        name = slo_name(edge)
        exported = (good[name] - good0.get(name, 0)) / (events[name] - events0.get(name, 0))
        engine = (bucket(engine_after, edge) - bucket(engine_before, edge)) / (
            bucket(engine_after, INF) - bucket(engine_before, INF)
        )
        client = client_within(result, edge)
        print(f"{'':14}{name:12} {client:8.1%} {exported:9.1%} {engine:8.1%}")
        assert abs(exported - engine) <= 1.0 / total, (name, exported, engine)
        assert client <= exported + tolerance, (name, client, exported, total)
        checked += 0.05 < exported < 0.95
    # The spans: every request arrived; joint attainment and the request mix are exported.
    text = exporter.wait_for(lambda t: "llm_slo_joint_attainment_ratio" in t, timeout=30)
    spans = values(text, "llm_slo_joint_attainment_ratio")
    recorded = re.search(r'^llm_otlp_spans_total\{result="recorded"\} (\S+)$', text, re.MULTILINE)
    assert recorded and float(recorded.group(1)) >= total
    assert re.search(r"^llm_request_generation_tokens_count\{", text, re.MULTILINE)
    for edge in EDGES:
        print(f"{slo_name(edge):12} spans (last 20 s window) {spans.get(slo_name(edge), float('nan')):7.1%}")
    assert checked >= 1, "no threshold fell inside the latency distribution: widen EDGES"


def test_headroom_at_light_load_beside_the_concurrency_sweeps_break(stack) -> None:
    exporter, server = stack
    light = run_load(server.base_url, LIGHT)
    text = exporter.wait_for(lambda t: "llm_capacity_max_concurrency" in t, timeout=30)
    estimate_concurrency = values(text, "llm_capacity_max_concurrency")
    estimate_rate = values(text, "llm_capacity_max_request_rate")
    confidence = values(text, "llm_capacity_estimate_confidence_ratio")
    breaks: dict[str, tuple[int, float]] = {}
    print(f"\n{'concurrency':>11} {'req/s':>7} " + " ".join(f"{slo_name(e):>10}" for e in EDGES))
    for concurrency in SWEEP:
        started = time.monotonic()
        result = run_load(
            server.base_url, LoadSpec(concurrency=concurrency, duration_s=SWEEP_SECONDS, seed=30 + concurrency)
        )
        rate = len(result.ok_records) / (time.monotonic() - started)
        within = {slo_name(e): client_within(result, e) for e in EDGES}
        print(f"{concurrency:11d} {rate:7.2f} " + " ".join(f"{within[n]:10.1%}" for n in within))
        for name, attained in within.items():
            if attained >= OBJECTIVE:
                breaks[name] = (concurrency, rate)
    print(f"{'SLO':12} {'sweep: last c meeting it':>24} {'its req/s':>9} {'estimate c':>10} {'req/s':>7} {'conf':>5}")
    for edge in EDGES:
        name = slo_name(edge)
        c, rate = breaks.get(name, (0, 0.0))
        print(
            f"{name:12} {c:24d} {rate:9.2f} {estimate_concurrency.get(name, float('nan')):10.1f} "
            f"{estimate_rate.get(name, float('nan')):7.2f} {confidence.get(name, float('nan')):5.2f}"
        )
    # An SLO the light load already misses has no capacity left (0); one it meets has some.
    met = [slo_name(e) for e in EDGES if client_within(light, e) >= OBJECTIVE + 0.05]
    assert met and all(estimate_rate.get(name, 0) > 0 for name in met), (met, estimate_rate)
